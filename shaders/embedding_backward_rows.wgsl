// embedding_backward_rows — dtable[v, d] = Σ_{t: ids[t] = v} dy[t, d] for the ids present, from their
// positions grouped by id on the host (packages/tensor groupIds): index = [rows (k distinct ids),
// starts (k + 1), positions (T)]. Invocation (j, d) sums row j's positions in increasing t, the order
// of the CPU reference, so the bits match it; rows no id hits are zeroed beforehand by a fill.
// O(T·D) reads, not O(V·T). dy [T, D], index i32 [2k + 1 + T] → dtable [V, D].
// Bindings: 0 uniform Params, 1 dy, 2 index, 3 dtable. Dispatch grid1d(k·D, WG).
struct Params { n: u32, rowStride: u32, rows: u32, D: u32, V: u32, pad0: u32, pad1: u32, pad2: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> index: array<i32>;
@group(0) @binding(3) var<storage, read_write> dtable: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  let j = i / p.D;
  let d = i % p.D;
  let row = index[j];
  // Ids outside the table contribute nothing, as in the gather (which clamps them) they have no row of their own.
  if (row < 0 || u32(row) >= p.V) { return; }
  let s0 = u32(index[p.rows + j]);
  let s1 = u32(index[p.rows + j + 1u]);
  let positions = 2u * p.rows + 1u;
  var acc = 0.0;
  for (var q = s0; q < s1; q++) {
    acc += dy[u32(index[positions + q]) * p.D + d];
  }
  dtable[u32(row) * p.D + d] = acc;
}
