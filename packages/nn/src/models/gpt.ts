// GPT: a decoder-only transformer as in nanoGPT (karpathy/nanoGPT, model.py): token and position
// embeddings, pre-norm blocks of causal multi-head self-attention and a 4× GELU MLP, a final layer
// norm, and a head tied to the token embedding. Parameter names, shapes and order are nanoGPT's
// (protocol's gptLayout; a test keeps the two equal), so its checkpoints load in PyTorch. Two
// differences to know when loading one there: GELU is the tanh form (nn.GELU(approximate='tanh')),
// and there is no dropout. ids: i32 [B, T] → logits [B·T, vocab].
import { add, causalAttention, checkpoint, gelu, matmul, permute, sliceRows, type Tensor } from '@tabfleet/tensor';
import { Embedding, LayerNorm, Linear } from '../layers';
import { ParamStore } from '../params';
import type { Model } from './model';
import { positionIds } from './transformer';

export interface GptPreset {
  kind: 'gpt';
  vocab: number;
  context: number;
  width: number;
  heads: number;
  layers: number;
}

/** nanoGPT's init: N(0, 0.02) weights and embeddings, zero biases, residual projections N(0, 0.02/√(2·layers)). */
const STD = 0.02;

class GptBlock {
  private readonly ln1: LayerNorm;
  private readonly cAttn: Linear;
  private readonly attnProj: Linear;
  private readonly ln2: LayerNorm;
  private readonly cFc: Linear;
  private readonly mlpProj: Linear;

  constructor(private readonly store: ParamStore, private readonly name: string, private readonly width: number, private readonly heads: number, layers: number) {
    const W = width, normal = { kind: 'normal' as const, std: STD }, residual = { kind: 'normal' as const, std: STD / Math.sqrt(2 * layers) };
    this.ln1 = new LayerNorm(store, `${name}.ln_1`, W);
    this.cAttn = new Linear(store, `${name}.attn.c_attn`, W, 3 * W, { init: normal });
    this.attnProj = new Linear(store, `${name}.attn.c_proj`, W, W, { init: residual });
    this.ln2 = new LayerNorm(store, `${name}.ln_2`, W);
    this.cFc = new Linear(store, `${name}.mlp.c_fc`, W, 4 * W, { init: normal });
    this.mlpProj = new Linear(store, `${name}.mlp.c_proj`, 4 * W, W, { init: residual });
  }

  /** The block's parameters (for activation recompute). */
  params(): Tensor[] {
    return this.store.manifest.filter((e) => e.name.startsWith(`${this.name}.`)).map((e) => this.store.get(e.name));
  }

  /** x: [B·T, W] → [B·T, W]. */
  forward(x: Tensor, B: number, T: number): Tensor {
    const x1 = add(x, this.attnProj.forward(this.attention(this.ln1.forward(x), B, T)));
    return add(x1, this.mlpProj.forward(gelu(this.cFc.forward(this.ln2.forward(x1)))));
  }

  /** Causal self-attention of h: [B·T, W] → [B·T, W], before the output projection. */
  private attention(h: Tensor, B: number, T: number): Tensor {
    const H = this.heads, Dh = this.width / H;
    // c_attn's output columns are q | k | v, each head-major: [B·T, 3W] → [B·T, 3, H, Dh] → [3, H, B·T, Dh],
    // so q, k and v are contiguous rows of one tensor, each [H·B, T, Dh] (batch order h, b).
    const qkv = permute(this.cAttn.forward(h).reshape([B * T, 3, H, Dh]), [1, 2, 0, 3]).reshape([3, H * B * T * Dh]);
    const part = (i: number) => sliceRows(qkv, i, 1).reshape([H * B, T, Dh]);
    const y = causalAttention(part(0), part(1), part(2)); // [H·B, T, Dh]
    // [H·B, T, Dh] → [H, B·T, Dh] → [B·T, H, Dh] → [B·T, W]: heads side by side, as nanoGPT's transpose and view.
    return permute(y.reshape([H, B * T, Dh]), [1, 0, 2]).reshape([B * T, this.width]);
  }
}

export class Gpt implements Model {
  readonly store = new ParamStore();
  readonly inputDType = 'i32' as const;
  private readonly wte: Embedding;
  private readonly wpe: Embedding;
  private readonly blocks: GptBlock[];
  private readonly lnF: LayerNorm;
  /**
   * Activation recompute per block: keep only each block's input, run the block again in backward.
   * Saves most activation memory for about one more forward pass of compute (`bench -- memory`).
   */
  recompute = false;

  constructor(readonly preset: GptPreset) {
    const { vocab, context, width, heads, layers } = preset;
    if (width % heads !== 0) throw new Error(`width ${width} is not a multiple of ${heads} heads`);
    this.wte = new Embedding(this.store, 'transformer.wte', vocab, width);
    this.wpe = new Embedding(this.store, 'transformer.wpe', context, width);
    this.blocks = Array.from({ length: layers }, (_, i) => new GptBlock(this.store, `transformer.h.${i}`, width, heads, layers));
    this.lnF = new LayerNorm(this.store, 'transformer.ln_f', width);
  }

  inputShape(batch: number): number[] {
    return [batch, this.preset.context];
  }

  /** ids: i32 [B, T] with T ≤ context → logits [B·T, vocab]. */
  forward(ids: Tensor): Tensor {
    const [B, T] = ids.shape;
    const W = this.preset.width;
    if (T > this.preset.context) throw new Error(`sequence length ${T} exceeds the context ${this.preset.context}`);
    const tok = this.wte.forward(ids).reshape([B, T, W]);
    const pos = this.wpe.forward(positionIds(ids, T)); // [T, W], broadcast over B
    let x = add(tok, pos).reshape([B * T, W]);
    for (const b of this.blocks) x = this.recompute ? checkpoint((h) => b.forward(h, B, T), x, b.params()) : b.forward(x, B, T);
    // The head is the token embedding (weight tying): logits = ln_f(x) · wteᵀ.
    return matmul(this.lnF.forward(x), this.wte.weight, { transB: true });
  }
}
