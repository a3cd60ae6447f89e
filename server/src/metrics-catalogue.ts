// Every event counter /metrics exports (`tabfleet_<name>_total`): its HELP text and its labels. A name
// the server counts must be here (the type of `count` says so), and each is exported from the start,
// at 0 when it has no labels, so a rate over it needs no first event.

interface CounterSpec {
  help: string;
  labels: readonly string[];
}

export const COUNTERS = {
  rounds_begun: { help: 'Syncs begun, by mode (ring, star, group, grouped = a Moshpit sync of several groups).', labels: ['mode'] },
  rounds_committed: { help: 'Syncs committed, by mode.', labels: ['mode'] },
  rounds_aborted: { help: 'Syncs aborted (nothing applied): a member lost, failed or silent, a check failed, the job ended.', labels: [] },
  groups_committed: { help: 'Groups of Moshpit syncs committed.', labels: [] },
  groups_failed: { help: 'Groups of Moshpit syncs that failed (the rest of their sync went on).', labels: [] },
  groups_rerun: { help: 'Checked groups of Moshpit syncs that ran once more without the liars their checks removed.', labels: [] },
  checksum_mismatches: { help: 'Committed syncs or groups whose members reported different parameter checksums.', labels: [] },
  rounds_validated: { help: 'Group rounds whose parts were checked by validators.', labels: [] },
  validation_disputes: { help: 'Parts where owner and validator disagreed, settled with evidence.', labels: [] },
  accusations_unsettled: { help: 'Group rounds whose accusations recomputation could not settle (the parties sat out).', labels: [] },
  contributions_refused: { help: 'Members whose contributions to a group round the part owners refused.', labels: [] },
  digest_mismatches: { help: 'Group rounds whose members reported digests that do not match.', labels: [] },
  updates_rejected: { help: 'Star-round updates left out of the mean, by reason.', labels: ['reason'] },
  members_evicted: { help: 'Members removed from a job for a fault (a missed deadline, a failed check), on every job of this node.', labels: [] },
  members_left_out: { help: 'Members left out of a sync because they were not ready in time.', labels: [] },
  members_sat_out: { help: 'Members sat out of group rounds after an accusation nobody could settle.', labels: [] },
  unreachable_claims_refuted: { help: 'Claims of unreachable peers that the other members refuted.', labels: [] },
  units_replicated: { help: 'Units of work given to a second member to check the first.', labels: [] },
  replicas_agreed: { help: 'Replicated units whose original and replica agreed.', labels: [] },
  replicas_disagreed: { help: 'Replicated units whose original and replica disagreed.', labels: [] },
  replicas_missing: { help: 'Originals or replicas not uploaded in time (their credit is withheld).', labels: [] },
  replicas_unresolved: { help: 'Replicated units closed without a verdict.', labels: [] },
  checkpoint_store_failures: { help: 'Attempts to store a verified checkpoint that the store refused.', labels: [] },
  checkpoints_lost: { help: 'Checkpoints given up on (upload stalled, refused, unverifiable or not stored).', labels: [] },
  evaluation_disagreements: { help: 'Evaluations whose evaluators did not agree on the sync\'s model.', labels: [] },
  targets_unvouched: { help: 'Target accuracies reached but not vouched for by enough evaluators.', labels: [] },
  targets_not_held: { help: 'Jobs that reached their target accuracy whose last sync measured below it, so training went on.', labels: [] },
  evaluations_unvouched: { help: 'Untrusted jobs\' evaluations without two members with standing behind the majority.', labels: [] },
  evaluation_accuracy_disputes: { help: 'Evaluations whose evaluators of one model disagreed on its accuracy, none believed (no accuracy recorded).', labels: [] },
  events_rejected: { help: 'Socket.IO events refused, by error code.', labels: ['code'] },
  handshakes_rejected: { help: 'Socket.IO connections refused at the handshake, by error code.', labels: ['code'] },
  display_names_refused: { help: 'Volunteer display names refused.', labels: [] },
  http_rate_limited: { help: 'HTTP requests refused by the per-address rate limit.', labels: [] },
  http_misdirected: { help: 'HTTP requests refused for a Host that is not a name of this server.', labels: [] },
} as const satisfies Record<string, CounterSpec>;

export type CounterName = keyof typeof COUNTERS;
export type CounterLabels<N extends CounterName> = Partial<Record<(typeof COUNTERS)[N]['labels'][number], string>>;
/** Counts one event of `name` (labels: those its entry names). */
export type Count = <N extends CounterName>(name: N, labels?: CounterLabels<N>) => void;
