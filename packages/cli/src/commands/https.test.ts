// Against an https:// server with a private CA: the real server behind a TLS front (as caddy or nginx
// would stand before it), with a certificate for 127.0.0.1 from a CA made here with openssl. Without
// the CA the CLI refuses the connection (exit 5) and says to set NODE_EXTRA_CA_CERTS; with it, login
// and ls work as over http.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { startTestServer, type TestServer } from '@tabfleet/server/testing';
import { cliHome, jsonOf, runCli, shown } from '../../test/cli-process';

const openssl = (dir: string, args: string[]) => promisify(execFile)('openssl', args, { cwd: dir });

/** A CA and a server certificate for 127.0.0.1 signed by it, in `dir`. */
async function makeCertificates(dir: string): Promise<void> {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=tabfleet test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  await openssl(dir, ['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1']);
  writeFileSync(join(dir, 'server.ext'), 'basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  await openssl(dir, ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'server.ext']);
}

let server: TestServer;
let front: Server;
let httpsUrl = '';
let dir = '';
before(async () => {
  server = await startTestServer();
  dir = cliHome().dir;
  await makeCertificates(dir);
  const target = new URL(server.url);
  // TLS in front, plain HTTP behind: every request passed on as it came, the answer passed back.
  front = createServer({ key: readFileSync(join(dir, 'server.key')), cert: readFileSync(join(dir, 'server.pem')) }, (req, res) => {
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
});

test('https:// with a private CA: refused without NODE_EXTRA_CA_CERTS (exit 5, with the hint), works with it', async () => {
  const home = cliHome();
  const refused = await runCli(['login', '--server', httpsUrl, '--token', 'test-token'], { env: home.env });
  assert.equal(refused.code, 5, shown(refused));
  assert.match(refused.stderr, /NODE_EXTRA_CA_CERTS/);

  const env = { ...home.env, NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') };
  const login = await runCli(['login', '--server', httpsUrl, '--token', 'test-token'], { env });
  assert.equal(login.code, 0, shown(login));
  await server.createJob({ name: 'seen over tls' });
  const ls = await runCli(['ls', '--json'], { env });
  assert.equal(ls.code, 0, shown(ls));
  assert.ok(jsonOf(ls).jobs.some((j: { name: string }) => j.name === 'seen over tls'));
  await server.stopJobs();
});
