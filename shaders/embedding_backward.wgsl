// embedding_backward — dtable[v, d] = Σ_{t: ids[t] = v} dy[t, d], summed in increasing t
// (deterministic, no atomics). Invocation i owns row v = i / chunks and the column range
// [c·CW, min(D, (c + 1)·CW)) with c = i % chunks: it zeroes its range, then scans all T ids once and
// adds the matching rows of dy into dtable (it is the only writer of those elements). The wrapper picks
// chunks so there are enough invocations; cost O(V·chunks·T) id reads + O(T·D) adds.
// dy [T, D], ids i32 [T] → dtable [V, D]. Bindings: 0 uniform Params, 1 dy, 2 ids, 3 dtable.
// Dispatch grid1d(V·chunks, WG).
struct Params { n: u32, rowStride: u32, T: u32, D: u32, chunks: u32, CW: u32, pad0: u32, pad1: u32 }

override WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> ids: array<i32>;
@group(0) @binding(3) var<storage, read_write> dtable: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  let v = i / p.chunks;
  let d0 = (i % p.chunks) * p.CW;
  let d1 = min(p.D, d0 + p.CW);
  let out = v * p.D;
  for (var d = d0; d < d1; d++) { dtable[out + d] = 0.0; }
  for (var t = 0u; t < p.T; t++) {
    if (ids[t] == i32(v)) {
      let row = t * p.D;
      for (var d = d0; d < d1; d++) { dtable[out + d] += dy[row + d]; }
    }
  }
}
