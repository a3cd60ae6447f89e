// How many rounds a lying owner lasts (the byzantine benchmark's `owner_lie_caught_rounds`): a real
// server, one untrusted job per trial with `members` simulated volunteers (protocol-exact, no model
// math), one of which sends everyone the same wrong aggregate for its part and reports it
// consistently, so only a validator that draws its part can catch it. Counts the group rounds it
// took part in until it was removed, the round it was caught in included.
import { startTestServer, waitFor, type SimVolunteer } from '@tabfleet/server/testing';
import { VALIDATED_PART_SHARE } from '@tabfleet/protocol';
import { median } from './stats';

export interface OwnerLieResult {
  members: number;
  trials: number;
  /** Rounds per trial until the liar was removed. */
  rounds: number[];
  medianRounds: number;
  /** What the draw predicts: 1 / (expected share of parts checked per round). */
  expectedMeanRounds: number;
  meanRounds: number;
  /** Trials in which the liar outlasted the bound (counted at the bound: a lower bound). */
  notCaught: number;
  /** Honest members removed over all trials (goal 0). */
  honestRemoved: number;
}

const MAX_ROUNDS_PER_TRIAL = 60;

export async function measureOwnerLie(members: number, trials: number, log: (line: string) => void): Promise<OwnerLieResult> {
  const server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 20_000, loadTimeoutMs: 20_000 } });
  const rounds: number[] = [];
  let notCaught = 0;
  let honestRemoved = 0;
  try {
    for (let t = 0; t < trials; t++) {
      const job = await server.createJob({ minWorkers: members, maxWorkers: members, H: 1, pacing: 'fixed', targetSteps: 10_000, preset: 'mlp-fashion' });
      const sims: SimVolunteer[] = [];
      for (let i = 0; i < members; i++) sims.push(await server.volunteer(i === 0 ? { ownerLie: (a) => a.map((v) => v + 1), eventsKept: 2000 } : { eventsKept: 2000 }));
      for (const s of sims) await s.request(job.id);
      const liar = sims[0];
      const gone = (s: SimVolunteer) => s.events.some((e) => e.name === 'job:end');
      const roundsWithLiar = async () => {
        const rounds = (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { members: string[]; outcome: string }[];
        return rounds.filter((r) => r.members.includes(liar.volunteerId) && r.outcome !== 'running').length;
      };
      try {
        await waitFor('the liar removed or the bound', async () => gone(liar) || (await roundsWithLiar()) >= MAX_ROUNDS_PER_TRIAL, 120_000, 50);
      } catch (e) {
        log(`owner lie trial ${t + 1}: ${(e as Error).message}`);
      }
      const n = await roundsWithLiar();
      if (!gone(liar)) notCaught++;
      honestRemoved += sims.slice(1).filter(gone).length;
      rounds.push(n);
      log(`owner lie trial ${t + 1}/${trials}: ${gone(liar) ? `removed after ${n} rounds` : `not caught in ${n} rounds`}`);
      await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' });
      for (const s of sims) s.close();
    }
  } finally {
    await server.stop();
  }
  // Every member is new, so on probation: the server checks the uniform draw's k parts and as many of
  // the missed ones on top (validation-draw.ts), 2k of n parts.
  const checkedShare = Math.min(1, (2 * Math.max(1, VALIDATED_PART_SHARE * members)) / members);
  return {
    members, trials, rounds, medianRounds: median(rounds), expectedMeanRounds: 1 / checkedShare,
    meanRounds: rounds.reduce((a, b) => a + b, 0) / rounds.length, notCaught, honestRemoved,
  };
}
