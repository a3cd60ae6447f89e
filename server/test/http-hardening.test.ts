// HTTP and Socket.IO hardening through the real server: malformed URIs, security headers, the
// per-address rate limit, the closed default namespace, the Origin and Host checks, and the token
// kept out of URLs and logs.
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { after, before, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION } from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
const logs: string[] = [];
before(async () => {
  server = await startTestServer({ log: (l) => logs.push(l) });
});
after(() => server.stop());

/** Resolves 'connected' or the connect error's message. */
function tryConnect(path: string, opts: Parameters<typeof io>[1] = {}): Promise<string> {
  const s: Socket = io(`${server.url}${path}`, { transports: ['websocket'], reconnection: false, ...opts });
  return new Promise((resolve) => {
    const done = (r: string) => {
      s.close();
      resolve(r);
    };
    s.on('connect', () => done('connected'));
    s.on('connect_error', (e) => done(`error: ${e.message}`));
    setTimeout(() => done('timeout'), 5_000);
  });
}

test('a malformed URI is a 400 with no stack trace, and its query string never reaches the log', async () => {
  logs.length = 0;
  const res = await fetch(`${server.url}/%E0%A4%A?token=secret-in-the-url`);
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.code, 'bad_request');
  const bad = await fetch(`${server.url}/api/jobs/%E0%A4%A`, { headers: { authorization: 'Bearer test-token' } });
  assert.equal(bad.status, 400);
  assert.ok(!logs.some((l) => l.includes('secret-in-the-url')), `logged: ${logs.join('\n')}`);
  assert.ok(!logs.some((l) => /\n\s+at /.test(l)), `a stack trace was logged: ${logs.join('\n')}`);
});

test('every response carries the security headers', async () => {
  for (const path of ['/healthz', '/api/jobs', '/apps/nothing-here.html', '/api/public/info']) {
    const res = await fetch(`${server.url}${path}`);
    await res.arrayBuffer();
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
    assert.equal(res.headers.get('x-frame-options'), 'DENY', path);
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer', path);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'self'/, path);
    assert.match(csp, /frame-ancestors 'none'/, path);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, path);
  }
});

test('API routes take the researcher token only in the Authorization header', async () => {
  assert.equal((await fetch(`${server.url}/api/jobs?token=test-token`)).status, 401);
  assert.equal((await fetch(`${server.url}/api/jobs`, { headers: { authorization: 'Bearer test-token' } })).status, 200);
});

test('the default Socket.IO namespace accepts nobody', async () => {
  assert.match(await tryConnect('/'), /^error: no such namespace/);
  // The named ones still work.
  assert.equal(await tryConnect(NAMESPACES.dashboard, { auth: { protocol: PROTOCOL_VERSION, token: 'test-token' } }), 'connected');
});

test('Socket.IO refuses pages from other origins', async () => {
  const auth = { protocol: PROTOCOL_VERSION, token: 'test-token' };
  assert.notEqual(await tryConnect(NAMESPACES.dashboard, { auth, extraHeaders: { origin: 'http://evil.example' } }), 'connected');
  assert.equal(await tryConnect(NAMESPACES.dashboard, { auth, extraHeaders: { origin: server.url } }), 'connected', 'same origin');
  const other = await startTestServer({ allowOrigins: ['http://partner.example'] });
  try {
    const s = io(`${other.url}${NAMESPACES.dashboard}`, { auth, transports: ['websocket'], reconnection: false, extraHeaders: { origin: 'http://partner.example' } });
    await new Promise<void>((resolve, reject) => {
      s.on('connect', () => resolve());
      s.on('connect_error', reject);
    });
    s.close();
  } finally {
    await other.stop();
  }
});

test('one address gets 429 with Retry-After once it spends its burst; others are not affected', async () => {
  // A small bucket (the default is 100/s, burst 300): 100 requests spend it however slowly this
  // machine serves them.
  const limitedServer = await startTestServer({ httpRateLimit: { perSecond: 2, burst: 30 } });
  try {
    const codes = await Promise.all(Array.from({ length: 100 }, () => fetch(`${limitedServer.url}/healthz`).then(async (r) => {
      await r.arrayBuffer();
      return { status: r.status, retryAfter: r.headers.get('retry-after') };
    })));
    const limited = codes.filter((c) => c.status === 429);
    assert.ok(limited.length > 0, 'some requests were limited');
    assert.ok(codes.filter((c) => c.status === 200).length >= 30, 'the burst went through');
    assert.ok(limited.every((c) => Number(c.retryAfter) >= 1), 'each 429 says when to come back');
    // Another client address (the same server, reached from 127.0.0.2) still gets in.
    const status = await new Promise<number>((resolve, reject) => {
      get(`${limitedServer.url}/healthz`, { localAddress: '127.0.0.2' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      }).on('error', reject);
    });
    assert.equal(status, 200);
  } finally {
    await limitedServer.stop();
  }
});

/** Status of a GET with the given Host header (fetch would not send one of its own choosing). */
function statusWithHost(url: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, { headers: { host } }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

test('a Host that is not a name of this server is refused, over HTTP and Socket.IO (DNS rebinding)', async () => {
  // A page at http://rebind.attacker.example whose name the attacker later points at this server: its
  // requests are same-origin as far as the browser knows, and carry the attacker's name as Host.
  const port = server.port;
  const foreign = await statusWithHost(`${server.url}/api/public/info`, `rebind.attacker.example:${port}`);
  assert.equal(foreign.status, 421);
  assert.match(JSON.parse(foreign.body).error.message, /not a name of this server/);
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`, '10.1.2.3']) {
    assert.equal((await statusWithHost(`${server.url}/api/public/info`, host)).status, 200, host);
  }
  const auth = { protocol: PROTOCOL_VERSION, token: 'test-token' };
  const rebound = { host: `rebind.attacker.example:${port}`, origin: `http://rebind.attacker.example:${port}` };
  assert.notEqual(await tryConnect(NAMESPACES.dashboard, { auth, extraHeaders: rebound }), 'connected');
  assert.equal(await tryConnect(NAMESPACES.dashboard, { auth, extraHeaders: { host: `localhost:${port}`, origin: `http://localhost:${port}` } }), 'connected');
});

test('names given with allowHosts (--allow-host) and the public URL\'s are accepted; \'*\' accepts any', async () => {
  const named = await startTestServer({ allowHosts: ['tabfleet.example'], publicUrl: 'https://volunteer.example' });
  const any = await startTestServer({ allowHosts: ['*'] });
  try {
    assert.equal((await statusWithHost(`${named.url}/healthz`, 'tabfleet.example')).status, 200);
    assert.equal((await statusWithHost(`${named.url}/healthz`, 'volunteer.example:443')).status, 200);
    assert.equal((await statusWithHost(`${named.url}/healthz`, 'other.example')).status, 421);
    assert.equal((await statusWithHost(`${any.url}/healthz`, 'other.example')).status, 200);
  } finally {
    await named.stop();
    await any.stop();
  }
});
