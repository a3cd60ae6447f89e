// Reference conv2d (NCHW, weights [outC, inC, kH, kW]) and max pooling, forward and backward.
import type { Conv2dParams, Pool2dParams } from '../backend';
import type { FloatArray } from './backend';

export function conv2dRef(x: FloatArray, w: FloatArray, bias: FloatArray | null, p: Conv2dParams, out: FloatArray): FloatArray {
  for (let b = 0; b < p.batch; b++)
    for (let co = 0; co < p.outC; co++)
      for (let oh = 0; oh < p.outH; oh++)
        for (let ow = 0; ow < p.outW; ow++) {
          let acc = bias ? bias[co] : 0;
          for (let ci = 0; ci < p.inC; ci++)
            for (let kh = 0; kh < p.kH; kh++) {
              const ih = oh * p.stride - p.pad + kh;
              if (ih < 0 || ih >= p.inH) continue;
              for (let kw = 0; kw < p.kW; kw++) {
                const iw = ow * p.stride - p.pad + kw;
                if (iw < 0 || iw >= p.inW) continue;
                acc += x[((b * p.inC + ci) * p.inH + ih) * p.inW + iw] * w[((co * p.inC + ci) * p.kH + kh) * p.kW + kw];
              }
            }
          out[((b * p.outC + co) * p.outH + oh) * p.outW + ow] = acc;
        }
  return out;
}

export function conv2dBackwardInputRef(dy: FloatArray, w: FloatArray, p: Conv2dParams, dx: FloatArray): FloatArray {
  for (let b = 0; b < p.batch; b++)
    for (let co = 0; co < p.outC; co++)
      for (let oh = 0; oh < p.outH; oh++)
        for (let ow = 0; ow < p.outW; ow++) {
          const g = dy[((b * p.outC + co) * p.outH + oh) * p.outW + ow];
          for (let ci = 0; ci < p.inC; ci++)
            for (let kh = 0; kh < p.kH; kh++) {
              const ih = oh * p.stride - p.pad + kh;
              if (ih < 0 || ih >= p.inH) continue;
              for (let kw = 0; kw < p.kW; kw++) {
                const iw = ow * p.stride - p.pad + kw;
                if (iw < 0 || iw >= p.inW) continue;
                dx[((b * p.inC + ci) * p.inH + ih) * p.inW + iw] += g * w[((co * p.inC + ci) * p.kH + kh) * p.kW + kw];
              }
            }
        }
  return dx;
}

export function conv2dBackwardFilterRef(dy: FloatArray, x: FloatArray, p: Conv2dParams, dw: FloatArray): FloatArray {
  for (let b = 0; b < p.batch; b++)
    for (let co = 0; co < p.outC; co++)
      for (let oh = 0; oh < p.outH; oh++)
        for (let ow = 0; ow < p.outW; ow++) {
          const g = dy[((b * p.outC + co) * p.outH + oh) * p.outW + ow];
          for (let ci = 0; ci < p.inC; ci++)
            for (let kh = 0; kh < p.kH; kh++) {
              const ih = oh * p.stride - p.pad + kh;
              if (ih < 0 || ih >= p.inH) continue;
              for (let kw = 0; kw < p.kW; kw++) {
                const iw = ow * p.stride - p.pad + kw;
                if (iw < 0 || iw >= p.inW) continue;
                dw[((co * p.inC + ci) * p.kH + kh) * p.kW + kw] += g * x[((b * p.inC + ci) * p.inH + ih) * p.inW + iw];
              }
            }
        }
  return dw;
}

/** Windows are clipped at the border; ties keep the first maximum (row-major). */
export function maxPool2dRef(x: FloatArray, p: Pool2dParams, y: FloatArray, argmax: Int32Array): { y: FloatArray; argmax: Int32Array } {
  for (let bc = 0; bc < p.batch * p.channels; bc++)
    for (let oh = 0; oh < p.outH; oh++)
      for (let ow = 0; ow < p.outW; ow++) {
        let best = -Infinity, bestIdx = -1;
        for (let kh = 0; kh < p.k; kh++) {
          const ih = oh * p.stride + kh;
          if (ih >= p.inH) continue;
          for (let kw = 0; kw < p.k; kw++) {
            const iw = ow * p.stride + kw;
            if (iw >= p.inW) continue;
            const idx = (bc * p.inH + ih) * p.inW + iw;
            if (x[idx] > best || bestIdx < 0) {
              best = x[idx];
              bestIdx = idx;
            }
          }
        }
        const o = (bc * p.outH + oh) * p.outW + ow;
        y[o] = best;
        argmax[o] = bestIdx;
      }
  return { y, argmax };
}

export function maxPool2dBackwardRef(dy: FloatArray, argmax: Int32Array, p: Pool2dParams, dx: FloatArray): FloatArray {
  for (let o = 0; o < argmax.length; o++) dx[argmax[o]] += dy[o];
  return dx;
}
