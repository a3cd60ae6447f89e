// Moshpit averaging (Ryabinin et al., "Moshpit SGD", NeurIPS 2021): members sit at the points of a
// grid whose sides are at most the group size; round r averages inside the groups of members that
// share every coordinate but axis r mod d. Why it mixes: averaging along one axis makes every line
// along that axis constant, and averaging along the next axis then averages those constants, so
// after d rounds (one per axis) with a full grid every member holds the global average exactly,
// with groups of `size` and d = ⌈log_size N⌉ (N = 10,000 in groups of 16: 4 rounds). Members are
// placed at random grid points (a fresh draw every d rounds, an "epoch"), so an unfilled grid and
// local steps between rounds still mix across the job. Shared here so the in-process runner, the
// simulator and the server form groups alike.
import { mulberry32 } from './random';

/** Sides of the grid for n members in groups of at most `size`: size, size, …, the rest. */
export function moshpitGrid(n: number, size: number): number[] {
  if (!(Number.isInteger(size) && size >= 2)) throw new Error(`group size ${size}: need an integer of at least 2`);
  const dims: number[] = [];
  let rest = Math.max(1, n);
  while (rest > size) {
    dims.push(size);
    rest = Math.ceil(rest / size);
  }
  dims.push(rest);
  return dims;
}

/**
 * The groups of round `round` (0-based) for `members` in groups of at most `size`: members of a
 * group share every grid coordinate but the round's axis. Deterministic in (members, round, size,
 * seed, localityOf), so every party that knows them computes the same groups.
 *
 * With `localityOf` (regional groups: a region or network hint per member), members are laid on the
 * grid in order of their hint, axis 0 varying fastest, each hint starting a fresh run of `size`
 * cells (the grid grows by the empty cells this leaves): every group along axis 0 stays inside one
 * region, and a group along axis k spans a run of Π_{j≤k} sides of that order, so the higher axes
 * cross regions (a hierarchical allreduce: average near, then far). Mixing is the grid's as before
 * (a full grid still agrees in d rounds); which members of a region share a group changes every d
 * rounds (a fresh shuffle inside each region).
 */
export function moshpitGroups<T>(members: readonly T[], round: number, size: number, seed = 1, localityOf?: (m: T) => string | undefined): T[][] {
  const hint = localityOf && members.map((m) => localityOf(m) ?? '');
  const dims = moshpitGrid(hint ? regionalCells(hint, size) : members.length, size);
  const d = dims.length;
  const cells = dims.reduce((a, b) => a * b, 1);
  // A fresh placement every d rounds: a seeded shuffle of the grid's cells, the first n taken
  // (regional: of the members, then stably sorted by their hint, onto the cells in order).
  const rand = mulberry32((seed * 0x9e3779b1 + Math.floor(round / d)) >>> 0);
  const shuffle = (xs: number[]) => {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [xs[i], xs[j]] = [xs[j], xs[i]];
    }
    return xs;
  };
  let order: number[];
  if (hint) {
    const byHint = shuffle(members.map((_, i) => i)).sort((a, b) => (hint[a] < hint[b] ? -1 : hint[a] > hint[b] ? 1 : 0));
    order = new Array<number>(members.length);
    let cell = 0;
    byHint.forEach((member, i) => {
      if (i > 0 && hint[member] !== hint[byHint[i - 1]] && cell % size) cell += size - (cell % size);
      order[member] = cell++;
    });
  } else {
    order = shuffle(Array.from({ length: cells }, (_, i) => i));
  }
  const axis = round % d;
  const groups = new Map<number, T[]>();
  members.forEach((m, i) => {
    // The cell's coordinates with the round's axis zeroed: the group key.
    let cell = order[i], key = 0, stride = 1;
    for (let k = 0; k < d; k++) {
      const c = cell % dims[k];
      cell = Math.floor(cell / dims[k]);
      if (k !== axis) key += c * stride;
      stride *= dims[k];
    }
    const g = groups.get(key);
    if (g) g.push(m);
    else groups.set(key, [m]);
  });
  return [...groups.values()];
}

/** Cells a regional layout uses: each hint's members from a multiple of `size` on. */
function regionalCells(hints: readonly string[], size: number): number {
  const counts = new Map<string, number>();
  for (const h of hints) counts.set(h, (counts.get(h) ?? 0) + 1);
  const sorted = [...counts.keys()].sort();
  return sorted.reduce((cells, h, i) => cells + (i < sorted.length - 1 ? Math.ceil(counts.get(h)! / size) * size : counts.get(h)!), 0);
}

/**
 * Hierarchical Moshpit groups: members that share a household key (one address: tabs of one browser,
 * machines behind one NAT or on one LAN) sit at one grid point together, so they are always in the
 * same group, next to each other in its ring. A ring's traffic then crosses the household's uplink
 * once, on the link from its last member to the next household, however many of its tabs take part:
 * a household of m tabs moves what one member does over the WAN per sync, instead of m members' in m
 * different groups. Members without a key are households of one; a household larger than `size` is
 * split into grid points of at most `size`. The order (households by their first member in
 * `members`, members in their order) is deterministic like `moshpitGroups`.
 */
export function moshpitHouseholdGroups<T>(members: readonly T[], householdOf: (m: T) => string | undefined, round: number, size: number, seed = 1, localityOf?: (m: T) => string | undefined): T[][] {
  const points: T[][] = [];
  const open = new Map<string, T[]>();
  for (const m of members) {
    const key = householdOf(m);
    let point = key === undefined ? undefined : open.get(key);
    if (!point || point.length >= size) {
      point = [];
      points.push(point);
      if (key !== undefined) open.set(key, point);
    }
    point.push(m);
  }
  return moshpitGroups(points, round, size, seed, localityOf && ((point) => localityOf(point[0]))).map((g) => g.flat());
}
