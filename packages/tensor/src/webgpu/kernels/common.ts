// Helpers shared by the kernel wrappers: uniform packing and 1-D grids that stay under the
// 65,535-workgroups-per-dimension limit.

export type UniformField = ['u32' | 'i32' | 'f32', number];

/** Packs fields in order, 4 bytes each (WGSL scalars and vec4u members, caller pads to 16). */
export function packUniforms(fields: UniformField[]): ArrayBuffer {
  const buf = new ArrayBuffer(Math.max(16, Math.ceil((fields.length * 4) / 16) * 16));
  const view = new DataView(buf);
  fields.forEach(([type, v], i) => {
    if (type === 'f32') view.setFloat32(i * 4, v, true);
    else if (type === 'i32') view.setInt32(i * 4, v, true);
    else view.setUint32(i * 4, v, true);
  });
  return buf;
}

export const u = (v: number): UniformField => ['u32', v];
export const f = (v: number): UniformField => ['f32', v];

const MAX_GROUPS = 65535;

/** Grid for n elements: invocation (x, y) handles element y·rowStride + x. */
export function grid1d(n: number, wg: number): { workgroups: [number, number]; rowStride: number } {
  const groupsX = Math.max(1, Math.min(Math.ceil(n / wg), MAX_GROUPS));
  const rowStride = groupsX * wg;
  return { workgroups: [groupsX, Math.max(1, Math.ceil(n / rowStride))], rowStride };
}
