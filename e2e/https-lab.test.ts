// The volunteer page over https:// from a lab host, as on the internet: the real server terminates TLS
// itself (`--tls-cert`, `--tls-key`, a certificate for tabfleet.test from a private CA) in a public
// host, and one headless Chromium behind a home NAT opens https://tabfleet.test:8443/apps/volunteer/,
// trusting the CA only through an NSS database in a temporary HOME (certutil, as a user's browser
// would): no --ignore-certificate-errors, no --unsafely-treat-insecure-origin-as-secure. The page is a
// secure context, so WebGPU is there with an adapter, and the tab trains a one-worker Fashion-MNIST job
// (its shard fetched from the https public URL) whose syncs commit with it as the member. Root only
// (network namespaces); nothing leaves the lab and 127.0.0.1.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM_ARGS, CHROMIUM_PATH, ensureBuilt, repoRoot } from '@tabfleet/headless';
import { NetLab, type LabHost } from '@tabfleet/netlab';
import { makeTestCa, waitFor, type TestCa } from '@tabfleet/server/testing';

const NAME = 'tabfleet.test';
const PORT = 8443;
const TOKEN = 'https-lab-token-0123456789abcdef';
const CERTUTIL = '/usr/bin/certutil';

let lab: NetLab;
let ca: TestCa;
let srv: LabHost;
let apiPort = 0;
let browser: Browser | undefined;
let home = '';
const serverLines: string[] = [];

/** The server's API through the lab portal, over TLS checked against the CA for the name tabfleet.test. */
function api(path: string, body?: unknown): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}`, host: `${NAME}:${PORT}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const req = request({ host: '127.0.0.1', port: apiPort, servername: NAME, ca: ca.ca, path, method: body === undefined ? 'GET' : 'POST', headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d) => (text += d)).on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null }));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

before(async () => {
  if (!existsSync(CERTUTIL)) throw new Error(`${CERTUTIL} is missing: install Debian's libnss3-tools (npm run setup, as root, does)`);
  await ensureBuilt('apps', console.log);
  lab = await NetLab.create();
  ca = await makeTestCa();
  srv = await lab.publicHost('srv');
  const cert = await ca.issue({ dns: [NAME] });
  const data = mkdtempSync(join(tmpdir(), 'tabfleet-https-lab-'));
  process.once('exit', () => rmSync(data, { recursive: true, force: true }));
  const argv = [process.execPath, '--import', 'tsx', join(repoRoot, 'server/src/main.ts'), '--host', srv.address, '--port', String(PORT), '--data', data,
    '--tls-cert', cert.certPath, '--tls-key', cert.keyPath, '--public-url', `https://${NAME}:${PORT}`];
  const child = lab.spawn(srv, argv, { cwd: repoRoot, env: { ...process.env, TABFLEET_TOKEN: TOKEN } });
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      serverLines.push(...d.toString().split('\n').filter(Boolean));
      if (serverLines.some((l) => l.startsWith('[server] ready https://'))) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the lab server exited with ${code}:\n${serverLines.slice(-40).join('\n')}`)));
  });
  apiPort = (await lab.portal(srv, srv.address, PORT)).port;
  // The CA in an NSS database where Chromium on Linux looks for the user's trust: $HOME/.pki/nssdb.
  home = mkdtempSync(join(tmpdir(), 'tabfleet-https-home-'));
  const nssdb = join(home, '.pki/nssdb');
  mkdirSync(nssdb, { recursive: true });
  await promisify(execFile)(CERTUTIL, ['-N', '-d', `sql:${nssdb}`, '--empty-password']);
  await promisify(execFile)(CERTUTIL, ['-A', '-d', `sql:${nssdb}`, '-n', 'tabfleet test CA', '-t', 'C,,', '-i', ca.caPath]);
});
after(async () => {
  await browser?.close().catch(() => {});
  await lab?.close();
  ca?.remove();
  if (home) rmSync(home, { recursive: true, force: true });
});

test('a tab in a home opens the volunteer page over https with a CA it trusts: WebGPU is there and the tab trains', { timeout: 8 * 60_000 }, async () => {
  const created = await api('/api/jobs', {
    name: 'https lab', preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 2, pacing: 'fixed',
    hyperparameters: { lr: 0.05, batchSize: 32 }, minWorkers: 1, maxWorkers: 1, targetSteps: 100_000, trust: 'trusted',
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const jobId = created.body.job.id as string;

  const homeRouter = await lab.home('a', { nat: 'eim' });
  const tabHost = await homeRouter.host('t1');
  browser = await chromium.launch({
    executablePath: await lab.launcherIn(tabHost, CHROMIUM_PATH),
    headless: true,
    // HOME holds the NSS database with the CA; the name resolves to the server's lab address (no DNS in the lab).
    env: { ...process.env, HOME: home },
    args: [...CHROMIUM_ARGS, `--host-resolver-rules=MAP ${NAME} ${srv.address}`, '--disable-features=WebRtcHideLocalIpsWithMdns'],
  });
  const page: Page = await (await browser.newContext()).newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.stack ?? e.message));
  page.on('console', (m) => /error|fail|refused/i.test(m.text()) && console.log(`[tab] ${m.text()}`));
  // A certificate the browser did not trust would fail this navigation (net::ERR_CERT_AUTHORITY_INVALID).
  const response = await page.goto(`https://${NAME}:${PORT}/apps/volunteer/`);
  assert.equal(response?.status(), 200);
  const seen = await page.evaluate(async () => ({
    secure: window.isSecureContext,
    origin: location.origin,
    gpu: 'gpu' in navigator,
    adapter: 'gpu' in navigator && (await navigator.gpu.requestAdapter()) !== null,
  }));
  assert.deepEqual(seen, { secure: true, origin: `https://${NAME}:${PORT}`, gpu: true, adapter: true });

  await page.evaluate(() => window.tabfleetVolunteer.ready);
  await page.click('#contribute');
  await waitFor('the tab has a volunteer id', async () => Boolean((await page.evaluate(() => window.tabfleetVolunteer.status()))?.volunteerId), 60_000, 250);
  const volunteerId = (await page.evaluate(() => window.tabfleetVolunteer.status()))!.volunteerId!;
  const committed = async () => ((await api(`/api/jobs/${jobId}/rounds`)).body.rounds as { members: string[]; outcome: string }[])
    .filter((r) => r.outcome === 'committed' && r.members.includes(volunteerId));
  await waitFor('two syncs commit with the tab as member', async () => (await committed()).length >= 2, 5 * 60_000, 1000)
    .catch((e: Error) => assert.fail(`${e.message}\nserver log:\n${serverLines.slice(-40).join('\n')}`));
  assert.deepEqual(errors, []);
});
