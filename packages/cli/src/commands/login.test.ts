// `tabfleet login` against a real server: it checks the server and the token before it writes the
// config file (0600 in a 0700 folder); a refused token writes nothing (exit 3), an unreachable server
// neither (exit 5); later commands use what it stored, and TABFLEET_TOKEN overrides it.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname } from 'node:path';
import { after, before, test } from 'node:test';
import { startTestServer, type TestServer } from '@tabfleet/server/testing';
import { cliHome, jsonOf, runCli, shown } from '../../test/cli-process';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

test('login stores the server and token 0600 after checking both; later commands use them', async () => {
  const home = cliHome();
  const run = await runCli(['login', '--server', `${server.url}/`, '--token', 'test-token', '--json'], { env: home.env });
  assert.equal(run.code, 0, shown(run));
  const doc = jsonOf(run);
  assert.equal(doc.server, server.url, 'the trailing slash is dropped');
  assert.equal(doc.config, home.config);
  assert.equal(statSync(home.config).mode & 0o777, 0o600);
  assert.equal(statSync(dirname(home.config)).mode & 0o777, 0o700);
  assert.deepEqual(JSON.parse(readFileSync(home.config, 'utf8')), { server: server.url, token: 'test-token' });

  await server.createJob({ name: 'listed after login' });
  const ls = await runCli(['ls', '--json'], { env: home.env });
  assert.equal(ls.code, 0, shown(ls));
  assert.ok(jsonOf(ls).jobs.some((j: { name: string }) => j.name === 'listed after login'));

  const overridden = await runCli(['ls', '--json'], { env: { ...home.env, TABFLEET_TOKEN: 'not-the-token' } });
  assert.equal(overridden.code, 3, `TABFLEET_TOKEN overrides the stored token: ${shown(overridden)}`);
  assert.equal(jsonOf(overridden).error.kind, 'auth');
  await server.stopJobs();
});

test('login with a token the server refuses writes nothing and exits 3', async () => {
  const home = cliHome();
  const run = await runCli(['login', '--server', server.url, '--token', 'wrong-token'], { env: home.env });
  assert.equal(run.code, 3, shown(run));
  assert.match(run.stderr, /401/);
  assert.equal(run.stdout, '');
  assert.equal(existsSync(home.config), false);
});

test('login reads the token from stdin with --token -', async () => {
  const home = cliHome();
  const run = await runCli(['login', '--server', server.url, '--token', '-'], { env: home.env, stdin: 'test-token\n' });
  assert.equal(run.code, 0, shown(run));
  assert.equal(JSON.parse(readFileSync(home.config, 'utf8')).token, 'test-token');
});

test('login to a port nothing listens on exits 5 (network) and writes nothing; a bad URL exits 2', async () => {
  const home = cliHome();
  const run = await runCli(['login', '--server', `http://127.0.0.1:${await closedPort()}`, '--token', 'test-token', '--json'], { env: home.env });
  assert.equal(run.code, 5, shown(run));
  assert.equal(jsonOf(run).error.kind, 'network');
  assert.match(run.stderr, /cannot reach/);
  assert.equal(existsSync(home.config), false);

  const bad = await runCli(['login', '--server', 'ftp://example.invalid', '--token', 'x'], { env: home.env });
  assert.equal(bad.code, 2, shown(bad));
  const none = await runCli(['ls'], { env: home.env });
  assert.equal(none.code, 3, `not logged in: ${shown(none)}`);
  assert.match(none.stderr, /tabfleet login/);
});
