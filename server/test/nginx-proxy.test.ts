// The documented reverse proxy, deploy/nginx/tabfleet.conf, run as it stands by Debian's nginx in
// front of a real server (everything on 127.0.0.1; only the name, certificate paths and ports swapped
// for the test's): an API call over https through it, Socket.IO from a page's origin upgraded to a
// WebSocket through it, and with --trust-proxy the server counting each volunteer by the address nginx
// saw (127.0.0.2, 127.0.0.3), not by nginx's, whatever the client wrote in X-Forwarded-For itself.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { get } from 'node:https';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION, VOLUNTEER_SOCKET_PATH } from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { freePort } from '../src/testing/redis-server';
import { SIM_CAPABILITIES, waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';
import { makeTestCa, type TestCa } from '../src/testing/test-ca';

const NGINX = '/usr/sbin/nginx';
const SITE = join(import.meta.dirname, '../../deploy/nginx/tabfleet.conf');

let ca: TestCa;
let server: TestServer;
let nginx: ChildProcess;
let proxyUrl = '';
let nginxLog = '';
const sockets: Socket[] = [];

/** The site file with the test's name, certificate, ports and upstream; every directive else as documented. */
function siteForTest(site: string, opts: { cert: string; key: string; https: number; http: number; upstream: string }): string {
  const swaps: [string | RegExp, string][] = [
    [/^\s*listen \[::\]:\d+( ssl)?;\n/gm, ''],
    ['listen 443 ssl;', `listen 127.0.0.1:${opts.https} ssl;`],
    ['listen 80;', `listen 127.0.0.1:${opts.http};`],
    ['/etc/letsencrypt/live/tabfleet.example.org/fullchain.pem', opts.cert],
    ['/etc/letsencrypt/live/tabfleet.example.org/privkey.pem', opts.key],
    ['http://127.0.0.1:8080', opts.upstream],
    [/tabfleet\.example\.org/g, 'localhost'],
  ];
  for (const [from, to] of swaps) {
    const next = site.replace(from, to);
    if (next === site) throw new Error(`deploy/nginx/tabfleet.conf no longer has ${String(from)}: update this test with it`);
    site = next;
  }
  return site;
}

before(async () => {
  if (!existsSync(NGINX)) throw new Error(`${NGINX} is missing: install Debian's nginx (npm run setup, as root, does)`);
  ca = await makeTestCa();
  const cert = await ca.issue({ dns: ['localhost'], ip: ['127.0.0.1'] });
  server = await startTestServer({ addressLimits: { connections: 1, jobShare: 1 }, trustProxy: ['127.0.0.1'] });
  const [https, http] = [await freePort(), await freePort()];
  const dir = join(ca.dir, 'nginx');
  mkdirSync(join(dir, 'logs'), { recursive: true });
  writeFileSync(join(dir, 'tabfleet.conf'), siteForTest(readFileSync(SITE, 'utf8'), { cert: cert.certPath, key: cert.keyPath, https, http, upstream: server.url }));
  // What /etc/nginx/nginx.conf gives a site on Debian, in a throwaway prefix; root's worker as root.
  const root = process.getuid?.() === 0 ? 'user root;\n' : '';
  writeFileSync(join(dir, 'nginx.conf'), `${root}worker_processes 1;\npid ${dir}/nginx.pid;\nerror_log ${dir}/logs/error.log info;\nevents { worker_connections 256; }\n`
    + `http {\n  access_log ${dir}/logs/access.log;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n  fastcgi_temp_path ${dir}/fastcgi;\n`
    + `  uwsgi_temp_path ${dir}/uwsgi;\n  scgi_temp_path ${dir}/scgi;\n  include ${dir}/tabfleet.conf;\n}\n`);
  nginx = spawn(NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
  nginx.stdout!.on('data', (d) => (nginxLog += d));
  nginx.stderr!.on('data', (d) => (nginxLog += d));
  process.once('exit', () => nginx.kill());
  proxyUrl = `https://localhost:${https}`;
  await waitFor('nginx answers', () => fetchJson('/api/public/info').then(() => true, () => nginx.exitCode !== null && assert.fail(`nginx exited: ${nginxLog}`)), 20_000, 100);
});
after(async () => {
  for (const s of sockets) s.close();
  nginx?.kill();
  await server?.stop();
  ca?.remove();
});

function fetchJson(path: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    get(`${proxyUrl}${path}`, { ca: ca.ca, headers: { authorization: 'Bearer test-token' }, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d) => (text += d)).on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    }).on('error', reject);
  });
}

/**
 * A volunteer through nginx, as a page of the proxy's origin connects (Origin sent): polling upgraded to
 * a WebSocket, or a WebSocket from the start from a given loopback address (the polling client cannot bind one).
 */
function volunteer(from: string | 'polling', forwardedFor?: string, path?: string): Promise<{ socket: Socket; error: string | null }> {
  const how = from === 'polling' ? { transports: ['polling', 'websocket'] } : { transports: ['websocket'], localAddress: from, ...(path ? { path } : {}) };
  const socket = io(`${proxyUrl}${NAMESPACES.volunteer}`, {
    auth: { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES }, reconnection: false, ca: ca.ca, ...how,
    extraHeaders: { origin: proxyUrl, ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
  } as Parameters<typeof io>[1]);
  sockets.push(socket);
  return new Promise((resolve) => {
    socket.once('welcome', () => resolve({ socket, error: null }));
    socket.once('connect_error', (e) => resolve({ socket, error: (e as Error & { data?: { code: string } }).data?.code ?? e.message }));
  });
}

test('through nginx: the API over https, and Socket.IO from the page’s origin upgraded to a WebSocket', async () => {
  const jobs = await fetchJson('/api/jobs');
  assert.equal(jobs.status, 200);
  assert.deepEqual(jobs.body.jobs, []);
  const info = await fetchJson('/api/public/info');
  assert.equal(info.status, 200);
  const { socket, error } = await volunteer('polling');
  assert.equal(error, null);
  await waitFor('the connection upgraded to a WebSocket through nginx', () => socket.io.engine.transport.name === 'websocket', 10_000, 50);
  socket.close();
  await waitFor('the server has let it go', () => server.io.of(NAMESPACES.volunteer).sockets.size === 0, 10_000, 50);
  // nginx logs the upgraded request when it ends: 101, switched to the WebSocket it relayed.
  const upgraded = /"GET \/socket\.io\/\?EIO=4&transport=websocket&sid=\S+ HTTP\/1\.1" 101 /;
  await waitFor('nginx logged the WebSocket upgrade', () => upgraded.test(readFileSync(join(ca.dir, 'nginx/logs/access.log'), 'utf8')), 10_000, 50);
});

test('behind nginx with --trust-proxy each volunteer counts as the address nginx saw, and a forged header counts for nothing', async () => {
  // One volunteer connection per address: 127.0.0.2 and 127.0.0.3 each get theirs, though both reach the server from nginx's 127.0.0.1.
  assert.equal((await volunteer('127.0.0.2')).error, null);
  assert.equal((await volunteer('127.0.0.3', '198.51.100.7')).error, null);
  // nginx replaces what the client wrote: 127.0.0.3 again, not 198.51.100.8.
  assert.equal((await volunteer('127.0.0.3', '198.51.100.8')).error, 'rate_limited');
  assert.equal((await volunteer('127.0.0.2')).error, 'rate_limited');
});

test('the lean volunteer endpoint through nginx: upgraded, and each volunteer counted as the address nginx saw', async () => {
  const first = await volunteer('127.0.0.4', undefined, VOLUNTEER_SOCKET_PATH);
  assert.equal(first.error, null);
  assert.equal(first.socket.io.engine.transport.name, 'websocket');
  // One volunteer connection per address on either path: a forged header does not make 127.0.0.4 another.
  assert.equal((await volunteer('127.0.0.4', '198.51.100.9', VOLUNTEER_SOCKET_PATH)).error, 'rate_limited');
  assert.equal((await volunteer('127.0.0.5', undefined, VOLUNTEER_SOCKET_PATH)).error, null);
  const upgraded = /"GET \/volunteers\/\?EIO=4&transport=websocket HTTP\/1\.1" 101 /;
  first.socket.close();
  await waitFor('nginx logged the lean endpoint\'s WebSocket upgrade', () => upgraded.test(readFileSync(join(ca.dir, 'nginx/logs/access.log'), 'utf8')), 10_000, 50);
});
