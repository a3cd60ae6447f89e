// The groups of an untrusted Moshpit sync (a spec with trust untrusted and `groupSize`): drawn afresh
// every sync from the server's own randomness (node:crypto), never from the job's seed, the sync
// number, a member's id, address or region: whoever rejoins under a fresh id or address is shuffled
// like everyone else and cannot choose whom it averages with. Where networks count (standing.ts), each
// network's members are dealt round the groups (so no network holds more than its share of any group)
// and a network still over half of a group has its surplus sit out the sync (they keep their work).
import { randomInt } from 'node:crypto';
import { shuffled } from './shuffle';

export interface RandomGroups {
  groups: string[][];
  /** Members left out of this sync: their network would have held more than half of their group. */
  leftOut: string[];
}

/**
 * Splits `members` into ⌈n / size⌉ groups whose sizes differ by at most one, at random. With
 * `networkOf`, members are dealt network by network (largest first, ties and order within at random)
 * round the groups from a random start, then any network over half of a group loses its surplus (a
 * group of one network keeps one member).
 */
export function randomGroups(members: readonly string[], size: number, networkOf?: (member: string) => string): RandomGroups {
  const count = Math.max(1, Math.ceil(members.length / size));
  const byNetwork = new Map<string, string[]>();
  for (const id of shuffled(members)) {
    const net = networkOf?.(id) ?? id;
    byNetwork.set(net, [...(byNetwork.get(net) ?? []), id]);
  }
  // Largest networks first, so each is spread over consecutive groups; a random order breaks ties.
  const order = shuffled([...byNetwork.values()]).sort((a, b) => b.length - a.length).flat();
  const slots = shuffled(Array.from({ length: count }, (_, i) => i));
  const start = randomInt(count);
  const dealt: string[][] = Array.from({ length: count }, () => []);
  order.forEach((id, i) => dealt[slots[(start + i) % count]].push(id));
  // A network alone in the job has nobody to outvote (admission.ts keeps its members too).
  if (!networkOf || byNetwork.size === 1) return { groups: dealt.map((g) => shuffled(g)), leftOut: [] };
  const leftOut: string[] = [];
  const groups = dealt.map((g) => {
    const kept = [...g];
    for (;;) {
      const counts = new Map<string, string[]>();
      for (const id of kept) counts.set(networkOf(id), [...(counts.get(networkOf(id)) ?? []), id]);
      // A member alone in its group outvotes nobody (groups of one happen: 3 members in groups of 2).
      const over = kept.length > 1 && [...counts.values()].find((ids) => ids.length * 2 > kept.length);
      if (!over) break;
      const drop = over[over.length - 1];
      kept.splice(kept.indexOf(drop), 1);
      leftOut.push(drop);
    }
    return shuffled(kept);
  });
  return { groups: groups.filter((g) => g.length > 0), leftOut };
}
