// `npm run bench -- gpt2-tab`: GPT-2 small as a volunteer job on the real path (issue 38). The real
// server (SQLite, HTTP checkpoints), one headless Chromium tab on the volunteer page (the Contribute
// button, WebGPU in the tab's engine worker): the tab plans the model against its memory budget,
// trains the job's steps and uploads the checkpoint, which is then read back from the server,
// verified against the job's layout and loaded into a fresh model under nanoGPT's names.
//
// Full: 12 layers, 12 heads, width 768, context 1,024 on GPT-2's BPE over the fortunes corpus (124M
// parameters), batch 1, DiLoCo with H = 1, 2 steps: a sync after each, so each step's time is the
// page's own measure of that sync's local work (samples ÷ samples per second). On a CPU adapter
// (SwiftShader) that is about half an hour, nearly all of it the memory plan's probe passes and the
// two steps. --quick: the same vocabulary at a toy depth, width and context (the suite's smoke test;
// figures not for quoting). The time to the plan is the page's status as polled (every pollMs).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { connectBrowser, ensureBuilt, openPage, repoRoot } from '@tabfleet/headless';
import { createModel, presetOf } from '@tabfleet/nn';
import { jobSpecSchema, layoutOf, verifyCheckpoint, type JobSpec } from '@tabfleet/protocol';
import { startTestServer, waitFor } from '@tabfleet/server/testing';
import { CpuBackend } from '@tabfleet/tensor';
import type { BenchOptions } from './run';
import { benchCommand, runRecord } from './machine';

export const GPT2_SMALL_SHAPE = { layers: 12, heads: 12, width: 768, context: 1024 };
export const GPT2_QUICK_SHAPE = { layers: 2, heads: 2, width: 64, context: 32 };
const STEPS = 2;

export function gpt2TabJob(quick: boolean): JobSpec {
  return jobSpecSchema.parse({
    name: quick ? 'gpt2-tab quick' : 'GPT-2 small in a tab', preset: 'gpt', gpt: quick ? GPT2_QUICK_SHAPE : GPT2_SMALL_SHAPE,
    dataset: 'fortunes', tokenizer: 'gpt2', strategy: 'diloco', H: 1, pacing: 'fixed', trust: 'trusted',
    hyperparameters: { optimizer: 'adamw', lr: 1e-4, batchSize: 1 }, minWorkers: 1, maxWorkers: 1,
    targetSteps: STEPS, checkpointEvery: STEPS,
    // The last sync is checkpointed, so evaluated: one validation window (64 take a CPU adapter hours).
    evalEverySteps: 1000, evalExamples: 1,
  });
}

interface StatusLike {
  state: string;
  step: number;
  lastError: string | null;
  samplesPerSec: number;
  /** The runtime's description of its plan (micro-batch, passes, recompute, why). */
  memoryPlan: string | null;
}

export async function run(opts: BenchOptions): Promise<void> {
  const t0 = Date.now();
  const log = (s: string) => console.log(`[gpt2-tab] ${((Date.now() - t0) / 1000).toFixed(0)} s ${s}`);
  const pollMs = opts.quick ? 250 : 5_000;
  const spec = gpt2TabJob(opts.quick);
  await ensureBuilt('apps', log);
  const hour = 3_600_000;
  const server = await startTestServer({ timing: { roundTimeoutMs: 2 * hour, barrierTimeoutMs: 2 * hour, loadTimeoutMs: 2 * hour } });
  const browser = await connectBrowser();
  try {
    const job = await server.createJob(spec);
    const tab = await openPage(browser, `${server.url}/apps/volunteer/`, { log: (l) => /error|fail|refused/i.test(l) && log(`[tab] ${l}`) });
    const ready = await tab.page.evaluate(() => window.tabfleetVolunteer.ready);
    log(`job ${job.id}: ${layoutOf(spec).length.toLocaleString('en-US')} parameters; tab on ${ready?.description}`);
    const clicked = Date.now();
    await tab.page.click('#contribute');
    // What the page says, polled: when the plan appears and when each step is done.
    // Set inside the poll (a holder, so the compiler does not take them for never-assigned).
    const seen: { plan: StatusLike['memoryPlan']; planMs: number | null } = { plan: null, planMs: null };
    // Each step the poll saw: when, and its time by the page (one step of local work per sync).
    const steps: { step: number; atMs: number; ms: number }[] = [];
    let lastLogged = 0;
    await waitFor('the job is done', async () => {
      const s = (await tab.page.evaluate(() => window.tabfleetVolunteer.status())) as StatusLike | null;
      if (s?.lastError) throw new Error(`the tab failed: ${s.lastError}`);
      if (s?.memoryPlan && !seen.plan) {
        const plan = (seen.plan = s.memoryPlan);
        seen.planMs = Date.now() - clicked;
        log(`planned: ${plan}`);
      }
      if (s && s.step > (steps.at(-1)?.step ?? 0) && s.samplesPerSec > 0) {
        steps.push({ step: s.step, atMs: Date.now() - clicked, ms: (1000 * spec.hyperparameters.batchSize) / s.samplesPerSec });
        log(`step ${s.step}: ${steps.at(-1)!.ms.toFixed(0)} ms`);
      }
      if (Date.now() - lastLogged > 60_000) {
        lastLogged = Date.now();
        log(`tab ${s?.state}, step ${s?.step}`);
      }
      return (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done';
    }, opts.quick ? 5 * 60_000 : 2 * hour, pollMs);
    const done = (await server.api(`/api/jobs/${job.id}`)).body.job;
    if (done.step !== STEPS) throw new Error(`the job ended at step ${done.step}, not ${STEPS}: ${done.endReason ?? ''}`);
    const { plan, planMs } = seen;
    if (!plan || planMs === null) throw new Error('the tab never showed its memory plan');

    // The checkpoint: from the server, against the job's layout, into a fresh model by nanoGPT's names.
    // startTestServer's researcher token; `api` reads text, a checkpoint is bytes.
    const res = await fetch(`${server.url}/api/jobs/${job.id}/checkpoint`, { headers: { authorization: 'Bearer test-token' } });
    if (res.status !== 200) throw new Error(`GET checkpoint: HTTP ${res.status} ${await res.text()}`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    const { params } = verifyCheckpoint(spec, bytes);
    const model = createModel(presetOf(spec), new CpuBackend(), 99);
    model.store.loadSafetensors(bytes);
    const loaded = await model.store.readFlat();
    const mismatches = loaded.reduce((n, v, i) => n + (Object.is(v, params[i]) ? 0 : 1), 0);
    if (mismatches) throw new Error(`${mismatches} parameters differ after loading the checkpoint by nanoGPT's names`);
    const names = layoutOf(spec).entries.map((t) => t.name);
    log(`checkpoint ${(bytes.byteLength / 2 ** 20).toFixed(0)} MiB verified and loaded under ${names.length} nanoGPT names`);

    const last = steps.at(-1);
    if (last?.step !== STEPS) throw new Error(`the poll saw steps ${steps.map((x) => x.step).join(', ')}, not the last`);
    const report = {
      benchmark: 'gpt2-tab', quick: opts.quick,
      ...runRecord(t0, benchCommand('gpt2-tab', opts)),
      definitions: {
        seconds_to_plan: 'Contribute clicked → the page shows its memory plan (the model built, the data loaded and the planner\'s probe passes run), polled every pollMs',
        step_ms: 'one step\'s local work as the page measured it (the batch ÷ its samples per second at that sync): forward, backward and AdamW, plus for the first step the pipelines it compiles',
      },
      spec, pollMs, adapter: ready?.adapter ?? null, memoryBudgetBytes: ready?.memoryBudgetBytes ?? null, browser: browser.version(),
      parameters: layoutOf(spec).length, plan, planMs, steps,
      checkpoint: { bytes: bytes.byteLength, tensors: names.length, names: names.slice(0, 6) },
      summary: {
        gpt2_small_tab_seconds_to_plan: Math.round(planMs / 100) / 10,
        gpt2_small_tab_step_ms: Math.round(last.ms),
        gpt2_small_tab_plan: plan,
      },
    };
    const out = opts.out ?? join(repoRoot, 'bench', 'results', 'gpt2-tab.json');
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
    log(`wrote ${relative(process.cwd(), out)}: ${JSON.stringify(report.summary)}`);
    await tab.close();
  } finally {
    await browser.close();
    await server.stop();
  }
}
