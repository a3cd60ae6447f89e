// `npm run bench -- <name> [--runs N] [--quick] [--out FILE]`: runs one benchmark, which prints its
// progress and writes bench/results/<name>.json. With no name it lists the benchmarks.
import { parseArgs } from 'node:util';

export interface BenchOptions {
  /** Timed runs per measurement (the JSON reports the median and every run). */
  runs: number;
  /** Fewer runs and steps: a smoke test for CI, not figures to quote. */
  quick: boolean;
  /** Where to write the JSON instead of bench/results/<name>.json. */
  out?: string;
  /** Re-run only these sections of a benchmark that has them, into its existing JSON. */
  only?: string[];
}

interface Benchmark {
  description: string;
  load(): Promise<{ run(opts: BenchOptions): Promise<void> }>;
}

// One line per benchmark; modules load lazily so listing them starts nothing.
const BENCHMARKS: Record<string, Benchmark> = {
  allreduce: { description: 'Ring allreduce busbw between headless Chromium tabs over WebRTC (N = 2, 4, 8; 1–64 MiB; fp32/fp16) vs the raw per-link throughput', load: () => import('./allreduce') },
  convergence: { description: 'Fashion-MNIST MLP with 4 workers per strategy and compression (ddp, localsgd, diloco × none, fp16, dgc), unlimited and 10 Mbit/s links ' +
    '(3 seeds): accuracy, bytes, time to 85%; runs with the settings `tune` chose', load: () => import('./convergence') },
  lm: { description: 'GPT on the fortunes corpus (byte tokens) with 4 in-page workers: DDP, DiLoCo and DiLoCo + DGC against one worker at equal tokens, then raced to ' +
    'a validation-loss target on 10 Mbit/s, 40 ms links (3 seeds)', load: () => import('./lm') },
  'lm-lab': { description: 'a GPT on fortunes by 4 Node volunteers in NATed homes of the network lab behind 10 and 2 Mbit/s uplinks: DDP, DiLoCo + DGC, + int8, ' +
    '+ E2M1 and Streaming DiLoCo + E2M1 against one volunteer at equal tokens (3 seeds), wall clock and bytes to a validation-loss target: writes lm-lab.json',
    load: () => import('./lm-lab') },
  'lm-tune': { description: 'chooses a GPT job\'s DiLoCo outer lr and momentum (dense and DGC), and whether DGC warms up, on a tuning split of the fortunes training records, never the ' +
    'validation split `lm` reports: writes lm-tuning.json', load: () => import('./lm-tune') },
  tune: { description: 'chooses the convergence benchmark\'s hyperparameters on a validation split (last 5,000 training examples), never the test set: writes tuning.json',
    load: () => import('./tune') },
  clip: { description: 'chooses CenteredClip\'s radius factor on the validation split: 16 LocalSGD MLP members under the worst attacks at f = 5, 7 and honestly, 3 ' +
    'honest members beside the plain mean: writes clip.json', load: () => import('./clip') },
  heterogeneous: { description: 'unequal volunteers: 8 LocalSGD workers (Fashion-MNIST MLP, and a GPT on the fortunes corpus) slowed 1, 1, 1, 2, 2, 4, 4, 8× (Dawn in ' +
    'Node), fixed-H vs paced rounds and an all-equal control at equal samples (3 seeds): utilization, time to the validation target, test accuracy, round-time ' +
    'prediction error', load: () => import('./heterogeneous') },
  groups: { description: 'Moshpit groups: 32 LocalSGD MLP workers (Dawn in Node) in one ring vs groups of 8 that change every sync, at equal samples (3 seeds): test ' +
    'accuracy, consensus distance, bytes, and a member leaving mid-sync (only its group re-runs)', load: () => import('./groups') },
  memory: { description: 'activation recompute on WebGPU (Node, Dawn): a GPT\'s peak GPU memory and step time with and without it, and the largest batch a device ' +
    'with WebGPU\'s default limits and a 256 MiB budget holds either way', load: () => import('./memory') },
  'gpt2-tab': { description: 'GPT-2 small (124M parameters, context 1,024, GPT-2 BPE on fortunes) as a volunteer job: the real server and one headless Chromium ' +
    'tab plan it, train 2 steps and upload the checkpoint, which loads under nanoGPT\'s names: time to the plan, ms per step', load: () => import('./gpt2-tab') },
  kernels: { description: 'WebGPU matmul GFLOP/s and MLP/CNN ms/step vs TensorFlow.js (webgpu, webgl, cpu) in headless Chromium', load: () => import('./kernels') },
  coordinator: { description: 'server node under simulated volunteers (separate client processes): count held, round-barrier p50/p99, KiB per connection', load: () => import('./coordinator') },
  byzantine: { description: 'Byzantine-robust averaging: 16 LocalSGD workers of the Fashion-MNIST MLP (CPU backend), f = 0, 1, 3, 5, 7 attackers × 8 attacks × 4 ' +
    'rules short, the clean run and the worst attacks at f = 5, 7 at full length (3 seeds), and the honest case\'s bytes and time against ring allreduce', load: () => import('./byzantine') },
  simulate: { description: 'discrete-event simulation of one job\'s round clock (the real coordinator, injected clock) at N = 16, 256, 1,024, 10,000 with 0/5/20% ' +
    'churn per 10 min: sync time p50/p99, utilization, server CPU per sync (also `npm run simulate`): writes scale.json', load: () => import('./simulate') },
  internet: { description: 'the collective on real links in the network lab (Node WebRTC in homes behind NAT routers, coturn, 10 Mbit/s uplinks): link setup p50/p99 per ' +
    'NAT kind, ring busbw direct vs relayed, robust group averaging vs the ring mean, hierarchical vs flat, the auto-tuner, DiLoCo + DGC vs DDP to a GPT ' +
    'target (4 Node volunteers), wall clock: writes internet.json', load: () => import('./internet') },
  soak: { description: 'round clock under churn (5%, 20%, 50% of volunteers leaving or joining per round, 1,000 syncs each) with a server SIGKILL and restart ' +
    'mid-run: lost and duplicated syncs, checksum agreement, metric rows, server RSS; with the fuzz run\'s cases per decoder', load: () => import('./soak') },
};

const USAGE = `usage: npm run bench -- <name> [--runs N] [--quick] [--out FILE] [--only A,B]
  --runs N     timed runs per measurement, median reported (default 5; --quick: 2)
  --quick      fewer runs and steps (CI smoke test; figures not for quoting)
  --out FILE   write the JSON here instead of bench/results/<name>.json
  --only A,B   re-run only these sections into the existing JSON (byzantine: robust, overhead, verification; lm-lab: mbit10, mbit2; lm-tune: warmup)`;

function listBenchmarks(): string {
  const width = Math.max(...Object.keys(BENCHMARKS).map((n) => n.length));
  return Object.entries(BENCHMARKS).map(([n, b]) => `  ${n.padEnd(width)}  ${b.description}`).join('\n');
}

function fail(message: string): never {
  console.error(`bench: ${message}`);
  process.exit(1);
}

async function main(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: { runs: { type: 'string' }, quick: { type: 'boolean', default: false }, out: { type: 'string' }, only: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (e) {
    fail(`${(e as Error).message}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    console.log(`${USAGE}\n\nbenchmarks:\n${listBenchmarks()}`);
    return;
  }
  if (positionals.length > 1) fail(`one benchmark at a time, got: ${positionals.join(' ')}\n${USAGE}`);
  const name = positionals[0];
  const bench = Object.hasOwn(BENCHMARKS, name) ? BENCHMARKS[name] : undefined;
  if (!bench) fail(`unknown benchmark "${name}"; available:\n${listBenchmarks()}`);
  const runs = values.runs === undefined ? (values.quick ? 2 : 5) : Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) fail(`--runs must be a positive integer, got "${values.runs}"`);
  const mod = await bench.load();
  await mod.run({ runs, quick: values.quick ?? false, out: values.out, only: values.only?.split(',').map((x) => x.trim()).filter(Boolean) });
}

await main(process.argv.slice(2));
