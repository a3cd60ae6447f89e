// What the NAT tests ask of a job: a small trusted ring LocalSGD job, and its rounds read back.
import type { JobSpecInput } from '@tabfleet/protocol';
import type { LabServer } from './lab-server';

export const RING_JOB: Partial<JobSpecInput> = {
  preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 2, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
  targetSteps: 100_000, trust: 'trusted',
};

export interface RoundRow {
  roundId: number;
  mode: string;
  outcome: string;
  reason?: string | null;
}

export async function roundsOf(server: LabServer, jobId: string): Promise<RoundRow[]> {
  const r = await server.api(`/api/jobs/${jobId}/rounds`);
  if (r.status !== 200) throw new Error(`rounds of ${jobId}: ${r.status} ${r.text}`);
  return r.body.rounds as RoundRow[];
}

export async function committedRounds(server: LabServer, jobId: string, mode: 'ring' | 'star'): Promise<number> {
  return (await roundsOf(server, jobId)).filter((r) => r.mode === mode && r.outcome === 'committed').length;
}

/** Page lines worth seeing in a test's output: errors and refusals (a failed round shows in the rounds). */
export const tabLog = (line: string) => /error|refused/i.test(line) && console.log(line);
