// Redundant recompute (BOINC's answer to faulty hardware and lazy or lying workers): the server now
// and then gives a second member the same work unit as a member of a LocalSGD or DiLoCo job (same
// starting model, same batches, same seed) and compares what the two computed; a disagreement goes
// to a third member and the odd one out loses reputation. Both tabs may run different GPUs, so the
// comparison is within a tolerance measured between honest adapters, not bit for bit.

/** A work unit anyone in the job can recompute. */
export interface ReplicaUnit {
  unitId: string;
  /** The committed sync whose model the unit starts from. */
  seq: number;
  /** Whose data: the shard of the member that trains the unit as its own work. */
  shard: { index: number; count: number };
  /** `steps` optimizer steps with a fresh inner optimizer, on batches of the shard drawn by this seed. */
  batchSeed: number;
  steps: number;
}

/** What the server asks of a member: train the unit as this round's own work, or recompute another's. */
export interface ReplicaTask {
  jobId: string;
  unit: ReplicaUnit;
  role: 'original' | 'replica';
  /** Where a replica downloads the unit's shard (with a ticket), when the server serves the dataset. */
  dataUrl?: string;
}

/**
 * Two honest computations of one unit agree when their deltas (start − end parameters) point the same
 * way and have about the same length. Measured between the CPU backend and SwiftShader WebGPU (two
 * different adapters) on LocalSGD MLP units: see bench/results/byzantine.json, `recompute_tolerance`.
 */
export const REPLICA_TOLERANCE = { minCosine: 0.99, maxNormDifference: 0.05 };

/**
 * Probability per sync that a member on probation has a unit replicated, and anyone else. Not higher:
 * a unit starts from a fresh inner optimizer (a replica cannot know the original's momentum), so the
 * original's sync moves less; at 0.5 for three new tabs the dashboard e2e job ended at 83.68% where it
 * had reached 84% within the same 960 steps without replication.
 */
export const REPLICATION_RATE = { probation: 0.25, trusted: 0.05 };

export interface ReplicaComparison {
  cosine: number;
  /** |‖a‖ − ‖b‖| / max(‖a‖, ‖b‖). */
  normDifference: number;
  agree: boolean;
}

export function compareReplicas(a: Float32Array, b: Float32Array): ReplicaComparison {
  if (a.length !== b.length) return { cosine: NaN, normDifference: NaN, agree: false };
  let dot = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const na = Math.sqrt(aa), nb = Math.sqrt(bb);
  // Two zero deltas agree (nothing trained, identically); one zero and one not do not.
  const cosine = na === 0 && nb === 0 ? 1 : na === 0 || nb === 0 ? 0 : dot / (na * nb);
  const normDifference = na === 0 && nb === 0 ? 0 : Math.abs(na - nb) / Math.max(na, nb);
  const agree = Number.isFinite(cosine) && Number.isFinite(normDifference) && cosine >= REPLICA_TOLERANCE.minCosine && normDifference <= REPLICA_TOLERANCE.maxNormDifference;
  return { cosine, normDifference, agree };
}
