// Several members evaluate a sync's global model; no single one decides. Each report carries the
// checksum of the model it evaluated: the checksum a majority of the designated evaluators reported
// is the sync's agreed checksum (what a checkpoint of the sync must hold), and only reports of that
// model count, combined by their lower median (one member reporting high cannot raise it unless
// most of the others do).
export interface EvaluationReport {
  checksum: string;
  accuracy: number | null;
  loss: number | null;
}

export type EvaluationOutcome =
  | { agreed: true; checksum: string; accuracy: number | null; loss: number | null; vouchers: number; outvoted: string[] }
  | { agreed: false; reason: string };

/** The checksum held by more than half of `designated` evaluators, if any. */
export function majorityChecksum(reports: ReadonlyMap<string, EvaluationReport>, designated: number): string | null {
  const counts = new Map<string, number>();
  for (const r of reports.values()) counts.set(r.checksum, (counts.get(r.checksum) ?? 0) + 1);
  for (const [checksum, n] of counts) if (n * 2 > designated) return checksum;
  return null;
}

export function combineEvaluations(reports: ReadonlyMap<string, EvaluationReport>, designated: number): EvaluationOutcome {
  const checksum = majorityChecksum(reports, designated);
  if (!checksum) {
    const seen = [...reports].map(([id, r]) => `${id} ${r.checksum}`).join(', ') || 'none';
    return { agreed: false, reason: `no checksum held by a majority of ${designated} evaluators (reports: ${seen})` };
  }
  const agreeing = [...reports.values()].filter((r) => r.checksum === checksum);
  const outvoted = [...reports].filter(([, r]) => r.checksum !== checksum).map(([id]) => id);
  return { agreed: true, checksum, accuracy: lowerMedian(agreeing.map((r) => r.accuracy)), loss: upperMedian(agreeing.map((r) => r.loss)), vouchers: agreeing.length, outvoted };
}

/** The lower median of the non-null values (null when there are none). */
function lowerMedian(xs: (number | null)[]): number | null {
  const v = xs.filter((x): x is number => x !== null).sort((a, b) => a - b);
  return v.length ? v[(v.length - 1) >> 1] : null;
}

/** The upper median: for a loss, the conservative side is the higher one. */
function upperMedian(xs: (number | null)[]): number | null {
  const v = xs.filter((x): x is number => x !== null).sort((a, b) => a - b);
  return v.length ? v[v.length >> 1] : null;
}
