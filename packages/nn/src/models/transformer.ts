// Small decoder-only transformer for character-level language modelling (pre-norm GPT blocks).
// ids: i32 [B, T] → logits [B·T, vocab]; attention is causal and built from matmul, softmax, permute.
import { add, gelu, keepForever, matmul, permute, scale, softmax, tensor, type Tensor } from '@tabfleet/tensor';
import { Embedding, LayerNorm, Linear } from '../layers';
import { ParamStore } from '../params';
import type { Model } from './model';

export interface TransformerPreset {
  kind: 'transformer';
  vocab: number;
  context: number;
  dim: number;
  heads: number;
  layers: number;
}

class Block {
  private readonly ln1: LayerNorm;
  private readonly ln2: LayerNorm;
  private readonly q: Linear;
  private readonly k: Linear;
  private readonly v: Linear;
  private readonly proj: Linear;
  private readonly fc: Linear;
  private readonly out: Linear;

  constructor(store: ParamStore, name: string, private readonly dim: number, private readonly heads: number) {
    this.ln1 = new LayerNorm(store, `${name}.ln1`, dim);
    this.q = new Linear(store, `${name}.attn.q`, dim, dim, { gain: 1 });
    this.k = new Linear(store, `${name}.attn.k`, dim, dim, { gain: 1 });
    this.v = new Linear(store, `${name}.attn.v`, dim, dim, { gain: 1 });
    this.proj = new Linear(store, `${name}.attn.proj`, dim, dim, { gain: 0.5 });
    this.ln2 = new LayerNorm(store, `${name}.ln2`, dim);
    this.fc = new Linear(store, `${name}.mlp.fc`, dim, 4 * dim, { gain: 1 });
    this.out = new Linear(store, `${name}.mlp.proj`, 4 * dim, dim, { gain: 0.5 });
  }

  /** x: [B·T, dim] → [B·T, dim]. */
  forward(x: Tensor, B: number, T: number): Tensor {
    const H = this.heads, Dh = this.dim / H;
    const h = this.ln1.forward(x);
    // [B·T, dim] → [B, T, H, Dh] → [B, H, T, Dh] → [B·H, T, Dh]
    const split = (t: Tensor) => permute(t.reshape([B, T, H, Dh]), [0, 2, 1, 3]).reshape([B * H, T, Dh]);
    const q = split(this.q.forward(h)), k = split(this.k.forward(h)), v = split(this.v.forward(h));
    const att = softmax(scale(matmul(q, k, { transB: true }), 1 / Math.sqrt(Dh)), true); // [B·H, T, T]
    const y = permute(matmul(att, v).reshape([B, H, T, Dh]), [0, 2, 1, 3]).reshape([B * T, this.dim]);
    const x1 = add(x, this.proj.forward(y));
    return add(x1, this.out.forward(gelu(this.fc.forward(this.ln2.forward(x1)))));
  }
}

export class Transformer implements Model {
  readonly store = new ParamStore();
  readonly inputDType = 'i32' as const;
  private readonly tokens: Embedding;
  private readonly positions: Embedding;
  private readonly blocks: Block[];
  private readonly lnF: LayerNorm;
  private readonly head: Linear;

  constructor(readonly preset: TransformerPreset) {
    if (preset.dim % preset.heads !== 0) throw new Error(`dim ${preset.dim} is not divisible by ${preset.heads} heads`);
    this.tokens = new Embedding(this.store, 'tok_emb', preset.vocab, preset.dim);
    this.positions = new Embedding(this.store, 'pos_emb', preset.context, preset.dim);
    this.blocks = Array.from({ length: preset.layers }, (_, i) => new Block(this.store, `blocks.${i}`, preset.dim, preset.heads));
    this.lnF = new LayerNorm(this.store, 'ln_f', preset.dim);
    this.head = new Linear(this.store, 'head', preset.dim, preset.vocab, { gain: 1 });
  }

  inputShape(batch: number): number[] {
    return [batch, this.preset.context];
  }

  /** ids: i32 [B, T] with T ≤ context → logits [B·T, vocab]. */
  forward(ids: Tensor): Tensor {
    const [B, T] = ids.shape;
    if (T > this.preset.context) throw new Error(`sequence length ${T} exceeds the context ${this.preset.context}`);
    const tok = this.tokens.forward(ids).reshape([B, T, this.preset.dim]);
    const pos = this.positions.forward(positionIds(ids, T)); // [T, dim], broadcast over B
    let x = add(tok, pos).reshape([B * T, this.preset.dim]);
    for (const b of this.blocks) x = b.forward(x, B, T);
    return this.head.forward(this.lnF.forward(x));
  }
}

const positionCache = new WeakMap<object, Map<number, Tensor>>();

/** i32 [T] = 0..T−1 on the ids' backend, created once and kept. */
export function positionIds(ids: Tensor, T: number): Tensor {
  let byLen = positionCache.get(ids.backend);
  if (!byLen) positionCache.set(ids.backend, (byLen = new Map()));
  let t = byLen.get(T);
  if (!t) {
    t = keepForever(tensor(ids.backend, Int32Array.from({ length: T }, (_, i) => i), [T], false, { groupIds: true }));
    keepForever(t.idGroups!.index);
    byLen.set(T, t);
  }
  return t;
}
