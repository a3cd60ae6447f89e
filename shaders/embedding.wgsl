// embedding — row gather: out[t, d] = table[ids[t], d] (ids outside [0, V) are clamped).
// table [V, D], ids i32 [T] → out [T, D]. Bindings: 0 uniform Params, 1 table, 2 ids, 3 out.
// One invocation per output element; dispatch grid1d(T·D, WG).
struct Params { n: u32, rowStride: u32, V: u32, D: u32 }

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> table: array<f32>;
@group(0) @binding(2) var<storage, read> ids: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.y * p.rowStride + gid.x;
  if (gid.x >= p.rowStride || i >= p.n) { return; }
  let t = i / p.D;
  let d = i % p.D;
  let v = u32(clamp(ids[t], 0, i32(p.V) - 1));
  out[i] = table[v * p.D + d];
}
