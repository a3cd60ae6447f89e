// Which dashboard rooms (a job's, or the list of all jobs) have a dashboard in them, on any node. A
// coordinator sends its worker table (every member's row, at most every 500 ms) only while its job is
// watched, and with several nodes an emit to dashboards is published to every node through Redis; the
// dashboard may be connected to another node than the job's coordinator. Each node announces the
// rooms its own dashboards are in, at once when they change and every ANNOUNCE_MS, and counts another
// node's announcement for TTL_MS (so a node that starts later learns them, and one that went away
// stops counting). Before, a node with Redis assumed every job watched: in the two-node coordinator
// bench each job built and published its 100-row table twice a second with no dashboard anywhere.
import type { Clock } from '../coordinator/types';
import type { Cluster } from './cluster';

export const ANNOUNCE_MS = 2_000;
export const TTL_MS = 3 * ANNOUNCE_MS;

export class DashboardWatch {
  private readonly remote = new Map<string, { rooms: Set<string>; until: number }>();
  private cancel: (() => void) | null = null;
  private announcing = false;

  /** `local()`: the rooms dashboards on this node are in now. */
  constructor(
    private readonly cluster: Cluster,
    private readonly clock: Clock,
    private readonly local: () => Set<string>,
    private readonly log: (line: string) => void,
  ) {
    cluster.onBroadcast((m) => {
      if (m.kind !== 'watching' || m.nodeId === cluster.nodeId) return;
      this.remote.set(m.nodeId, { rooms: new Set(m.rooms), until: this.clock.now() + TTL_MS });
    });
  }

  start(): void {
    const loop = () => {
      this.cancel = this.clock.after(ANNOUNCE_MS, () => {
        this.announce();
        if (this.cancel) loop();
      });
    };
    this.announce();
    loop();
  }

  /** A dashboard room here was created or emptied: the other nodes hear of it now. */
  changed(): void {
    // Several rooms change in one tick when a dashboard subscribes or leaves: one announcement.
    if (this.announcing) return;
    this.announcing = true;
    queueMicrotask(() => {
      this.announcing = false;
      this.announce();
    });
  }

  /** Some dashboard, on this node or another, is in `room`. */
  watched(room: string): boolean {
    if (this.local().has(room)) return true;
    const now = this.clock.now();
    for (const [node, w] of this.remote) {
      if (w.until < now) this.remote.delete(node);
      else if (w.rooms.has(room)) return true;
    }
    return false;
  }

  stop(): void {
    this.cancel?.();
    this.cancel = null;
  }

  private announce(): void {
    this.cluster.broadcast({ kind: 'watching', nodeId: this.cluster.nodeId, rooms: [...this.local()] }).catch((e) => this.log(`dashboard watch announcement failed: ${(e as Error).message}`));
  }
}
