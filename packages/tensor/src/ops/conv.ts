// conv2d (NCHW, weights [outC, inC, kH, kW]) and max pooling, with gradients.
import type { Activation, Conv2dParams, Pool2dParams } from '../backend';
import { binary } from './elementwise';
import { assertShape } from '../shape';
import { derived, type Tensor } from '../tensor';

export interface Conv2dOptions {
  stride?: number;
  pad?: number;
  /** Fused into the kernel's epilogue where the backend can. */
  activation?: Activation;
}

/** x: [B, inC, H, W], weight: [outC, inC, kH, kW], bias: [outC] → [B, outC, outH, outW]. */
export function conv2d(x: Tensor, weight: Tensor, bias: Tensor | null, opts: Conv2dOptions = {}): Tensor {
  const stride = opts.stride ?? 1, pad = opts.pad ?? 0;
  const [batch, inC, inH, inW] = x.shape;
  const [outC, , kH, kW] = weight.shape;
  assertShape('conv2d input', x.shape, [batch, inC, inH, inW]);
  assertShape('conv2d weight', weight.shape, [outC, inC, kH, kW]);
  if (bias) assertShape('conv2d bias', bias.shape, [outC]);
  const outH = Math.floor((inH + 2 * pad - kH) / stride) + 1;
  const outW = Math.floor((inW + 2 * pad - kW) / stride) + 1;
  if (outH < 1 || outW < 1) throw new Error(`conv2d: kernel ${kH}×${kW} does not fit input ${inH}×${inW} with pad ${pad}`);
  const activation = opts.activation ?? 'none';
  const p: Conv2dParams = { batch, inC, inH, inW, outC, kH, kW, stride, pad, outH, outW, activation };
  const be = x.backend;
  const inputs = bias ? [x, weight, bias] : [x, weight];
  const y: Tensor = derived(be, be.conv2d(x.storage, weight.storage, bias?.storage ?? null, p), [batch, outC, outH, outW], inputs, `conv2d_${activation}`, (dyOut) => {
    const dy = activation === 'relu' ? binary('reluGrad', dyOut, y) : dyOut;
    const grads = [
      () => derived(be, be.conv2dBackwardInput(dy.storage, weight.storage, p), x.shape, [], 'conv2d_dx', () => []),
      () => derived(be, be.conv2dBackwardFilter(dy.storage, x.storage, p), weight.shape, [], 'conv2d_dw', () => []),
    ];
    if (!bias) return grads;
    return [...grads, () => {
      const perChannel = be.reduce('sum', dy.storage, batch * outC, outH * outW, 1);
      const db = be.reduce('sum', perChannel, 1, batch, outC);
      be.release(perChannel);
      return derived(be, db, [outC], [], 'conv2d_db', () => []);
    }];
  });
  return y;
}

/** x: [B, C, H, W] → [B, C, ⌊(H − k)/stride⌋ + 1, ⌊(W − k)/stride⌋ + 1]. */
export function maxPool2d(x: Tensor, k: number, stride = k): Tensor {
  const [batch, channels, inH, inW] = x.shape;
  assertShape('maxPool2d input', x.shape, [batch, channels, inH, inW]);
  const outH = Math.floor((inH - k) / stride) + 1, outW = Math.floor((inW - k) / stride) + 1;
  if (outH < 1 || outW < 1) throw new Error(`maxPool2d: window ${k} larger than input ${inH}×${inW}`);
  const p: Pool2dParams = { batch, channels, inH, inW, k, stride, outH, outW };
  const be = x.backend;
  const { y, argmax } = be.maxPool2d(x.storage, p);
  const argmaxT = derived(be, argmax, [batch, channels, outH, outW], [], 'maxpool_argmax', () => [], 'i32');
  return derived(be, y, [batch, channels, outH, outW], [x], 'maxpool2d', (dy) => [
    () => derived(be, be.maxPool2dBackward(dy.storage, argmaxT.storage, p), x.shape, [], 'maxpool_dx', () => []),
  ]);
}
