// `tabfleet upload` against a real server: a text and an image set (an IDX pair, sent as the form the
// server parses) are stored and listed, their ids printed; a file the server refuses is exit 2 with
// the server's reason, and nothing is stored.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { test } from 'node:test';
import { encodeIdx, generateCorpus } from '@tabfleet/data';
import type { TestServer } from '@tabfleet/server/testing';
import { cliAgainstTestServer, jsonOf, runCli, shown } from '../../test/cli-process';

let server: TestServer;
let env: Record<string, string>;
let dir: string;
cliAgainstTestServer((ctx) => ({ server, env, dir } = ctx));

const listed = async () => (await server.api('/api/datasets')).body.datasets as { id: string; name: string; kind: string; bytes: number }[];

test('a text uploads: its id on stdout, listed by the server with its name and size', async () => {
  const text = Array.from({ length: 240 }, (_, i) => generateCorpus(3, i + 1).trim()).join('\n\n');
  const file = join(dir, 'corpus.txt');
  writeFileSync(file, text);
  const run = await runCli(['upload', file, '--name', 'toy corpus'], { env });
  assert.equal(run.code, 0, shown(run));
  const id = run.stdout.trim();
  assert.match(id, /^u-[0-9a-f]{12}$/);
  assert.match(run.stderr, new RegExp(`"upload": "${id}"`), 'says how a job names it');
  const info = (await listed()).find((d) => d.id === id);
  assert.deepEqual(info && { name: info.name, kind: info.kind, bytes: info.bytes }, { name: 'toy corpus', kind: 'text', bytes: Buffer.byteLength(text) });
});

test('an image set uploads as an IDX pair (gzip) with --labels', async () => {
  const n = 300;
  const images = join(dir, 'images-idx3-ubyte.gz'), labels = join(dir, 'labels-idx1-ubyte.gz');
  writeFileSync(images, gzipSync(encodeIdx([n, 28, 28], Uint8Array.from({ length: n * 784 }, (_, k) => (k * 7) % 256))));
  writeFileSync(labels, gzipSync(encodeIdx([n], Uint8Array.from({ length: n }, (_, i) => i % 10))));
  const run = await runCli(['upload', images, '--kind', 'images', '--labels', labels, '--json'], { env });
  assert.equal(run.code, 0, shown(run));
  const { dataset } = jsonOf(run);
  assert.equal(dataset.kind, 'images');
  assert.deepEqual(dataset.records, { train: 270, validation: 30 });
  assert.equal(dataset.name, 'images-idx3-ubyte.gz', 'named after the file by default');
  assert.ok((await listed()).some((d) => d.id === dataset.id));
});

test('a file the server refuses is exit 2 with its reason, and nothing is stored', async () => {
  const before = (await listed()).length;
  const file = join(dir, 'short.txt');
  writeFileSync(file, 'one paragraph only\n');
  const run = await runCli(['upload', file, '--json'], { env });
  assert.equal(run.code, 2, shown(run));
  const { error } = jsonOf(run);
  assert.equal(error.kind, 'usage');
  assert.match(error.message, /400 .*too little text/);
  const notImages = await runCli(['upload', file, '--kind', 'images'], { env });
  assert.equal(notImages.code, 2, shown(notImages));
  const badKind = await runCli(['upload', file, '--kind', 'audio'], { env });
  assert.equal(badKind.code, 2, shown(badKind));
  const missing = await runCli(['upload', join(dir, 'no-such.txt')], { env });
  assert.equal(missing.code, 2, shown(missing));
  assert.match(missing.stderr, /cannot read/);
  assert.equal((await listed()).length, before);
});
