// What the job page shows of an untrusted Moshpit job's checks, from its worker rows: the groups of
// the latest sync (each member's group at the last sync it committed with) and the faults (who the
// server removed, how often, and the last reason). Pure, so it is tested without a page.
import type { WorkerRow } from '@tabfleet/protocol';

export interface SyncGroups {
  seq: number;
  /** Groups the server drew for that sync. */
  of: number;
  /** The groups that committed, by index: their members' ids and names. */
  groups: { index: number; members: { volunteerId: string; contributor: string }[] }[];
  /** Members now in the job that were in none of those groups (their group failed, they sat out or joined later). */
  outside: { volunteerId: string; contributor: string }[];
}

/** The latest sync any member committed in a group; null for jobs without Moshpit groups (or before their first sync). */
export function latestGroups(workers: readonly WorkerRow[]): SyncGroups | null {
  const grouped = workers.filter((w) => w.group !== null);
  if (!grouped.length) return null;
  const seq = Math.max(...grouped.map((w) => w.group!.seq));
  const at = grouped.filter((w) => w.group!.seq === seq);
  const byIndex = new Map<number, { volunteerId: string; contributor: string }[]>();
  for (const w of at) byIndex.set(w.group!.index, [...(byIndex.get(w.group!.index) ?? []), { volunteerId: w.volunteerId, contributor: w.contributor }]);
  const groups = [...byIndex].sort(([a], [b]) => a - b).map(([index, members]) => ({ index, members }));
  const outside = workers.filter((w) => w.state !== 'left' && !at.includes(w)).map((w) => ({ volunteerId: w.volunteerId, contributor: w.contributor }));
  return { seq, of: at[0].group!.of, groups, outside };
}

export interface FaultRow {
  volunteerId: string;
  contributor: string;
  faults: number;
  lastFault: string | null;
  /** Still a member (it came back after its keep-out), or gone: why it left. */
  member: boolean;
  leftReason: string | null;
}

/** Every worker with a fault on record in this job, most faults first. */
export function faultRows(workers: readonly WorkerRow[]): FaultRow[] {
  return workers.filter((w) => (w.faults ?? 0) > 0).sort((a, b) => b.faults! - a.faults!).map((w) => ({
    volunteerId: w.volunteerId, contributor: w.contributor, faults: w.faults!, lastFault: w.lastFault, member: w.state !== 'left', leftReason: w.leftReason,
  }));
}
