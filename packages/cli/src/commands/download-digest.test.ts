// A checkpoint whose bytes do not hash to the digest the server sent (a corrupted transfer, or a proxy
// that changed it) is not kept: exit 1, and neither the file nor its partial download is left behind.
// The server here is a stand-in that sends a wrong digest, which a real server never does.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { CHECKPOINT_SHA256_HEADER, CHECKPOINT_SYNC_HEADER } from '@tabfleet/protocol';
import { cliHome, jsonOf, runCli, shown } from '../../test/cli-process';

const body = Buffer.from('not the bytes the digest was taken of');
const server = createServer((req, res) => {
  if (req.headers.authorization !== 'Bearer t0ken') return void res.writeHead(401).end();
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length, [CHECKPOINT_SYNC_HEADER]: '3', [CHECKPOINT_SHA256_HEADER]: '0'.repeat(64) }).end(body);
});
let url = '';
before(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
after(() => new Promise((r) => server.close(r)));

test('a download whose SHA-256 is not the server\'s digest exits 1 and keeps nothing', async () => {
  const home = cliHome();
  const run = await runCli(['download', 'job-x', '--json'], { env: { ...home.env, TABFLEET_SERVER: url, TABFLEET_TOKEN: 't0ken' }, cwd: home.dir });
  assert.equal(run.code, 1, shown(run));
  assert.match(jsonOf(run).error.message, /SHA-256 [0-9a-f]{64} is not the server's 0{64}; nothing kept/);
  assert.equal(existsSync(`${home.dir}/job-x-sync3.safetensors`), false);
  assert.deepEqual(readdirSync(home.dir).filter((f) => f.includes('safetensors')), [], 'no partial file either');
});
