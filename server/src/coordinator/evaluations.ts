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
  | { agreed: true; checksum: string; accuracy: number | null; loss: number | null; vouchers: number; outvoted: string[]; accuracyDisputed?: string }
  | { agreed: false; reason: string };

/**
 * How far apart two honest evaluations of one model may lie: each runs the same test set, on GPUs
 * whose float sums differ (a near tie's argmax may flip), so in accuracy, a point.
 */
export const ACCURACY_SPREAD = 0.01;

/** Whether a set of evaluators (by id) may set an accuracy their fellows dispute. */
export type Believed = (ids: readonly string[]) => boolean;

/** The checksum held by more than half of `designated` evaluators, if any. */
export function majorityChecksum(reports: ReadonlyMap<string, EvaluationReport>, designated: number): string | null {
  const counts = new Map<string, number>();
  for (const r of reports.values()) counts.set(r.checksum, (counts.get(r.checksum) ?? 0) + 1);
  for (const [checksum, n] of counts) if (n * 2 > designated) return checksum;
  return null;
}

/**
 * The agreed model and what its evaluators say of it. Reports of that model more than ACCURACY_SPREAD
 * apart in accuracy cannot all be honest: then the accuracy is the lower median of the largest set of
 * reports within the spread of each other that `believed` accepts (default: more than half of the
 * designated evaluators), the lowest such set on a tie, and none (null, `accuracyDisputed` says why)
 * when no set is believed. A lower median alone let two colluding evaluators of three set it.
 */
export function combineEvaluations(reports: ReadonlyMap<string, EvaluationReport>, designated: number, believed?: Believed): EvaluationOutcome {
  const checksum = majorityChecksum(reports, designated);
  if (!checksum) {
    const seen = [...reports].map(([id, r]) => `${id} ${r.checksum}`).join(', ') || 'none';
    return { agreed: false, reason: `no checksum held by a majority of ${designated} evaluators (reports: ${seen})` };
  }
  const agreeing = [...reports].filter(([, r]) => r.checksum === checksum);
  const outvoted = [...reports].filter(([, r]) => r.checksum !== checksum).map(([id]) => id);
  const base = { agreed: true as const, checksum, vouchers: agreeing.length, outvoted };
  const accuracies = agreeing.map(([, r]) => r.accuracy).filter((x): x is number => x !== null);
  if (accuracies.length < 2 || Math.max(...accuracies) - Math.min(...accuracies) <= ACCURACY_SPREAD) {
    return { ...base, accuracy: lowerMedian(agreeing.map(([, r]) => r.accuracy)), loss: upperMedian(agreeing.map(([, r]) => r.loss)) };
  }
  const accepts = believed ?? ((ids) => ids.length * 2 > designated);
  // Every window [a, a + spread] that starts at a report, as the ids and reports inside it, largest first, lowest first on a tie.
  const windows = [...accuracies].sort((a, b) => a - b).map((low) => agreeing.filter(([, r]) => r.accuracy !== null && r.accuracy >= low && r.accuracy <= low + ACCURACY_SPREAD));
  const chosen = windows.filter((w) => accepts(w.map(([id]) => id))).sort((a, b) => b.length - a.length)[0];
  if (!chosen) {
    const said = agreeing.map(([id, r]) => `${id} ${r.accuracy}`).join(', ');
    return { ...base, accuracy: null, loss: null, accuracyDisputed: `its evaluators' accuracies lie more than ${ACCURACY_SPREAD} apart (${said}) and none of them is believed` };
  }
  return { ...base, accuracy: lowerMedian(chosen.map(([, r]) => r.accuracy)), loss: upperMedian(chosen.map(([, r]) => r.loss)) };
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
