// Image sets over HTTP: a researcher uploads one as safetensors (the body) or as an IDX pair (a form,
// gzip or not); a job of an image model names it; its member downloads its shard of the training part
// and the held-out part with its ticket, nobody else does. Broken files are refused with what is wrong
// and store nothing; a job naming an upload of the wrong kind is refused.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import { decodeFashionShard, encodeIdx, MAX_IMAGE_UPLOAD_BYTES } from '@tabfleet/data';
import { encodeSafetensors } from '@tabfleet/protocol';
import { BASE_JOB, startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

const N = 400;
/** Image i is all pixels 20·(i mod 10): its label, so a shard can be checked against its labels. */
const pixels = Uint8Array.from({ length: N * 784 }, (_, k) => 20 * (Math.floor(k / 784) % 10));
const labels = Uint8Array.from({ length: N }, (_, i) => i % 10);
const safetensors = () => encodeSafetensors({ images: { dtype: 'U8', shape: [N, 28, 28], data: pixels }, labels: { dtype: 'U8', shape: [N], data: labels } });

async function post(body: BodyInit, kind = 'images', name = 'shapes'): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { authorization: 'Bearer test-token' };
  if (!(body instanceof FormData)) headers['content-type'] = 'application/octet-stream';
  const res = await fetch(`${server.url}/api/datasets?kind=${kind}&name=${name}`, { method: 'POST', headers, body });
  return { status: res.status, body: await res.json() };
}

function idxForm(images: Uint8Array, labelsFile: Uint8Array, names = ['images', 'labels']): FormData {
  const form = new FormData();
  form.set(names[0], new Blob([images as Uint8Array<ArrayBuffer>]), 'train-images-idx3-ubyte.gz');
  form.set(names[1], new Blob([labelsFile as Uint8Array<ArrayBuffer>]), 'train-labels-idx1-ubyte.gz');
  return form;
}

const uploadFiles = () => (existsSync(join(server.dataDir, 'uploads')) ? readdirSync(join(server.dataDir, 'uploads')).length : 0);

test('an image set uploads as safetensors or as a gzip IDX pair; a job names it and its member gets its shard and the held-out images with its ticket', async () => {
  const fromSafetensors = await post(safetensors() as Uint8Array<ArrayBuffer>);
  assert.equal(fromSafetensors.status, 201, JSON.stringify(fromSafetensors.body));
  const pair = await post(idxForm(gzipSync(encodeIdx([N, 28, 28], pixels)), gzipSync(encodeIdx([N], labels))));
  assert.equal(pair.status, 201, JSON.stringify(pair.body));
  for (const d of [fromSafetensors.body.dataset, pair.body.dataset]) {
    assert.equal(d.kind, 'images');
    assert.deepEqual(d.records, { train: 360, validation: 40 });
  }
  const listed = (await server.api('/api/datasets')).body.datasets.map((d: { id: string }) => d.id);
  assert.ok(listed.includes(pair.body.dataset.id) && listed.includes(fromSafetensors.body.dataset.id));

  const id = pair.body.dataset.id;
  const job = await server.createJob({ ...BASE_JOB, dataset: 'image-upload', upload: id, maxWorkers: 2 });
  const v = await server.volunteer();
  v.holdReady = true;
  assert.equal((await v.request(job.id)).ok, true);
  for (let i = 0; i < 100 && !v.assignment; i++) await sleep(20);
  const shardUrl = new URL(v.assignment!.dataUrl!, server.url);
  assert.match(shardUrl.pathname, new RegExp(`^/datasets/uploads/${id}/shards/0/2$`));
  const shard = decodeFashionShard(new Uint8Array(await (await fetch(shardUrl)).arrayBuffer()));
  assert.equal(shard.count, 180, 'half of the 360 training images');
  // Every image's pixels still say its label (the shard kept images and labels together), and no held-out image is in it.
  const value = (i: number) => Math.round(shard.x[i * 784] * 0.353 * 255 + 0.286 * 255) + 0; // + 0: no -0
  for (let i = 0; i < shard.count; i++) assert.equal(value(i), 20 * shard.y[i]);
  assert.ok(!shard.y.includes(9), 'label 9 is every tenth image here: all held out');
  const validation = new URL(shardUrl.href.replace(/\/shards\/0\/2\?/, '/validation?'));
  validation.searchParams.set('shard', '0/2');
  const held = decodeFashionShard(new Uint8Array(await (await fetch(validation)).arrayBuffer()));
  assert.deepEqual([held.count, new Set(held.y).size], [40, 1], 'the held-out part is every tenth image (all label 9 here)');
  validation.searchParams.delete('ticket');
  assert.equal((await fetch(validation)).status, 401, 'an upload is not public');
});

test('a broken image set is refused with what is wrong and stores nothing; a job naming an upload of the other kind is refused', async () => {
  const files = uploadFiles();
  const before = (await server.api('/api/datasets')).body.datasets.length;
  const bomb = gzipSync(new Uint8Array(MAX_IMAGE_UPLOAD_BYTES + 1));
  for (const [body, message] of [
    [new TextEncoder().encode('not an image set at all'), /upload "shapes": not a safetensors file: header length \d+ does not fit/],
    [
      encodeSafetensors({ images: { dtype: 'U8', shape: [N, 28, 28], data: pixels }, labels: { dtype: 'U8', shape: [N], data: labels.map((l) => l + 5) } }),
      /label 10 of image 5 is not a class in 0\.\.9/,
    ],
    [idxForm(encodeIdx([N, 28, 28], pixels), encodeIdx([N - 1], labels.subarray(1))), /400 images but 399 labels/],
    [
      idxForm(encodeIdx([N, 28, 28], pixels), encodeIdx([N], labels), ['pictures', 'labels']),
      /the parts "images" and "labels" \(IDX files\) or one part "safetensors"; this one has "pictures", "labels"/,
    ],
    [idxForm(gzipSync(encodeIdx([N, 28, 28], pixels)).subarray(0, 500), encodeIdx([N], labels)), /the images file is broken gzip/],
    [idxForm(bomb, encodeIdx([N], labels)), /the images file unpacks to more than 64 MiB/],
  ] as const) {
    const r = await post(body as BodyInit);
    assert.equal(r.status, 400, String(message));
    assert.match(r.body.error.message, message);
  }
  for (const [body, message] of [
    ['garbage', /malformed multipart\/form-data body: no boundary line/],
    ['--xyz\r\nContent-Disposition: form-data; name="images"\r\n\r\nabc', /a part without its closing boundary/],
    ['--xyz\r\nContent-Type: image/png\r\n\r\nabc\r\n--xyz--', /a part without Content-Disposition/],
  ] as const) {
    const res = await fetch(`${server.url}/api/datasets?kind=images`, { method: 'POST', headers: { authorization: 'Bearer test-token', 'content-type': 'multipart/form-data; boundary=xyz' }, body });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, message);
  }
  const oversized = await post(new Uint8Array(MAX_IMAGE_UPLOAD_BYTES + 1));
  assert.equal(oversized.status, 413);
  assert.match((await post('x', 'video')).body.error.message, /kind must be text or images \(got "video"\)/);
  assert.equal(uploadFiles(), files, 'nothing written');
  assert.equal((await server.api('/api/datasets')).body.datasets.length, before, 'nothing listed');

  const images = (await post(safetensors() as Uint8Array<ArrayBuffer>)).body.dataset.id;
  const text = await server.api('/api/jobs', { method: 'POST', json: { ...BASE_JOB, preset: 'gpt', gpt: { layers: 1, heads: 1, width: 8, context: 8 }, dataset: 'text-upload', upload: images } });
  assert.equal(text.status, 400);
  assert.match(text.body.error.message, new RegExp(`upload: ${images} is an image set, and a text-upload job needs a text`));
});
