// A real OpenID Connect provider (panva's oidc-provider) on loopback for devagent's identity
// tests. One argument: a JSON file with
//   jwks: the provider's private signing keys (the test holds them too, to sign bad tokens;
//         none: a development key of the provider's own);
//   resource: the resource (audience) a token is for when a client names none;
//   clients: its registered clients (client credentials, the console's code + PKCE, a device's
//            device code);
//   roles: { accountOrClientId: [role, ...] } put in every access token's `roles` claim;
//   groups: { accountOrClientId: [group, ...] } put in every access token's `groups` claim;
//   ttl: access tokens' lifetime in seconds.
// Users log in through the provider's development pages (any login name, any password; a
// native client also gets its consent page). Clients may also register themselves (RFC 7591).
// Prints "issuer <url>" once listening; serves until killed.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
const rolesOf = (id) => (cfg.roles && cfg.roles[id]) || [];
const groupsOf = (id) => (cfg.groups && cfg.groups[id]) || [];

const provider = new Provider(issuer, {
  clients: cfg.clients,
  // no keys given: the provider's own development key
  ...(cfg.jwks?.keys?.length ? { jwks: cfg.jwks } : {}),
  scopes: ['openid', 'profile'],
  claims: { openid: ['sub'], profile: ['name', 'roles'] },
  pkce: { required: () => true },
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: true },
    // an MCP host registers itself (RFC 7591) before it logs its user in
    registration: { enabled: true },
    // the device authorization grant (RFC 8628): discovery lists its endpoint; the user types
    // the code on the provider's own page (/device), signs in and confirms
    deviceFlow: { enabled: true },
    // Access tokens as JWTs for the resource asked for (RFC 8707), any resource: a test asks for
    // another audience to get a token devagent must refuse.
    resourceIndicators: {
      enabled: true,
      defaultResource: () => cfg.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: 'openid profile',
        audience: resource,
        accessTokenFormat: 'jwt',
        accessTokenTTL: cfg.ttl || 600,
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  extraTokenClaims: async (ctx, token) => ({
    roles: rolesOf(token.accountId || token.clientId),
    groups: groupsOf(token.accountId || token.clientId),
  }),
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => ({ sub: id, name: id, roles: rolesOf(id) }),
  }),
  // consent given at once: the tests' users always allow
  loadExistingGrant: async (ctx) => {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid profile');
    for (const resource of [].concat(ctx.oidc.params.resource || cfg.resource)) {
      grant.addResourceScope(resource, 'openid profile');
    }
    await grant.save();
    return grant;
  },
});
server.on('request', provider.callback());
process.stdout.write(`issuer ${issuer}\n`);
