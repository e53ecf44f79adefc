// The tests' OpenID Connect provider: the npm package oidc-provider (nobody here wrote it) on 127.0.0.1.
// Usage: node oidc_idp.mjs <users.json> <client_id> <client_secret> <redirect_uri>
// users.json: {"<account id>": {"email": "...", "groups": ["..."]}}, re-read at every sign-in (a test removes
// a user from a group by rewriting it). Prints "READY <issuer>" once listening (a random port).
// Control endpoints (test only): POST /control/rotate (a new signing key; the old one leaves the JWKS),
// POST /control/redirect {uri} (the client's redirect URI, once the server's port is known),
// POST /control/mint {claims, foreign} (a token signed with the current key, or with a key never published).
import { readFileSync } from 'node:fs';
import http from 'node:http';

import Provider from 'oidc-provider';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';

const [usersFile, clientId, clientSecret, firstRedirect] = process.argv.slice(2);
let redirectUri = firstRedirect;
let generation = 0;

async function newKey() {
  generation += 1;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: `key-${generation}`, alg: 'RS256', use: 'sig' };
  return { privateKey, jwk };
}

function users() {
  return JSON.parse(readFileSync(usersFile, 'utf8'));
}

function build(issuer, key) {
  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    jwks: { keys: [key.jwk] },
    claims: { openid: ['sub'], email: ['email'], groups: ['groups'] },
    conformIdTokenClaims: false, // the groups claim goes into the ID token itself
    cookies: { keys: ['test-only-cookie-key'] },
    async findAccount(ctx, id) {
      const user = users()[id];
      if (!user) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, email: user.email, groups: user.groups }) };
    },
    async loadExistingGrant(ctx) {
      // Consent is implied (a first-party client): grant what was asked.
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope(ctx.oidc.params.scope);
      await grant.save();
      return grant;
    },
  });
  provider.on('server_error', (ctx, err) => process.stderr.write(`server_error ${err}\n`));
  return provider;
}

async function json(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return body ? JSON.parse(body) : {};
}

let key = await newKey();
let provider;
const server = http.createServer(async (req, res) => {
  try {
    if (req.method === 'POST' && req.url === '/control/rotate') {
      key = await newKey();
      provider = build(provider.issuer, key);
      res.end(JSON.stringify({ kid: key.jwk.kid }));
      return;
    }
    if (req.method === 'POST' && req.url === '/control/redirect') {
      ({ uri: redirectUri } = await json(req));
      provider = build(provider.issuer, key);
      res.end('{}');
      return;
    }
    if (req.method === 'POST' && req.url === '/control/mint') {
      const { claims, foreign } = await json(req);
      const signer = foreign ? await newKey() : key;
      generation -= foreign ? 1 : 0;
      const token = await new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: foreign ? key.jwk.kid : signer.jwk.kid })
        .sign(signer.privateKey);
      res.end(JSON.stringify({ token }));
      return;
    }
    provider.callback()(req, res);
  } catch (err) {
    res.statusCode = 500;
    res.end(String(err));
  }
});
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = build(issuer, key);
  process.stdout.write(`READY ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
