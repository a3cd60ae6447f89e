// `npm run bench -- gpt2-tab --quick` end to end (the real server, a headless Chromium tab on the
// volunteer page, HTTP checkpoints) into a temporary file: the tab planned the job's GPT on GPT-2's
// vocabulary, trained its steps, and the checkpoint it uploaded loaded under nanoGPT's names (the
// bench throws otherwise). Speed lives in the JSON.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { layoutOf } from '@tabfleet/protocol';
import { runBench } from './child';
import { gpt2TabJob } from './gpt2-tab';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-gpt2-tab-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run bench -- gpt2-tab --quick: a tab plans a GPT on GPT-2\'s vocabulary, trains it, and its checkpoint loads by nanoGPT\'s names', { timeout: 5 * 60_000 }, async (t) => {
  const out = join(dir, 'gpt2-tab.json');
  assert.equal(await runBench(['gpt2-tab', '--quick', '--out', out], t.signal), 0, 'the benchmark exits 0');
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration');
  assert.equal(r.quick, true);
  const spec = gpt2TabJob(true);
  assert.deepEqual(r.spec.gpt, spec.gpt);
  assert.equal(r.spec.tokenizer, 'gpt2');
  assert.equal(r.parameters, layoutOf(spec).length);
  assert.equal(r.adapter.isCpu, true, 'this machine\'s adapter is SwiftShader');
  assert.match(r.plan, /^the batch of 1 in one pass, recompute (on|off) \(/, 'batch 1 fits this tab in one pass');
  assert.equal(r.steps.at(-1).step, 2, 'the last step seen, with its time');
  assert.ok(r.steps.every((s: { ms: number }) => s.ms > 0));
  // The checkpoint holds every tensor of the layout (nanoGPT's names: transformer.wte.weight first).
  assert.equal(r.checkpoint.tensors, layoutOf(spec).entries.length);
  assert.equal(r.checkpoint.names[0], 'transformer.wte.weight');
  assert.ok(r.checkpoint.bytes > 4 * r.parameters, 'the parameters in f32 and the DiLoCo state');
  assert.deepEqual(Object.keys(r.summary).sort(), ['gpt2_small_tab_plan', 'gpt2_small_tab_seconds_to_plan', 'gpt2_small_tab_step_ms']);
});
