// A minimal MCP Apps host page built on the official SDK's host side
// (AppBridge from @modelcontextprotocol/ext-apps/app-bridge), for the
// browser test of the Pilotage views (platform/cli/tests/all/mcp_apps.rs).
// Bundled by esbuild into target/interop-apps/host.js and served, with the
// test's page, by the test's loopback HTTP server.
//
// window.pilotageHost.mount({html, resourceMeta, tool, toolInput, toolResult})
//   renders a view's HTML in a sandboxed iframe (scripts only, an opaque
//   origin) under the CSP a host derives from the resource's _meta.ui.csp,
//   answers ui/initialize through AppBridge, sends the tool input and the
//   tool result once the view says it is initialized, forwards the view's
//   tools/call to the test's relay (POST /relay; the Rust side calls the real
//   server with its own credentials, which neither page nor view holds), and
//   sizes the frame from ui/notifications/size-changed. Resolves once the
//   tool result is sent.
// window.pilotageHost.log     what crossed the bridge, in order
// window.pilotageHost.heights the heights the view reported
// window.pilotageHost.csp     the CSP the view was rendered under
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

const log = [];
const heights = [];
let current = null;

// The view's CSP as SEP-1865 asks a host to build it from the declared
// domains: nothing beyond inline code and data: images when none is given.
function cspFrom(declared) {
  const csp = declared || {};
  const origins = (list) => (Array.isArray(list) ? list.filter((o) => typeof o === "string") : []);
  const resources = origins(csp.resourceDomains).join(" ");
  const connect = origins(csp.connectDomains);
  const frames = origins(csp.frameDomains);
  const bases = origins(csp.baseUriDomains);
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${resources}`.trim(),
    `style-src 'unsafe-inline' ${resources}`.trim(),
    `img-src data: ${resources}`.trim(),
    `font-src data: ${resources}`.trim(),
    `media-src data: ${resources}`.trim(),
    `connect-src ${connect.length ? connect.join(" ") : "'none'"}`,
    `frame-src ${frames.length ? frames.join(" ") : "'none'"}`,
    `base-uri ${bases.length ? bases.join(" ") : "'none'"}`,
    "form-action 'none'",
  ].join("; ");
}

function withCsp(html, policy) {
  const escaped = policy.replace(/&/g, "&amp;").replace(/"/g, "&quot;");
  const meta = `<meta http-equiv="Content-Security-Policy" content="${escaped}">`;
  const head = html.match(/<head[^>]*>/i);
  if (!head) return meta + html;
  const at = head.index + head[0].length;
  return html.slice(0, at) + meta + html.slice(at);
}

async function relay(method, params) {
  const answer = await fetch("/relay", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ method, params }),
  });
  const body = await answer.json();
  if (body.error) throw new Error(body.error.message);
  return body.result;
}

async function mount({ html, resourceMeta, tool, toolInput, toolResult }) {
  if (current) {
    await current.bridge.close().catch(() => {});
    current.frame.remove();
  }
  const policy = cspFrom(resourceMeta && resourceMeta.ui && resourceMeta.ui.csp);
  window.pilotageHost.csp = policy;
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("title", `MCP App of ${tool.name}`);
  frame.id = "view";
  frame.style.width = "100%";
  frame.style.border = resourceMeta && resourceMeta.ui && resourceMeta.ui.prefersBorder ? "1px solid #888" : "0";
  frame.style.height = "200px";
  document.getElementById("views").appendChild(frame);

  const bridge = new AppBridge(
    null,
    { name: "pilotage-test-host", version: "1.0.0" },
    { serverTools: {}, logging: {} },
    {
      hostContext: {
        theme: "light",
        platform: "web",
        displayMode: "inline",
        availableDisplayModes: ["inline"],
        locale: "en-GB",
        toolInfo: { tool },
        containerDimensions: { maxHeight: 6000, width: 960 },
      },
    },
  );
  const delivered = new Promise((resolve, reject) => {
    bridge.oninitialized = () => {
      log.push({ from: "view", method: "ui/notifications/initialized" });
      bridge
        .sendToolInput({ arguments: toolInput })
        .then(() => bridge.sendToolResult(toolResult))
        .then(() => {
          log.push({ from: "host", method: "ui/notifications/tool-result" });
          resolve(true);
        }, reject);
    };
  });
  bridge.oncalltool = async (params) => {
    log.push({ from: "view", method: "tools/call", name: params.name });
    return relay("tools/call", params);
  };
  bridge.onsizechange = ({ height }) => {
    if (typeof height === "number") {
      heights.push(height);
      frame.style.height = `${height}px`;
    }
  };
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  current = { bridge, frame };
  frame.srcdoc = withCsp(html, policy);
  const timeout = new Promise((_, reject) =>
    setTimeout(() => reject(new Error("the view never completed ui/initialize")), 15000),
  );
  return Promise.race([delivered, timeout]);
}

window.pilotageHost = { mount, log, heights, csp: null };
