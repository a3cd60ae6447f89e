// lamb_apply — LAMB's last pass: w −= lr · r_s · u over each parameter tensor s, with the trust ratio
// r_s = ‖w_s‖ / ‖u_s‖ from lamb_norms (1 when either norm is 0, as NVIDIA's apex FusedLAMB does).
// Padding between tensors is in no segment and stays as it is. Bindings: 0 uniform Params, 1 w, 2 u,
// 3 segments (i32 pairs offset, size), 4 norms. Dispatch (X, S): invocation x of tensor gid.y loops
// over its elements with stride X·WG.
struct Params { lr: f32, stride: u32, pad0: u32, pad1: u32 }

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read> u: array<f32>;
@group(0) @binding(3) var<storage, read> segments: array<i32>;
@group(0) @binding(4) var<storage, read> norms: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let s = gid.y;
  let offset = u32(segments[2u * s]);
  let size = u32(segments[2u * s + 1u]);
  let wn = norms[2u * s];
  let un = norms[2u * s + 1u];
  var ratio = 1.0;
  if (wn > 0.0 && un > 0.0) { ratio = wn / un; }
  let step = p.lr * ratio;
  for (var k = gid.x; k < size; k += p.stride) {
    w[offset + k] = w[offset + k] - step * u[offset + k];
  }
}
