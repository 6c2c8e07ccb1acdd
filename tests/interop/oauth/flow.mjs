// The official TypeScript MCP SDK client signing in through a real OpenID
// provider (provider.mjs) and calling a Pilotage server, unattended: the
// SDK discovers the protected-resource metadata from the 401, the
// provider's metadata, registers itself (DCR), sends the user to sign in
// (this script fills in the provider's development forms, as a person
// would), exchanges the code with PKCE and the resource indicator, and
// calls tools with the token. Then what the token can and cannot do.
//
// Usage: node flow.mjs <MCP URL> <server base URL> <a workflow/v1 program as
// JSON> [v1|v2]; prints one JSON report
// and exits 0, or prints why and exits 1.
const [mcpUrl, baseUrl, program, sdk = 'v1'] = process.argv.slice(2);
// The 1.x SDK, or the v2 client package (whose finishAuth takes the whole
// callback's parameters).
const { Client, StreamableHTTPClientTransport, UnauthorizedError } = sdk === 'v2'
  ? await import('@modelcontextprotocol/client')
  : {
    ...(await import('@modelcontextprotocol/sdk/client/index.js')),
    ...(await import('@modelcontextprotocol/sdk/client/auth.js')),
    ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
  };
const REDIRECT = 'http://127.0.0.1:9/callback';

/** A cookie jar for one browser session at the provider (names only). */
class Browser {
  constructor() {
    this.cookies = new Map();
  }

  async go(url, init = {}) {
    const headers = { ...(init.headers ?? {}), cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') };
    const response = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      this.cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
    }
    return response;
  }

  /** Follows redirects from `url`, filling in the sign-in and consent
   * forms, until the provider redirects to the client: the code. */
  async authorize(url) {
    let next = url;
    for (let step = 0; step < 12; step += 1) {
      const response = await this.go(next);
      const location = response.headers.get('location');
      if (location?.startsWith(REDIRECT)) {
        const back = new URL(location);
        if (back.searchParams.get('error')) {
          throw new Error(`the provider refused: ${back.searchParams.get('error_description')}`);
        }
        return back.searchParams;
      }
      if (location) {
        next = new URL(location, next).href;
        continue;
      }
      const page = await response.text();
      const action = page.match(/action="([^"]+)"/)?.[1];
      const prompt = page.match(/name="prompt" value="([a-z]+)"/)?.[1];
      if (!action || !prompt) throw new Error(`no form at ${next} (${response.status}): ${page.slice(0, 300)}`);
      const body = prompt === 'login'
        ? new URLSearchParams({ prompt, login: 'dana', password: 'any' })
        : new URLSearchParams({ prompt });
      const posted = await this.go(new URL(action, next).href, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
      next = new URL(posted.headers.get('location'), next).href;
    }
    throw new Error('the sign-in did not end');
  }
}

/** An OAuth client provider kept in memory, as a CLI agent's would be. */
class MemoryAuth {
  constructor() {
    this.browser = new Browser();
    this.asked = null;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return {
      client_name: 'pilotage-oauth-interop',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
    };
  }
  clientInformation() { return this.client; }
  saveClientInformation(info) { this.client = info; }
  tokens() { return this.saved; }
  saveTokens(tokens) { this.saved = tokens; }
  saveCodeVerifier(verifier) { this.verifier = verifier; }
  codeVerifier() { return this.verifier; }
  async redirectToAuthorization(url) {
    this.asked = Object.fromEntries(url.searchParams);
    this.callback = await this.browser.authorize(url.href);
  }
}

const claims = (token) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
const header = (token) => JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString());

async function main() {
  const auth = new MemoryAuth();
  let transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: auth });
  const first = new Client({ name: 'pilotage-oauth-interop', version: '1.0.0' });
  let signedIn = false;
  try {
    await first.connect(transport);
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
    signedIn = true;
  }
  if (!signedIn || !auth.callback) throw new Error('the server did not ask the client to sign in');
  await transport.finishAuth(sdk === 'v2' ? auth.callback : auth.callback.get('code'));

  transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: auth });
  const client = new Client({ name: 'pilotage-oauth-interop', version: '1.0.0' });
  await client.connect(transport);
  const manifest = await client.callTool({ name: 'pilotage_manifest', arguments: {} });
  const languages = manifest.structuredContent?.languages?.map((l) => l.name) ?? [];
  const validated = await client.callTool({
    name: 'validate_workflow',
    arguments: { workflow: JSON.parse(program) },
  });
  const token = auth.tokens().access_token;

  // A tenant the token is not for: the refusal's words reach the SDK's
  // error.
  let refusal = null;
  const elsewhere = new Client({ name: 'pilotage-oauth-interop', version: '1.0.0' });
  try {
    await elsewhere.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/t/nosuch/mcp`), { authProvider: auth }));
  } catch (error) {
    refusal = String(error?.message ?? error);
  }

  // The agent's token is refused by the admin API, whatever it holds.
  const admin = await fetch(`${baseUrl}/admin/v1/tenants`, { headers: { authorization: `Bearer ${token}` } });
  // The provider issued a refresh token with it.
  const refreshed = auth.tokens().refresh_token !== undefined;
  await client.close();

  console.log(JSON.stringify({
    asked_scope: auth.asked.scope ?? null,
    asked_resource: auth.asked.resource ?? null,
    registered: auth.client?.client_id !== undefined,
    token_type: header(token).typ,
    token_audience: claims(token).aud,
    token_scope: claims(token).scope,
    languages,
    validated: validated.isError !== true,
    validate_result: validated.structuredContent ?? null,
    admin_status: admin.status,
    admin_message: (await admin.json()).error?.message ?? null,
    refresh_token: refreshed,
    refusal,
  }));
}

main().catch((error) => {
  console.error(`the OAuth flow failed: ${error.stack ?? error}`);
  process.exit(1);
});
