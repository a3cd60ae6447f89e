// The byzantine benchmark's checks of who lies, beside its accuracy matrix: how many rounds a lying
// owner lasts against the validators (bench/owner-lie.ts, real server, simulated members), and how
// often redundant recompute would accuse an honest member: the same work units trained on SwiftShader
// WebGPU and on the CPU reference (standing in for two different GPUs) and compared as the server
// compares replicas, in headless Chromium (e2e/pages/distributed.html).
import type { UnitAgreement } from '@tabfleet/distributed';
import { browserSession, openPage } from '@tabfleet/headless';
import { REPLICA_TOLERANCE } from '@tabfleet/protocol';
import { WORKERS, type JobSettings } from './byzantine-config';
import { measureOwnerLie, type OwnerLieResult } from './owner-lie';

export interface RecomputeReport {
  adapters: [string, string];
  tolerance: typeof REPLICA_TOLERANCE;
  units: number;
  stepsPerUnit: number;
  /** Honest pairs the tolerance refused, over all units (the goal is none). */
  falsePositives: number;
  falsePositiveRate: number;
  worstCosine: number;
  worstNormDifference: number;
  /** A result 1.5× too long, compared with the honest one: refused in every unit? */
  faultyRefused: number;
  perUnit: UnitAgreement[];
}

export interface VerificationReport {
  ownerLie: OwnerLieResult;
  recompute: RecomputeReport;
  wallMs: number;
}

async function measureRecompute(units: number, job: JobSettings, log: (line: string) => void): Promise<RecomputeReport> {
  const session = await browserSession();
  try {
    const tab = await openPage(session.browser, `${session.baseUrl}/e2e/pages/distributed.html`);
    // Several shards and seeds: units move the model on as training does.
    const perShard = Math.ceil(units / 4);
    const results: UnitAgreement[] = [];
    let adapter = '';
    for (let shard = 0; shard < 4 && results.length < units; shard++) {
      const r = await tab.page.evaluate((c) => window.tabfleetDistributed.replicaAgreement(c), {
        units: Math.min(perShard, units - results.length), steps: job.H, batchSize: job.batchSize, optimizer: job.optimizer, shard, shards: WORKERS, seed: 11 + shard,
      });
      adapter = r.adapter;
      results.push(...r.units);
      log(`recompute: ${results.length}/${units} units, ${results.filter((u) => !u.agree).length} honest pairs refused`);
    }
    if (tab.errors.length) throw new Error(`page errors: ${tab.errors.join('\n')}`);
    await tab.close();
    const falsePositives = results.filter((u) => !u.agree).length;
    return {
      adapters: [adapter, 'CPU reference (packages/tensor CpuBackend)'], tolerance: REPLICA_TOLERANCE, units: results.length, stepsPerUnit: job.H,
      falsePositives, falsePositiveRate: falsePositives / results.length,
      worstCosine: Math.min(...results.map((u) => u.cosine)), worstNormDifference: Math.max(...results.map((u) => u.normDifference)),
      faultyRefused: results.filter((u) => !u.faultyAgrees).length, perUnit: results,
    };
  } finally {
    await session.close();
  }
}

export async function measureVerification(quick: boolean, job: JobSettings, log: (line: string) => void): Promise<VerificationReport> {
  const t0 = performance.now();
  const ownerLie = await measureOwnerLie(WORKERS, quick ? 3 : 40, log);
  log(`owner lie: median ${ownerLie.medianRounds} rounds over ${ownerLie.trials} trials (${ownerLie.notCaught} not caught, ${ownerLie.honestRemoved} honest removed)`);
  const recompute = await measureRecompute(quick ? 4 : 48, job, log);
  return { ownerLie, recompute, wallMs: performance.now() - t0 };
}
