// Against an https:// server with a private CA: the real server behind a TLS front (as nginx would
// stand before it), with a certificate for 127.0.0.1 from a private CA (makeTestCa: openssl). Without
// the CA the CLI refuses the connection (exit 5) and says to set NODE_EXTRA_CA_CERTS; with it, login
// and ls work as over http.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { createServer, type Server } from 'node:https';
import { after, before, test } from 'node:test';
import { makeTestCa, startTestServer, type TestCa, type TestServer } from '@tabfleet/server/testing';
import { cliHome, jsonOf, runCli, shown } from '../../test/cli-process';

let server: TestServer;
let front: Server;
let httpsUrl = '';
let ca: TestCa;
before(async () => {
  server = await startTestServer();
  ca = await makeTestCa();
  const cert = await ca.issue({ ip: ['127.0.0.1'] });
  const target = new URL(server.url);
  // TLS in front, plain HTTP behind: every request passed on as it came, the answer passed back.
  front = createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    const inner = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    inner.on('error', () => res.writeHead(502).end());
    req.pipe(inner);
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  httpsUrl = `https://127.0.0.1:${(front.address() as { port: number }).port}`;
});
after(async () => {
  front.closeAllConnections();
  await new Promise((r) => front.close(r));
  await server.stop();
  ca.remove();
});

test('https:// with a private CA: refused without NODE_EXTRA_CA_CERTS (exit 5, with the hint), works with it', async () => {
  const home = cliHome();
  const refused = await runCli(['login', '--server', httpsUrl, '--token', 'test-token'], { env: home.env });
  assert.equal(refused.code, 5, shown(refused));
  assert.match(refused.stderr, /NODE_EXTRA_CA_CERTS/);

  const env = { ...home.env, NODE_EXTRA_CA_CERTS: ca.caPath };
  const login = await runCli(['login', '--server', httpsUrl, '--token', 'test-token'], { env });
  assert.equal(login.code, 0, shown(login));
  await server.createJob({ name: 'seen over tls' });
  const ls = await runCli(['ls', '--json'], { env });
  assert.equal(ls.code, 0, shown(ls));
  assert.ok(jsonOf(ls).jobs.some((j: { name: string }) => j.name === 'seen over tls'));
  await server.stopJobs();
});
