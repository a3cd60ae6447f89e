// Text from a job's checkpoint, in the researcher's tab: the job's model is built from its spec,
// loaded from the checkpoint bytes, and sampled token by token; text is decoded as it grows, so a
// multi-byte character split across byte tokens shows once it is whole.
import { loadTokenizer, type Tokenizer } from '@tabfleet/data';
import { createModel, generate, presetOf, type Model, type SampleOptions } from '@tabfleet/nn';
import { verifyCheckpoint, type JobSpec } from '@tabfleet/protocol';
import type { Backend } from '@tabfleet/tensor';

/** Ids held back waiting for the rest of a character; past this many, what they decode to is shown as it is. */
const MAX_PENDING_IDS = 8;

/**
 * Decodes a stream of ids piece by piece. Ids since the last piece wait while they decode to a broken
 * character (U+FFFD): a character whose bytes are split across tokens shows once it is whole.
 * (Decoding every prefix is not enough: GPT-2 prefixes that end inside a character decode to text the
 * next token rewrites, not extends.)
 */
export function streamDecoder(tokenizer: Tokenizer): (id: number) => string {
  let pending: number[] = [];
  return (id) => {
    pending.push(id);
    const text = tokenizer.decode(pending);
    if (text.includes('\uFFFD') && pending.length < MAX_PENDING_IDS) return '';
    pending = [];
    return text;
  };
}

export interface SampleRequest extends Omit<SampleOptions, 'onToken'> {
  prompt: string;
}

export class Sampler {
  private constructor(private readonly model: Model, private readonly tokenizer: Tokenizer) {}

  /** The job's model with the checkpoint's parameters (checked as the server checks them). */
  static async load(backend: Backend, spec: JobSpec, checkpoint: Uint8Array): Promise<Sampler> {
    if (!spec.tokenizer) throw new Error(`a ${spec.preset} job on ${spec.dataset} has no text to sample`);
    const { params } = verifyCheckpoint(spec, checkpoint);
    const model = createModel(presetOf(spec), backend, spec.seed);
    model.store.writeFlat(params);
    return new Sampler(model, await loadTokenizer(spec.tokenizer));
  }

  /** Continues the prompt; `onText` gets each new piece of text as it is drawn. Returns the new text. */
  async sample(req: SampleRequest, onText: (piece: string) => void = () => {}): Promise<string> {
    const decode = streamDecoder(this.tokenizer);
    let text = '';
    await generate(this.model, this.tokenizer.encode(req.prompt), {
      length: req.length, temperature: req.temperature, topK: req.topK, seed: req.seed,
      onToken: (id) => {
        const piece = decode(id);
        text += piece;
        if (piece) onText(piece);
      },
    });
    return text;
  }
}
