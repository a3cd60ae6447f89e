// Star rounds (through the server): the check every update passes on arrival (a whole f32 vector of
// the round's length, every value finite), and the result the server sends back. Screening by norm and
// the aggregation rules are protocol's robust.ts, the same as a group's owners use.
import { aggregateWith, cappedWeights, ProtocolError, screenContributions, syncVectorLength, type JobSpec } from '@tabfleet/protocol';
import type { JobRecord } from '../store/store';
import type { ActiveRound } from './round';
import type { CoordinatorDeps } from './types';

/** Reads little-endian f32 bytes; throws `bad_tensor` on a length that is not a whole, matching vector. */
export function decodeUpdate(bytes: Uint8Array, expectedLength: number | null): Float32Array {
  if (bytes.byteLength === 0 || bytes.byteLength % 4 !== 0) throw new ProtocolError('bad_tensor', `update is ${bytes.byteLength} bytes: not a non-empty f32 vector`);
  const length = bytes.byteLength / 4;
  if (expectedLength !== null && length !== expectedLength) throw new ProtocolError('bad_tensor', `update has ${length} values, the round's vectors have ${expectedLength}`);
  const copy = new Float32Array(length);
  new Uint8Array(copy.buffer).set(bytes);
  for (let i = 0; i < length; i++) {
    if (!Number.isFinite(copy[i])) throw new ProtocolError('bad_tensor', `update value ${i} is ${copy[i]}: not finite`);
  }
  return copy;
}

/**
 * The star round's result from the updates of `senders` (in the round's member order, so the result
 * does not depend on who sent first): screened, then combined by the job's rule; paced rounds weigh
 * them by samples (capped at the median weight in untrusted jobs), as the ring and the group weigh them.
 */
export function starResult(spec: JobSpec, senders: string[], updates: Float32Array[], steps: Record<string, number> | null) {
  const { accepted, refused } = screenContributions(updates, updates[0].length);
  const stepsOf = steps && senders.map((id) => steps[id]);
  const weights = stepsOf && (spec.trust === 'untrusted' ? cappedWeights(stepsOf) : stepsOf);
  const result = aggregateWith(spec.aggregation, accepted.map((i) => updates[i]), { trimFraction: spec.trimFraction, ...(weights ? { weights: accepted.map((i) => weights[i]) } : {}) });
  return { result, accepted: accepted.length, refused: refused.map((x) => ({ sender: senders[x.index], reason: x.reason })) };
}

/** A member's update in star round `r`; once every member's is in, the result goes to all of them. */
export function starUpdate(r: ActiveRound, from: string, data: Uint8Array, job: JobRecord, deps: CoordinatorDeps): object {
  if (r.mode !== 'star') throw new ProtocolError('conflict', `round ${r.roundId} is a ring round`);
  if (r.starUpdates.has(from)) throw new ProtocolError('conflict', 'update already received for this round');
  // Streaming DiLoCo: the fragment of this sync, by the syncs committed before it (fixed rounds of H steps).
  r.starUpdates.set(from, decodeUpdate(data, syncVectorLength(job.spec, r.step / job.spec.H - 1)));
  if (r.starUpdates.size < r.members.length) return {};
  const senders = r.members.filter((id) => r.starUpdates.has(id));
  const { result, accepted, refused } = starResult(job.spec, senders, senders.map((id) => r.starUpdates.get(id)!), r.steps);
  for (const x of refused) {
    deps.count('updates_rejected', { reason: 'norm' });
    deps.log(`job ${job.id}: round ${r.roundId}: refused the star update of ${x.sender}: ${x.reason}`);
  }
  r.starSent = true;
  deps.toVolunteer(r.members, 'star:result', { jobId: job.id, roundId: r.roundId, data: new Uint8Array(result.buffer), contributors: accepted, rejected: refused.length });
  return {};
}
