// A joiner's model from a member over an in-memory link: it arrives whole and in order, a refusal says
// why, and a member that sends too much, out of order, nothing, or leaves fails the transfer with a
// typed error (the joiner then asks another member, or the server). Fake time throughout.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeFrame, jobHash, MAX_FRAME_PAYLOAD } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { CollectiveError } from './errors';
import { MemoryNetwork } from './memory';
import { MAX_MODELS_SERVED_AT_ONCE, ModelShare } from './model-share';

async function pair(clock = new FakeClock()) {
  const net = new MemoryNetwork({ clock });
  const member = net.endpoint('member');
  const joiner = net.endpoint('joiner');
  await clock.run(joiner.connect('member'));
  return { net, clock, member, joiner };
}

const model = (bytes: number) => Uint8Array.from({ length: bytes }, (_, i) => (i * 7 + 3) & 255);

async function rejection(p: Promise<unknown>, clock: FakeClock, code: string, message: RegExp): Promise<void> {
  const e = await clock.run(p.then(() => null, (err: unknown) => err));
  assert.ok(e instanceof CollectiveError, `expected a CollectiveError, got ${String(e)}`);
  assert.equal(e.code, code, e.message);
  assert.match(e.message, message);
}

test('a model of several frames arrives whole, for the job and sync asked, its bytes counted as they come', async () => {
  const { clock, member, joiner } = await pair();
  const data = model(3 * MAX_FRAME_PAYLOAD + 17);
  const asked: [string, number, number][] = [];
  ModelShare.of(member).serve(async (from, job, seq) => (asked.push([from, job, seq]), data));
  const arrived: number[] = [];
  const got = await clock.run(ModelShare.of(joiner).fetch('member', { job: 'job-1', seq: 7, maxBytes: data.byteLength, onBytes: (n) => arrived.push(n) }));
  assert.deepEqual(asked, [['joiner', jobHash('job-1'), 7]]);
  assert.deepEqual(got, data);
  assert.deepEqual(arrived, [MAX_FRAME_PAYLOAD, MAX_FRAME_PAYLOAD, MAX_FRAME_PAYLOAD, 17]);
  // An empty model is one last frame.
  ModelShare.of(member).serve(async () => new Uint8Array(0));
  assert.equal((await clock.run(ModelShare.of(joiner).fetch('member', { job: 'job-1', seq: 8, maxBytes: 10 }))).byteLength, 0);
});

test('a refusal reaches the joiner with the member\'s reason', async () => {
  const { clock, member, joiner } = await pair();
  ModelShare.of(member); // listening, with nothing to serve (it stopped serving, or never began)
  await rejection(ModelShare.of(joiner).fetch('member', { job: 'j', seq: 1, maxBytes: 100 }), clock, 'aborted', /serves no model/);
  ModelShare.of(member).serve(async (_from, _job, seq) => {
    throw new Error(`this member holds sync 3, not ${seq}`);
  });
  await rejection(ModelShare.of(joiner).fetch('member', { job: 'j', seq: 2, maxBytes: 100 }), clock, 'aborted', /will not send the model of sync 2: this member holds sync 3, not 2/);
});

test('more bytes than a checkpoint of the model can have fail the transfer', async () => {
  const { clock, member, joiner } = await pair();
  ModelShare.of(member).serve(async () => model(2 * MAX_FRAME_PAYLOAD));
  await rejection(ModelShare.of(joiner).fetch('member', { job: 'j', seq: 1, maxBytes: MAX_FRAME_PAYLOAD + 5 }), clock, 'bad_frame', /more than the \d+ bytes/);
});

test('a member that goes quiet, sends out of order, or leaves fails the transfer', async () => {
  const { net, clock, member, joiner } = await pair();
  // Quiet: it never answers (a member that does not run ModelShare at all).
  await rejection(ModelShare.of(joiner).fetch('member', { job: 'j', seq: 1, maxBytes: 100, idleMs: 5_000 }), clock, 'deadline', /no model bytes from member for 5000 ms/);
  // Out of order: chunk 1 first.
  const job = jobHash('j');
  member.onFrame(() => void member.send('joiner', encodeFrame({ kind: 'modelData', dtype: 'u8', flags: 0, job, round: 2, op: 0, step: 0, segment: 0, chunk: 1 }, new Uint8Array(4))));
  await rejection(ModelShare.of(joiner).fetch('member', { job: 'j', seq: 2, maxBytes: 100 }), clock, 'bad_frame', /chunk 1 from member where 0 was next/);
  // Leaves: the link drops while the joiner waits.
  const waiting = ModelShare.of(joiner).fetch('member', { job: 'j', seq: 3, maxBytes: 100, idleMs: 60_000 });
  clock.after(10, () => net.dropLink('joiner', 'member'));
  await rejection(waiting, clock, 'peer_lost', /member left while sending the model/);
});

test('a member sends to at most a few joiners at once', async () => {
  const clock = new FakeClock();
  const net = new MemoryNetwork({ clock });
  const member = net.endpoint('member');
  let release = () => {};
  const held = new Promise<void>((r) => (release = r));
  ModelShare.of(member).serve(async () => (await held, model(100)));
  const joiners = Array.from({ length: MAX_MODELS_SERVED_AT_ONCE + 1 }, (_, i) => net.endpoint(`j${i}`));
  for (const j of joiners) await clock.run(j.connect('member'));
  const fetches = joiners.map((j) => ModelShare.of(j).fetch('member', { job: 'x', seq: 1, maxBytes: 1_000 }).then(() => 'ok', (e: Error) => e.message));
  await clock.advance(10);
  release();
  const results = await clock.run(Promise.all(fetches));
  assert.deepEqual(results.slice(0, MAX_MODELS_SERVED_AT_ONCE), Array(MAX_MODELS_SERVED_AT_ONCE).fill('ok'));
  assert.match(results[MAX_MODELS_SERVED_AT_ONCE], /busy sending the model to 2 others/);
});

test('a joiner asks one member for one model at a time; a client that asks again anyway is refused, and its transfer ends', async () => {
  const { clock, member, joiner } = await pair();
  let release = () => {};
  const held = new Promise<void>((r) => (release = r));
  ModelShare.of(member).serve(async () => (await held, model(100)));
  const first = ModelShare.of(joiner).fetch('member', { job: 'x', seq: 1, maxBytes: 1_000 }).then(() => 'arrived', (e: Error) => e.message);
  await rejection(ModelShare.of(joiner).fetch('member', { job: 'x', seq: 1, maxBytes: 1_000 }), clock, 'bad_argument', /already coming from member/);
  // A second request sent anyway is refused while the first model is on its way (the refusal names
  // the same job and sync, so the joiner's transfer ends with it: it asked twice).
  const refusals: string[] = [];
  joiner.onFrame((_from, bytes) => bytes[1] === 16 && refusals.push(new TextDecoder().decode(bytes.subarray(28))));
  await clock.run(joiner.send('member', encodeFrame({ kind: 'modelRequest', dtype: 'u8', flags: 0, job: jobHash('x'), round: 1, op: 0, step: 0, segment: 0, chunk: 0 }, new Uint8Array(0))));
  await clock.advance(10);
  assert.deepEqual(refusals, [JSON.stringify({ message: 'a model is already on its way to you' })]);
  release();
  assert.match(await clock.run(first), /will not send the model of sync 1: a model is already on its way to you/);
});
