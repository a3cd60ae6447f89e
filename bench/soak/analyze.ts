// What one churn run of the soak left behind, checked: the server's rounds table split at the
// restarts into epochs (one per server process), the commits and loads the simulated volunteers saw,
// and the job's metric rows. Pure functions, so a test can hand them a table with a known fault.

/** A row of GET /api/jobs/:id/rounds (the fields read here). */
export interface RoundRow {
  roundId: number;
  seq: number;
  outcome: string;
  startedAt: number;
  /** ring, group (through the collective) or star (through the server). */
  mode?: string;
  /** The members' agreed checksum when it committed (or "checksum mismatch: …"). */
  detail: string;
}

/** A server kill: when (epoch ms, same clock as the server's) and the sync its successor resumed from. */
export interface Restart {
  killedAt: number;
  resumedSeq: number;
}

/** A volunteer applied a committed round: the checksum of the parameters it now holds. */
export interface CommitSeen {
  epoch: number;
  roundId: number;
  seq: number;
  checksum: string;
}

/** A volunteer loaded the model of a sync from a checkpoint: the checksum of what it loaded. */
export interface LoadSeen {
  epoch: number;
  seq: number;
  checksum: string;
}

/** A metric row: a sync's (bytesSent set) or an evaluation's (bytesSent null). */
export interface MetricRow {
  seq: number;
  bytesSent: number | null;
}

export interface EpochReport {
  epoch: number;
  /** The first sync this epoch had to commit (1, or the resumed sync + 1). */
  firstSeq: number;
  /** The last sync of the unbroken chain it committed. */
  lastSeq: number;
  committedRounds: number;
  abortedRounds: number;
}

export interface SoakAnalysis {
  epochs: EpochReport[];
  committedRounds: number;
  abortedRounds: number;
  /** The last sync of the job's history: syncs 1..finalSeq each committed once in the history. */
  finalSeq: number;
  /** Syncs committed before a kill and after the checkpoint the next process resumed from: the restart discarded them. */
  rolledBack: number;
  /**
   * Of those, the syncs the next process committed again (each once, however many times): re-done by
   * design, counted apart from lost (never committed in the history) and duplicated (twice in one epoch).
   */
  redone: number;
  /** The syncs of the final history (1..finalSeq) by the mode of the round that committed each there. */
  historyByMode: Record<string, number>;
  lost: number;
  duplicated: number;
  /** Committed rounds whose members applied different parameters, or other than the server recorded. */
  checksumDisagreements: number;
  /** Commits a volunteer applied that the rounds table does not hold as committed. */
  commitsUnknownToServer: number;
  /** Volunteers' commit observations compared. */
  commitsSeen: number;
  /** Checkpoint loads whose parameters differ from the sync's committed checksum. */
  loadMismatches: number;
  loadsChecked: number;
  metrics: { syncRows: number; syncMissing: number; syncExtra: number; evalRows: number; evalExtra: number };
}

/** Which epoch a round belongs to: the number of kills before it began. */
export function epochOf(startedAt: number, restarts: readonly Restart[]): number {
  return restarts.filter((r) => r.killedAt <= startedAt).length;
}

export function analyzeSoak(input: {
  rounds: readonly RoundRow[];
  restarts: readonly Restart[];
  commits: readonly CommitSeen[];
  loads: readonly LoadSeen[];
  metrics: readonly MetricRow[];
}): SoakAnalysis {
  const { rounds, restarts } = input;
  const byEpoch = Array.from({ length: restarts.length + 1 }, () => [] as RoundRow[]);
  for (const r of [...rounds].sort((a, b) => a.roundId - b.roundId)) byEpoch[epochOf(r.startedAt, restarts)].push(r);

  const epochs: EpochReport[] = [];
  /** Per epoch, the last commit of each sync it committed. */
  const chains: Map<number, RoundRow>[] = [];
  let lost = 0, duplicated = 0, rolledBack = 0, redone = 0;
  for (let e = 0; e < byEpoch.length; e++) {
    let firstSeq = 1;
    if (e > 0) {
      const previousEnd = epochs[e - 1].lastSeq;
      const resumed = restarts[e - 1].resumedSeq;
      // Resuming past the last commit would skip syncs; resuming before it re-does them (allowed).
      if (resumed > previousEnd) lost += resumed - previousEnd;
      else rolledBack += previousEnd - resumed;
      firstSeq = resumed + 1;
    }
    const chain = new Map<number, RoundRow>();
    let expected = firstSeq;
    const committed = byEpoch[e].filter((r) => r.outcome === 'committed');
    if (e > 0) {
      const resumed = restarts[e - 1].resumedSeq;
      redone += new Set(committed.filter((r) => r.seq > resumed && r.seq <= epochs[e - 1].lastSeq).map((r) => r.seq)).size;
    }
    for (const r of committed) {
      if (r.seq === expected) expected++;
      else if (r.seq < expected) {
        // Committed again with no restart between: every such commit is a duplicate.
        duplicated++;
        expected = r.seq + 1;
      } else {
        lost += r.seq - expected;
        expected = r.seq + 1;
      }
      chain.set(r.seq, r);
    }
    chains.push(chain);
    epochs.push({ epoch: e, firstSeq, lastSeq: expected - 1, committedRounds: committed.length, abortedRounds: byEpoch[e].filter((r) => r.outcome === 'aborted').length });
  }
  const finalSeq = epochs[epochs.length - 1].lastSeq;

  // The commit of sync `seq` as epoch `e` knows it: its own, or (at or before the sync it resumed
  // from) the earlier epoch's.
  const chainRow = (e: number, seq: number): RoundRow | undefined => {
    if (e > 0 && seq <= restarts[e - 1].resumedSeq) return chainRow(e - 1, seq);
    return chains[e]?.get(seq);
  };
  const historyByMode: Record<string, number> = {};
  for (let s = 1; s <= finalSeq; s++) {
    const mode = chainRow(epochs.length - 1, s)?.mode ?? 'unknown';
    historyByMode[mode] = (historyByMode[mode] ?? 0) + 1;
  }

  const committedRounds = new Map<string, RoundRow>();
  for (let e = 0; e < byEpoch.length; e++) for (const r of byEpoch[e]) if (r.outcome === 'committed') committedRounds.set(`${e}/${r.roundId}`, r);
  const seenByRound = new Map<string, Set<string>>();
  let commitsUnknownToServer = 0;
  for (const c of input.commits) {
    const key = `${c.epoch}/${c.roundId}`;
    const row = committedRounds.get(key);
    if (!row || row.seq !== c.seq) {
      commitsUnknownToServer++;
      continue;
    }
    const set = seenByRound.get(key) ?? new Set<string>([row.detail]);
    set.add(c.checksum);
    seenByRound.set(key, set);
  }
  let checksumDisagreements = 0;
  for (const [key, row] of committedRounds) {
    const seen = seenByRound.get(key);
    if ((seen && seen.size > 1) || row.detail.startsWith('checksum mismatch')) checksumDisagreements++;
  }

  let loadMismatches = 0, loadsChecked = 0;
  for (const l of input.loads) {
    if (l.seq === 0) continue; // the seeded initial model: no commit to compare with
    loadsChecked++;
    if (chainRow(l.epoch, l.seq)?.detail !== l.checksum) loadMismatches++;
  }

  const countBySeq = (rows: readonly MetricRow[]) => {
    const m = new Map<number, number>();
    for (const r of rows) m.set(r.seq, (m.get(r.seq) ?? 0) + 1);
    return m;
  };
  const syncs = input.metrics.filter((m) => m.bytesSent !== null);
  const evals = input.metrics.filter((m) => m.bytesSent === null);
  const syncCounts = countBySeq(syncs);
  let syncMissing = 0;
  for (let s = 1; s <= finalSeq; s++) if (!syncCounts.has(s)) syncMissing++;
  let syncExtra = 0;
  for (const [seq, n] of syncCounts) syncExtra += seq < 1 || seq > finalSeq ? n : n - 1;
  let evalExtra = 0;
  for (const [seq, n] of countBySeq(evals)) evalExtra += seq < 1 || seq > finalSeq ? n : n - 1;

  return {
    epochs,
    committedRounds: epochs.reduce((s, e) => s + e.committedRounds, 0),
    abortedRounds: epochs.reduce((s, e) => s + e.abortedRounds, 0),
    finalSeq, rolledBack, redone, historyByMode, lost, duplicated, checksumDisagreements, commitsUnknownToServer, commitsSeen: input.commits.length,
    loadMismatches, loadsChecked,
    metrics: { syncRows: syncs.length, syncMissing, syncExtra, evalRows: evals.length, evalExtra },
  };
}
