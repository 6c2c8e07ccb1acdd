// The view side of MCP Apps (SEP-1865, specification 2026-01-26) for the
// Pilotage plan view and Run view (platform/server/src/mcp/apps.rs).
//
// Hand-written, no framework, no network: everything shown arrives from the
// host over postMessage JSON-RPC 2.0, and is drawn by the shared renderer
// (globalThis.PilotageView, console/assets/view.js).
//
//   view -> host  ui/initialize (request), ui/notifications/initialized,
//                 ui/notifications/size-changed, and for the Run view
//                 tools/call (the host forwards it to the server with its
//                 own credentials; the view holds none)
//   host -> view  ui/notifications/tool-input, ui/notifications/tool-result,
//                 ui/notifications/tool-cancelled,
//                 ui/notifications/host-context-changed, ping,
//                 ui/resource-teardown
//
// The plan view renders the validate result it is given. The Run view
// renders the execute or trace-fetch result; when the tool input carried
// the program, it has the host call pilotage_manifest (to learn the
// Language's validate tool) and then that validate tool with the program,
// and draws the plan above the trace.
(function () {
  "use strict";

  // The MCP Apps revision this glue speaks (the SDK's LATEST_PROTOCOL_VERSION).
  var PROTOCOL_VERSION = "2026-01-26";
  // How long a request to the host may go unanswered.
  var REQUEST_TIMEOUT_MS = 30000;
  // The extension's _meta key and its fixed manifest tool (Part III §3, §5).
  var PILOTAGE_META = "io.github.jafarsa0/pilotage";
  var MANIFEST_TOOL = "pilotage_manifest";

  var body = document.body;
  var viewName = body.getAttribute("data-view") || "pilotage-view";
  var isRunView = viewName === "pilotage-run-view";
  var root = document.getElementById("pv-root");
  var statusLine = document.getElementById("pv-status");
  var host = window.parent;

  var nextId = 1;
  var pending = {};
  var hostCapabilities = {};
  var hostContext = {};
  var state = { input: null, result: null, run: null, plan: null, planAsked: false, planNote: null };
  var NO_PROGRAM = "The plan is shown when the call carries the program itself.";

  function setStatus(text) {
    statusLine.textContent = text;
  }

  // ---- JSON-RPC over postMessage -------------------------------------

  function send(message) {
    // The view's parent is the host (or its sandbox proxy); its origin is
    // not known to a sandboxed view, so "*" (SEP-1865 "Transport").
    host.postMessage(message, "*");
  }

  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      var timer = setTimeout(function () {
        delete pending[id];
        reject(new Error(method + " had no answer within " + REQUEST_TIMEOUT_MS / 1000 + " s"));
      }, REQUEST_TIMEOUT_MS);
      pending[id] = { resolve: resolve, reject: reject, timer: timer };
      send({ jsonrpc: "2.0", id: id, method: method, params: params || {} });
    });
  }

  function notify(method, params) {
    send({ jsonrpc: "2.0", method: method, params: params || {} });
  }

  function answer(id, result) {
    send({ jsonrpc: "2.0", id: id, result: result });
  }

  function refuse(id, code, message) {
    send({ jsonrpc: "2.0", id: id, error: { code: code, message: message } });
  }

  function onResponse(message) {
    var waiting = pending[message.id];
    if (!waiting) return;
    delete pending[message.id];
    clearTimeout(waiting.timer);
    if (message.error) {
      var error = new Error(String(message.error.message || "error " + message.error.code));
      error.code = message.error.code;
      waiting.reject(error);
    } else {
      waiting.resolve(message.result || {});
    }
  }

  function onRequest(message) {
    switch (message.method) {
      case "ping":
        answer(message.id, {});
        break;
      case "ui/resource-teardown":
        // Nothing to save or release: the view holds no state of its own.
        answer(message.id, {});
        break;
      default:
        refuse(message.id, -32601, "Method not found: " + message.method);
    }
  }

  function onNotification(message) {
    var params = message.params || {};
    switch (message.method) {
      case "ui/notifications/tool-input":
        state.input = params.arguments && typeof params.arguments === "object" ? params.arguments : {};
        if (isRunView && initialized) askForPlan();
        break;
      case "ui/notifications/tool-result":
        state.result = params;
        if (isRunView) showRun();
        else showPlan();
        break;
      case "ui/notifications/tool-cancelled":
        setStatus("The tool call was cancelled" + (params.reason ? ": " + params.reason : "") + ".");
        break;
      case "ui/notifications/host-context-changed":
        Object.keys(params).forEach(function (key) {
          hostContext[key] = params[key];
        });
        break;
      default:
        // tool-input-partial and anything newer: nothing to draw from it.
        break;
    }
  }

  window.addEventListener("message", function (event) {
    if (event.source !== host) return;
    var message = event.data;
    if (!message || typeof message !== "object" || message.jsonrpc !== "2.0") return;
    var hasId = message.id !== undefined && message.id !== null;
    if (typeof message.method === "string") {
      if (hasId) onRequest(message);
      else onNotification(message);
    } else if (hasId) {
      onResponse(message);
    }
  });

  // ---- Tool results ----------------------------------------------------

  // The JSON value of a CallToolResult: structuredContent, else the first
  // text block that parses as a JSON object; null when neither.
  function payload(result) {
    if (!result || typeof result !== "object") return null;
    var structured = result.structuredContent;
    if (structured && typeof structured === "object") return structured;
    var blocks = Array.isArray(result.content) ? result.content : [];
    for (var i = 0; i < blocks.length; i++) {
      if (blocks[i] && blocks[i].type === "text" && typeof blocks[i].text === "string") {
        try {
          var parsed = JSON.parse(blocks[i].text);
          if (parsed && typeof parsed === "object") return parsed;
        } catch (ignored) {
          // A summary, not JSON: shown as text below.
        }
      }
    }
    return null;
  }

  function firstText(result) {
    var blocks = result && Array.isArray(result.content) ? result.content : [];
    for (var i = 0; i < blocks.length; i++) {
      if (blocks[i] && blocks[i].type === "text") return String(blocks[i].text);
    }
    return "";
  }

  // What a request error (Part III §7.2) or a bare error result says.
  function errorText(result, value) {
    if (value && value.error && typeof value.error === "object") {
      return (value.error.kind ? value.error.kind + ": " : "") + String(value.error.message || "");
    }
    return firstText(result) || "the tool reported an error";
  }

  function showText(text) {
    while (root.firstChild) root.removeChild(root.firstChild);
    var pre = document.createElement("pre");
    pre.className = "pv-fallback";
    pre.textContent = text;
    root.appendChild(pre);
  }

  function showPlan() {
    var result = state.result;
    var value = payload(result);
    if (result.isError) {
      showText("");
      setStatus("The validate tool answered with a request error: " + errorText(result, value));
    } else if (!value) {
      showText(firstText(result));
      setStatus("The result carried no structured content; its text is shown.");
    } else {
      globalThis.PilotageView.renderPlan(root, value);
      var count = Array.isArray(value.diagnostics) ? value.diagnostics.length : 0;
      setStatus(
        value.valid === true
          ? "The program is valid" + (count ? ", with " + count + " warning(s)." : ".")
          : "The program is not valid: " + count + " diagnostic(s)."
      );
    }
    reportSize();
  }

  function showRun() {
    var result = state.result;
    var value = payload(result);
    if (result.isError) {
      showText("");
      setStatus("The tool answered with a request error: " + errorText(result, value));
      reportSize();
      return;
    }
    if (!value) {
      showText(firstText(result));
      setStatus("The result carried no structured content; its text is shown.");
      reportSize();
      return;
    }
    state.run = value;
    drawRun();
    if (!state.planAsked) setStatus(state.planNote || NO_PROGRAM);
  }

  function drawRun() {
    if (!state.run) return;
    var run = {};
    Object.keys(state.run).forEach(function (key) {
      run[key] = state.run[key];
    });
    if (!run.plan && state.plan && state.plan.plan) run.plan = state.plan.plan;
    globalThis.PilotageView.renderRun(root, run);
    reportSize();
  }

  // ---- The plan of a Run, through the host ------------------------------

  // The members of an execute call that are not the program (Part III §4.6
  // reserved members, and the trace-fetch tool's own).
  var RESERVED = ["program_ref", "input", "context", "trace_level", "expected_catalog_version", "idempotency_key",
    "test_run", "store", "mode", "run_id", "question"];

  function has(object, key) {
    return Object.prototype.hasOwnProperty.call(object, key);
  }

  // The tool's program declaration (Part III §5), {argument, language}.
  function declaration(tool) {
    var meta = tool && tool._meta && typeof tool._meta === "object" ? tool._meta : {};
    var declared = meta[PILOTAGE_META];
    return declared && typeof declared.argument === "string" && typeof declared.language === "string" ? declared : null;
  }

  // {name, argument} of the validate tool for the program in `input`, from
  // the manifest's Languages: the Language the called tool declares (the
  // host context's toolInfo), else the one whose run or trace tool it is,
  // else the only Language with a run tool; the program's argument from
  // the declaration, else the one member of the input that is not
  // reserved. Null when the input carries no program (a program_ref, a
  // run_id).
  function planTarget(languages, input) {
    var tool = hostContext.toolInfo && hostContext.toolInfo.tool;
    var declared = declaration(tool);
    var language = null;
    languages.forEach(function (candidate) {
      if (language || !candidate || !candidate.loop) return;
      if (declared ? candidate.name === declared.language
          : tool && tool.name && (candidate.loop.execute === tool.name || candidate.loop.trace === tool.name)) {
        language = candidate;
      }
    });
    if (!language && !declared && !(tool && tool.name)) {
      var running = languages.filter(function (candidate) {
        return candidate && candidate.loop && candidate.loop.execute;
      });
      if (running.length === 1) language = running[0];
    }
    if (!language || typeof language.loop.validate !== "string") return null;
    var argument = declared ? declared.argument : null;
    if (!argument) {
      var members = Object.keys(input).filter(function (key) {
        return RESERVED.indexOf(key) < 0;
      });
      if (members.length === 1) argument = members[0];
    }
    if (!argument || !has(input, argument) || has(input, "program_ref")) return null;
    return { name: language.loop.validate, argument: argument };
  }

  function callTool(name, args) {
    return request("tools/call", { name: name, arguments: args });
  }

  function askForPlan() {
    if (state.planAsked || !state.input) return;
    if (!hostCapabilities.serverTools) {
      state.planNote = "This host cannot call tools for the view, so the program's plan is not shown.";
      setStatus(state.planNote);
      return;
    }
    var input = state.input;
    var members = Object.keys(input).filter(function (key) {
      return RESERVED.indexOf(key) < 0;
    });
    if (!members.length || has(input, "program_ref")) {
      setStatus(NO_PROGRAM);
      return;
    }
    state.planAsked = true;
    callTool(MANIFEST_TOOL, {})
      .then(function (answered) {
        var manifest = payload(answered);
        var languages = manifest && Array.isArray(manifest.languages) ? manifest.languages : [];
        var target = planTarget(languages, input);
        if (!target) {
          setStatus(NO_PROGRAM);
          return null;
        }
        var args = {};
        args[target.argument] = input[target.argument];
        if (has(input, "context")) args.context = input.context;
        setStatus("Asking the host for the plan (" + target.name + ").");
        return callTool(target.name, args).then(function (result) {
          var value = payload(result);
          if (result.isError || !value) {
            setStatus("The plan could not be had: " + errorText(result, value));
          } else if (!value.plan) {
            var count = Array.isArray(value.diagnostics) ? value.diagnostics.length : 0;
            setStatus("The program has no plan now (" + count + " diagnostic(s) from " + target.name + ").");
          } else {
            state.plan = value;
            setStatus("Plan from " + target.name + ", catalog version " + (value.catalog_version || "unknown") + ".");
            drawRun();
          }
        });
      })
      .catch(function (error) {
        setStatus("The plan could not be had through the host: " + error.message);
      });
  }

  // ---- Size --------------------------------------------------------------

  // The height of the content (never of the viewport, so a host that sizes
  // the frame to it does not feed it back), sent when it changes.
  var lastHeight = -1;
  var initialized = false;

  function reportSize() {
    if (!initialized) return;
    var style = getComputedStyle(body);
    var height = Math.ceil(
      body.getBoundingClientRect().height + (parseFloat(style.marginTop) || 0) + (parseFloat(style.marginBottom) || 0)
    );
    if (height === lastHeight) return;
    lastHeight = height;
    notify("ui/notifications/size-changed", { height: height });
  }

  if (typeof ResizeObserver === "function") {
    new ResizeObserver(function () {
      reportSize();
    }).observe(body);
  }

  // ---- Start -----------------------------------------------------------

  request("ui/initialize", {
    appInfo: { name: viewName, version: body.getAttribute("data-version") || "0" },
    appCapabilities: { availableDisplayModes: ["inline"] },
    protocolVersion: PROTOCOL_VERSION
  })
    .then(function (result) {
      hostCapabilities = result.hostCapabilities || {};
      hostContext = result.hostContext || {};
      initialized = true;
      notify("ui/notifications/initialized", {});
      if (!state.result) setStatus("Waiting for the tool call's result.");
      reportSize();
      if (isRunView && state.input) askForPlan();
    })
    .catch(function (error) {
      setStatus("The host did not complete ui/initialize: " + error.message);
    });
})();
