// `npm run bench -- clip`: chooses CenteredClip's radius (protocol's CLIP_RADIUS_FACTOR: τ = factor ×
// the median distance of the contributions from the current centre) on the validation split, never
// the test set. 16 LocalSGD members of the Fashion-MNIST MLP (the byzantine benchmark's job) train a
// few syncs under the attacks the byzantine matrix found worst at f = 5 and 7, and honestly; the
// chosen factor has the highest lowest-validation-accuracy over the attacked runs. A small group
// (3 members, the tests' size) trains longer honestly beside the plain mean, to show what clipping
// honest members costs. Writes bench/results/clip.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Attack } from '@tabfleet/distributed';
import { repoRoot } from '@tabfleet/headless';
import { CLIP_ITERATIONS, CLIP_RADIUS_FACTOR } from '@tabfleet/protocol';
import type { JobSettings } from './byzantine-config';
import { jobSettings } from './byzantine';
import { ChildPool } from './child-pool';
import { benchCommand, runRecord } from './machine';
import type { BenchOptions } from './run';
import { median } from './stats';

export interface ClipRun {
  workers: number;
  attackers: number;
  attack: Attack | null;
  /** Null: the plain mean. */
  radiusFactor: number | null;
  iterations: number;
  seed: number;
  syncs: number;
  job: JobSettings;
}

export interface ClipRunResult {
  validationAccuracy: number;
  validationCount: number;
  wallMs: number;
}

const RADIUS_FACTORS = [1.25, 0.75, 0.5];
/** The attacks the byzantine matrix ranked worst for centered clip at f = 5 and 7 (its worstAttacks, on validation). */
const ATTACKED: { attackers: number; attack: Attack }[] = [
  { attackers: 5, attack: 'sign-flip' }, { attackers: 5, attack: 'ipm' },
  { attackers: 7, attack: 'sign-flip' }, { attackers: 7, attack: 'ipm' }, { attackers: 7, attack: 'label-flip' },
];
const CHILD = fileURLToPath(new URL('./clip-child.ts', import.meta.url));

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'clip.quick.json' : 'clip.json');
  const t0 = Date.now();
  const log = (line: string) => console.log(`[clip] ${((Date.now() - t0) / 1000).toFixed(0)} s ${line}`);
  const syncs = opts.quick ? 1 : 6;
  const small = { workers: 3, syncs: opts.quick ? 2 : 40, seeds: opts.quick ? [1] : [1, 2] };
  // The byzantine benchmark's LocalSGD job (tuning.json's settings; untuned and H = 2 when quick).
  const { job } = jobSettings(opts.quick);
  const base = { iterations: CLIP_ITERATIONS, job };
  // Quick: one attack (the one the full run found worst), a smoke test of the whole path.
  const attacked = opts.quick ? ATTACKED.filter((a) => a.attackers === 7 && a.attack === 'sign-flip') : ATTACKED;
  const runs: ClipRun[] = [
    ...RADIUS_FACTORS.flatMap((radiusFactor) => [{ attackers: 0, attack: null }, ...attacked].map((a) => ({ ...base, ...a, workers: 16, radiusFactor, seed: 1, syncs }))),
    ...[...RADIUS_FACTORS, null].flatMap((radiusFactor) => small.seeds.map((seed) => ({ ...base, workers: small.workers, attackers: 0, attack: null, radiusFactor, seed, syncs: small.syncs }))),
  ];
  const pool = new ChildPool<ClipRun, ClipRunResult>(CHILD, Math.max(1, Math.min(2, os.cpus().length)));
  let done = 0;
  let results: (ClipRun & ClipRunResult)[];
  try {
    results = await Promise.all(runs.map(async (r) => {
      const result = await pool.run(r);
      log(`[${++done}/${runs.length}] ${r.workers} members, f = ${r.attackers} ${r.attack ?? 'honest'}, ${r.radiusFactor === null ? 'mean' : `radius ` +
        `${r.radiusFactor}`}, seed ${r.seed}: validation ${(100 * result.validationAccuracy).toFixed(2)}%`);
      return { ...r, ...result };
    }));
  } finally {
    pool.close();
  }
  const byFactor = RADIUS_FACTORS.map((factor) => {
    const mine = results.filter((r) => r.radiusFactor === factor && r.workers === 16);
    const attacked = mine.filter((r) => r.attack !== null);
    const worst = attacked.reduce((a, b) => (b.validationAccuracy < a.validationAccuracy ? b : a));
    const smallRuns = results.filter((r) => r.radiusFactor === factor && r.workers === small.workers);
    return {
      radiusFactor: factor,
      worstAttackedValidation: worst.validationAccuracy, worstAttack: `f = ${worst.attackers} ${worst.attack}`,
      honestValidation: mine.find((r) => r.attack === null)!.validationAccuracy,
      smallGroupHonestValidation: median(smallRuns.map((r) => r.validationAccuracy)),
    };
  });
  const chosen = byFactor.reduce((a, b) => (b.worstAttackedValidation > a.worstAttackedValidation ? b : a));
  const meanSmall = median(results.filter((r) => r.radiusFactor === null).map((r) => r.validationAccuracy));
  const report = {
    benchmark: 'clip', ...runRecord(t0, benchCommand('clip', opts)), quick: opts.quick, job,
    definitions: {
      runs: `16 LocalSGD members of the MLP for ${syncs} syncs of H = ${job.H} from a common start (seed 1), the last f attacking, combined with CenteredClip from ` +
        `the coordinate-wise median (${CLIP_ITERATIONS} iterations, τ = radiusFactor × the median distance); the rule's math alone, without the group protocol or screening (clip-child.ts)`,
      smallGroup: `${small.workers} honest members for ${small.syncs} syncs, seeds ${small.seeds.join(', ')}, each factor and the plain mean: what clipping honest ` +
        `members costs a small group (median over seeds)`,
      validation: `accuracy on the ${job.validationExamples} held-out training examples (never the test set)`,
      chosen: 'the factor whose lowest validation accuracy over the attacked runs is highest',
    },
    summary: { chosen_radius_factor: chosen.radiusFactor, in_use: CLIP_RADIUS_FACTOR, small_group_mean_validation: meanSmall, byFactor },
    runs: results,
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  log(`wrote ${file}\n${JSON.stringify(report.summary, null, 2)}`);
}
