// Streaming DiLoCo's fragments (Douillard et al. 2025): the model's parameters cut into F fragments,
// and each sync carries one of them, in turn. Fragments are strided across the model's blocks (block
// b in fragment b mod F, as the paper strides layers); the tensors outside blocks (embeddings, final
// norms, a small model's layers) go, largest first, to the fragment holding the fewest values so far.
// Members and the server cut fragments by this one rule from the job's layout, so they agree on which
// values a sync's vector holds without sending indices.
import type { ParamLayout } from './layout';

/** One fragment: the flat ranges [start, end) it takes from the model's vector, in order, and their total. */
export interface Fragment {
  ranges: [number, number][];
  length: number;
}

/** Numbered blocks of every model here: a GPT's `transformer.h.N`, the char transformer's `blocks.N`, the MLP's `layers.N`. */
const BLOCK = /^(?:.*\.)?(?:h|blocks|layers)\.(\d+)\./;

/** The other tensors' units: a layer's weight and bias travel together. */
const unitOf = (name: string) => name.replace(/\.(weight|bias)$/, '');

/** Units (blocks, or layers outside them) a model has: the most fragments it can be cut into. */
export function fragmentUnits(layout: ParamLayout): number {
  const units = new Set(layout.entries.map((e) => BLOCK.exec(e.name)?.[1] ?? `:${unitOf(e.name)}`));
  return units.size;
}

/** The model cut into `count` fragments (1: the whole model in one). Throws when a fragment would be empty. */
export function modelFragments(layout: ParamLayout, count: number): Fragment[] {
  if (!Number.isInteger(count) || count < 1) throw new Error(`fragments ${count}: need a positive whole number`);
  const units = fragmentUnits(layout);
  if (count > units) throw new Error(`this model has ${units} blocks and layers to cut: at most ${units} fragments, not ${count}`);
  const owner = new Map<string, number>();
  const load = new Array<number>(count).fill(0);
  for (const e of layout.entries) {
    const block = BLOCK.exec(e.name)?.[1];
    if (block === undefined) continue;
    const f = Number(block) % count;
    owner.set(e.name, f);
    load[f] += e.size;
  }
  const loose = new Map<string, number>();
  for (const e of layout.entries) if (!owner.has(e.name)) loose.set(unitOf(e.name), (loose.get(unitOf(e.name)) ?? 0) + e.size);
  const byLoose = new Map<string, number>();
  for (const [unit, size] of [...loose].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))) {
    const f = load.indexOf(Math.min(...load));
    byLoose.set(unit, f);
    load[f] += size;
  }
  const fragments: Fragment[] = Array.from({ length: count }, () => ({ ranges: [], length: 0 }));
  for (const e of layout.entries) {
    const f = owner.get(e.name) ?? byLoose.get(unitOf(e.name))!;
    fragments[f].ranges.push([e.offset, e.offset + e.size]);
    fragments[f].length += e.size;
  }
  const empty = fragments.findIndex((f) => f.length === 0);
  if (empty >= 0) throw new Error(`fragment ${empty} of ${count} would hold no parameters: use fewer fragments`);
  return fragments;
}

/** Which fragment the sync after `syncsBefore` committed syncs carries (every member's and the server's count). */
export const fragmentOfSync = (syncsBefore: number, count: number): number => syncsBefore % count;

/** The fragment's values of a model-length vector, as one contiguous vector. */
export function gatherFragment(vector: Float32Array, fragment: Fragment): Float32Array {
  const out = new Float32Array(fragment.length);
  let at = 0;
  for (const [start, end] of fragment.ranges) {
    out.set(vector.subarray(start, end), at);
    at += end - start;
  }
  return out;
}

/** Writes a fragment's values (as `gatherFragment` gives them) back into a model-length vector. */
export function scatterFragment(target: Float32Array, fragment: Fragment, values: Float32Array): void {
  if (values.length !== fragment.length) throw new Error(`fragment has ${fragment.length} values, not ${values.length}`);
  let at = 0;
  for (const [start, end] of fragment.ranges) {
    target.set(values.subarray(at, at + end - start), start);
    at += end - start;
  }
}
