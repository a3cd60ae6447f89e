// Streaming DiLoCo's fragments: strided across blocks, every parameter in exactly one fragment,
// gather and scatter inverse to each other; and what a job spec may ask of streaming.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema } from './jobs';
import { gptLayout, PRESET_LAYOUTS } from './layout';
import { fragmentOfSync, fragmentUnits, gatherFragment, modelFragments, scatterFragment } from './streaming';

const gpt = gptLayout({ layers: 4, heads: 2, width: 32, context: 16, vocab: 256 });

test('a GPT\'s blocks are strided across fragments; embeddings and the last norm fill the lightest', () => {
  const fragments = modelFragments(gpt, 2);
  const blockOf = (f: number) => new Set(gpt.entries.filter((e) => fragments[f].ranges.some(([s]) => s === e.offset))
    .map((e) => /\.h\.(\d+)\./.exec(e.name)?.[1]).filter((b) => b !== undefined));
  assert.deepEqual([...blockOf(0)], ['0', '2']);
  assert.deepEqual([...blockOf(1)], ['1', '3']);
  // Every parameter in one fragment, padding in none.
  const owners = new Int8Array(gpt.length);
  fragments.forEach((f, k) => f.ranges.forEach(([s, e]) => owners.fill(k + 1, s, e)));
  for (const e of gpt.entries) for (let i = e.offset; i < e.offset + e.size; i++) assert.ok(owners[i] > 0, `${e.name} has no fragment`);
  assert.equal(fragments.reduce((a, f) => a + f.length, 0), gpt.entries.reduce((a, e) => a + e.size, 0));
  // Balanced to within the largest loose tensor (the token embedding).
  const wte = gpt.entries[0].size;
  assert.ok(Math.abs(fragments[0].length - fragments[1].length) <= wte, `${fragments[0].length} against ${fragments[1].length}`);
  assert.equal(fragmentUnits(gpt), 4 + 3);
  assert.throws(() => modelFragments(gpt, 8), /at most 7 fragments/);
  assert.equal(modelFragments(gpt, 7).length, 7);
  assert.equal(fragmentUnits(PRESET_LAYOUTS['mlp-fashion']), 2);
});

test('gather and scatter are inverse; fragments take turns by the count of syncs', () => {
  const fragments = modelFragments(gpt, 3);
  const v = Float32Array.from({ length: gpt.length }, (_, i) => i);
  const back = new Float32Array(gpt.length);
  for (const f of fragments) scatterFragment(back, f, gatherFragment(v, f));
  for (const e of gpt.entries) assert.deepEqual(back.subarray(e.offset, e.offset + e.size), v.subarray(e.offset, e.offset + e.size));
  assert.throws(() => scatterFragment(back, fragments[0], new Float32Array(3)), /values, not 3/);
  assert.deepEqual([0, 1, 2, 3, 4].map((s) => fragmentOfSync(s, 3)), [0, 1, 2, 0, 1]);
});

test('a streaming job is a trusted, fixed DiLoCo job with fragments its model has and an overlap below H', () => {
  const base = { preset: 'gpt', dataset: 'fortunes', gpt: { layers: 2, heads: 2, width: 32, context: 16 }, strategy: 'diloco', H: 8, trust: 'trusted' } as const;
  const ok = jobSpecSchema.parse({ ...base, fragments: 2, overlapSteps: 2, compression: 'e2m1' });
  assert.equal(ok.pacing, 'fixed');
  assert.equal(ok.fragmentMixing, 0.5);
  assert.equal(jobSpecSchema.parse({ ...base }).fragments, 1);
  const refused = (spec: object, path: string, pattern: RegExp) => {
    const r = jobSpecSchema.safeParse(spec);
    assert.equal(r.success, false, JSON.stringify(spec));
    const issue = r.error!.issues.find((i) => i.path.join('.') === path);
    assert.ok(issue && pattern.test(issue.message), `${path}: ${JSON.stringify(r.error!.issues)}`);
  };
  refused({ ...base, strategy: 'localsgd', fragments: 2 }, 'strategy', /strategy must be diloco/);
  refused({ ...base, fragments: 2, compression: 'dgc' }, 'compression', /none, fp16, int8 or e2m1/);
  refused({ ...base, fragments: 2, trust: 'untrusted' }, 'trust', /cannot be replayed/);
  refused({ ...base, fragments: 2, pacing: 'auto' }, 'pacing', /fixed, not auto/);
  refused({ ...base, overlapSteps: 8 }, 'overlapSteps', /below H/);
  refused({ ...base, fragments: 6 }, 'fragments', /at most 5 fragments/);
  refused({ ...base, fragmentMixing: 0.5 }, 'fragmentMixing', /set overlapSteps/);
});
