// A real OpenID provider (oidc-provider, a certified implementation) for
// the OAuth interoperability test (platform/cli/tests/all/oauth_resources.rs):
// dynamic client registration, resource indicators (RFC 8707) issuing
// RFC 9068 JWT access tokens (ES256, typ at+jwt) whose audience is the
// resource asked for, PKCE, refresh tokens, and its development sign-in
// forms (any login, any password), which the flow script fills in.
//
// Usage: node provider.mjs; prints "ISSUER <url>" once listening on a free
// loopback port, then serves until killed.
import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const jwk = (type, options, extra) => ({
  ...generateKeyPairSync(type, options).privateKey.export({ format: 'jwk' }),
  use: 'sig',
  ...extra,
});
const keys = [
  jwk('ec', { namedCurve: 'P-256' }, { kid: 'es-1', alg: 'ES256' }),
  jwk('rsa', { modulusLength: 2048 }, { kid: 'rs-1', alg: 'RS256' }),
];

const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  jwks: { keys },
  cookies: { keys: ['interop-cookie-key-0123456789'] },
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  // The scope the platform asks agents to get (its 401's `scope`); the
  // clients register with it.
  scopes: ['openid', 'offline_access', 'pilotage:mcp', 'pilotage:console'],
  // The platform's console, registered by its operator: a public client
  // whose redirect is on loopback (any port, RFC 8252 §7.3).
  clients: [{
    client_id: 'pilotage-console',
    token_endpoint_auth_method: 'none',
    application_type: 'native',
    redirect_uris: ['http://127.0.0.1/console/oidc/callback'],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A client that names no resource gets none (no access token for
      // anything), as the MCP clients always name one.
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => ({
        // The scopes each resource of the platform may be granted: an
        // agent's for the MCP resource, a console reader's for the admin
        // side (another resource).
        scope: resource.endsWith('/admin/v1') ? 'pilotage:console' : 'pilotage:mcp',
        audience: resource,
        accessTokenTTL: 600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
  clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], id_token_signed_response_alg: 'RS256' },
  // The groups a person is in, as a company's provider keeps them: an
  // account whose login starts with `approver` is in `demo-approvers`
  // (the platform maps it onto pilotage:approve where it is told to).
  extraTokenClaims: async (_ctx, token) =>
    (token.accountId ?? '').startsWith('approver') ? { groups: ['staff', 'demo-approvers'] } : { groups: ['staff'] },
  // Refresh tokens for public clients too (the MCP SDKs are public clients).
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
});
provider.on('server_error', (_ctx, error) => console.error('provider error:', error));

server.on('request', provider.callback());
console.log(`ISSUER ${issuer}`);
