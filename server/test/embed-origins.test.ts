// Which sites may embed the contribute widget (`--allow-origin`), through the real server: the check
// the element reads from any origin, the frame's CSP frame-ancestors naming exactly the allowed
// origins (other pages still unframeable), the embed script loadable cross-origin, and an
// `--allow-origin` no browser would ever send refused at start with a clear error.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startServer } from '../src/app';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const PARTNER = 'http://partner.example:8000';
let server: TestServer;
before(async () => {
  // The built files' contents do not matter here, only the headers they are served with.
  const staticDir = mkdtempSync(join(tmpdir(), 'tabfleet-embed-'));
  for (const [file, text] of [['apps/embed/index.html', '<!doctype html>frame'], ['apps/volunteer/index.html', '<!doctype html>page'], ['embed/tabfleet.js', 'export {};']]) {
    mkdirSync(join(staticDir, file, '..'), { recursive: true });
    writeFileSync(join(staticDir, file), text);
  }
  server = await startTestServer({ staticDir, allowOrigins: [PARTNER] });
});
after(() => server.stop());

test('the embed check answers any origin whether it may embed the widget', async () => {
  const ask = (origin?: string) => fetch(`${server.url}/api/public/embed`, { headers: origin ? { origin } : {} });
  const partner = await ask(PARTNER);
  assert.equal(partner.headers.get('access-control-allow-origin'), '*');
  assert.match(partner.headers.get('vary') ?? '', /Origin/);
  assert.deepEqual(await partner.json(), { allowed: true, origin: PARTNER, server: { name: new URL(server.url).host, operator: null } });
  const other = await ask('http://other.example');
  assert.equal(other.headers.get('access-control-allow-origin'), '*');
  assert.equal((await other.json()).allowed, false);
  // The server's own pages (and clients that send no Origin) may.
  assert.equal((await (await ask(server.url)).json()).allowed, true);
  assert.deepEqual((await (await ask()).json()).origin, null);
});

test('only the contribute frame may be framed, and only by the allowed origins', async () => {
  const frame = await fetch(`${server.url}/apps/embed/`);
  assert.equal(frame.status, 200);
  assert.match(frame.headers.get('content-security-policy') ?? '', new RegExp(`frame-ancestors 'self' ${PARTNER.replace(/\./g, '\\.')};`));
  assert.equal(frame.headers.get('x-frame-options'), null);
  const page = await fetch(`${server.url}/apps/volunteer/`);
  assert.match(page.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
  assert.equal(page.headers.get('x-frame-options'), 'DENY');
  assert.equal(page.headers.get('access-control-allow-origin'), null);
  // A module script is fetched with CORS: any site may load it (and be told by the element that it is refused).
  const script = await fetch(`${server.url}/embed/tabfleet.js`, { headers: { origin: 'http://other.example' } });
  assert.equal(script.status, 200);
  assert.equal(script.headers.get('access-control-allow-origin'), '*');
  assert.equal(script.headers.get('content-type'), 'text/javascript');
});

test("'*' lets any site frame the contribute frame", async () => {
  const any = await startTestServer({ allowOrigins: ['*'] });
  try {
    assert.match((await fetch(`${any.url}/apps/embed/`)).headers.get('content-security-policy') ?? '', /frame-ancestors 'self' https: http:;/);
    assert.equal((await (await fetch(`${any.url}/api/public/embed`, { headers: { origin: 'https://anyone.example' } })).json()).allowed, true);
  } finally {
    await any.stop();
  }
});

test('an --allow-origin that is not an origin is refused with a clear error, before anything starts', async () => {
  for (const bad of ['partner.example', 'https://partner.example/', 'https://partner.example/page', 'ftp://partner.example', 'HTTPS://Partner.example']) {
    await assert.rejects(startServer({ allowOrigins: [bad], dataDir: mkdtempSync(join(tmpdir(), 'tabfleet-embed-')) }), (e: Error) => {
      assert.ok(e.message.includes(`--allow-origin ${JSON.stringify(bad)}: want an origin such as https://example.org`), e.message);
      return true;
    });
  }
  const exit = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const args = ['--import', 'tsx', 'server/src/main.ts', '--port', '0', '--allow-origin', 'partner.example'];
    const child = execFile(process.execPath, args, { cwd: join(import.meta.dirname, '../..') }, (_e, _out, stderr) => resolve({ code: child.exitCode, stderr }));
  });
  assert.equal(exit.code, 2);
  assert.match(exit.stderr, /^bad --allow-origin "partner\.example": want an origin/);
});
