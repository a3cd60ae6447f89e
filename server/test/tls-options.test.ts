// `server/src/main.ts --tls-cert F --tls-key F`: a missing file, one option without the other, a file
// that is not PEM and a key that is not the certificate's stop the start with exit 2 and a message
// naming the option and file; a good pair serves https://, and the printed links use the https public URL;
// SIGHUP reads the files again (a renewed certificate), keeping the old pair when the new one is bad.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { get } from 'node:https';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { makeTestCa, type IssuedCertificate, type TestCa } from '../src/testing/test-ca';
import { waitFor } from '../src/testing/sim-volunteer';
import { startServerProcess } from './server-process';

const repo = join(import.meta.dirname, '../..');

function main(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const argv = ['--import', 'tsx', 'server/src/main.ts', '--port', '0', ...args];
    const child = execFile(process.execPath, argv, { cwd: repo }, (_e, _out, stderr) => resolve({ code: child.exitCode, stderr }));
  });
}

let ca: TestCa;
let cert: IssuedCertificate;
let other: IssuedCertificate;
before(async () => {
  ca = await makeTestCa();
  cert = await ca.issue({ dns: ['tabfleet.test'], ip: ['127.0.0.1'] });
  other = await ca.issue({ ip: ['127.0.0.1'] });
});
after(() => ca.remove());

test('bad TLS options stop the start with exit 2 and name the option and the file', { timeout: 120_000 }, async () => {
  const missing = join(ca.dir, 'missing.pem');
  const cases: [string[], RegExp][] = [
    [['--tls-cert', cert.certPath], /^--tls-cert and --tls-key go together/],
    [['--tls-cert', missing, '--tls-key', cert.keyPath], new RegExp(`^bad TLS files: --tls-cert ${missing}: no such file`)],
    [['--tls-cert', cert.keyPath, '--tls-key', cert.keyPath], /^bad TLS files: --tls-cert \S+ is not a PEM certificate/],
    [['--tls-cert', cert.certPath, '--tls-key', cert.certPath], /^bad TLS files: --tls-key \S+ is not a PEM private key/],
    [['--tls-cert', cert.certPath, '--tls-key', other.keyPath], /^bad TLS files: --tls-key \S+server-2\.key does not belong to --tls-cert \S+server-1\.pem \(CN=tabfleet\.test\)/],
    [['--trust-proxy', 'proxy.example.org'], /^bad --trust-proxy "proxy\.example\.org": want the proxy's IP address/],
  ];
  const results = await Promise.all(cases.map(([args]) => main(args)));
  results.forEach((r, i) => {
    assert.equal(r.code, 2, `${cases[i][0].join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, cases[i][1]);
    for (const key of [cert.key, other.key]) assert.ok(!r.stderr.includes(key.split('\n')[1]), 'no key text reaches a message');
  });
});

test('a good pair serves https:// and the printed links use the https public URL', { timeout: 60_000 }, async () => {
  const server = await startServerProcess(['--tls-cert', cert.certPath, '--tls-key', cert.keyPath, '--public-url', 'https://tabfleet.test:8443']);
  try {
    const out = server.output();
    assert.match(out, /\[server\] ready https:\/\/127\.0\.0\.1:\d+/);
    assert.match(out, /dashboard sign-in .*: https:\/\/tabfleet\.test:8443\/apps\/dashboard\/#token=/);
    assert.match(out, /volunteer: https:\/\/tabfleet\.test:8443\/apps\/volunteer\//);
    assert.match(out, /TLS: the certificate expires in 1 days/);
    const url = /ready (https:\S+)/.exec(out)![1];
    const status = await new Promise<number>((resolve, reject) => {
      get(`${url}/api/public/info`, { ca: ca.ca }, (r) => resolve(r.resume().statusCode ?? 0)).on('error', reject);
    });
    assert.equal(status, 200);
  } finally {
    await server.stop();
  }
});

/** The serial number of the certificate the server at `port` presents now (a new connection, trusting the CA). */
function servedSerial(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca: ca.ca }, () => {
      resolve(socket.getPeerCertificate().serialNumber);
      socket.end();
    });
    socket.on('error', reject);
  });
}

test('SIGHUP serves a renewed certificate to new connections; a bad pair keeps the old one', { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-tls-hup-'));
  const live = { cert: join(dir, 'live.pem'), key: join(dir, 'live.key') };
  copyFileSync(cert.certPath, live.cert);
  copyFileSync(cert.keyPath, live.key);
  const server = await startServerProcess(['--tls-cert', live.cert, '--tls-key', live.key]);
  const { child } = server;
  const output = () => server.output();
  try {
    const out = output();
    const port = Number(/ready https:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1] ?? assert.fail(out));
    const first = await servedSerial(port);
    const renewed = await ca.issue({ ip: ['127.0.0.1'] });

    copyFileSync(renewed.certPath, live.cert); // the key not yet: a bad pair
    child.kill('SIGHUP');
    await waitFor('the bad pair refused', () => output().includes('SIGHUP: TLS files not reloaded, the old certificate stays'), 30_000, 50);
    assert.match(output(), /--tls-key \S+live\.key does not belong to --tls-cert \S+live\.pem/);
    assert.equal(await servedSerial(port), first);

    copyFileSync(renewed.keyPath, live.key);
    child.kill('SIGHUP');
    await waitFor('the renewed pair loaded', () => output().includes('TLS: a new certificate loaded'), 30_000, 50);
    const second = await servedSerial(port);
    assert.notEqual(second, first);
    assert.equal(second, new X509Certificate(renewed.cert).serialNumber);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
