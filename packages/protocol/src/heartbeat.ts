// How often a volunteer reports its status (the worker table's heartbeat). Each server node holds its
// volunteers' heartbeats to a budget: every HEARTBEAT_MIN_MS while the node has few of them, the
// period doubled for each doubling of the node's volunteers past the budget, so ten thousand tabs
// do not spend most of a core on status reports (at 7,500 they were 43% of the node's events). The
// worker table of a large job is then that much older; rounds, results and departures are not.

/** The fastest heartbeat (ms): what a node of few volunteers asks for. */
export const HEARTBEAT_MIN_MS = 2_000;
/** The slowest (ms): the worker table still hears from every tab about once a minute. */
export const HEARTBEAT_MAX_MS = 64_000;
/** Heartbeats a second a server node budgets for all its volunteers together. */
export const HEARTBEATS_PER_SEC = 1_000;

/** The heartbeat period (ms) for a node holding `volunteers`: HEARTBEAT_MIN_MS doubled until they fit `perSecond`, at most HEARTBEAT_MAX_MS. */
export function heartbeatPeriodMs(volunteers: number, perSecond = HEARTBEATS_PER_SEC): number {
  if (!(perSecond > 0)) throw new Error(`a heartbeat budget of ${perSecond} a second`);
  let ms = HEARTBEAT_MIN_MS;
  while (ms < HEARTBEAT_MAX_MS && (volunteers * 1000) / ms > perSecond) ms *= 2;
  return ms;
}
