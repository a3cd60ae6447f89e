// Text from a job's checkpoint, in the researcher's tab: the job's model is built from its spec,
// loaded from the checkpoint bytes, and sampled token by token; text is decoded as it grows, so a
// multi-byte character split across byte tokens shows once it is whole.
import { CHARSET, decodeText, encodeText } from '@tabfleet/data';
import { createModel, generate, presetOf, type Model, type SampleOptions } from '@tabfleet/nn';
import { verifyCheckpoint, type JobSpec, type Tokenizer } from '@tabfleet/protocol';
import type { Backend } from '@tabfleet/tensor';

/** Text ↔ ids for a tokenizer; `decoder()` decodes a stream of ids piece by piece. */
export interface TextCodec {
  encode(text: string): Int32Array;
  decoder(): (id: number) => string;
}

export function textCodec(tokenizer: Tokenizer): TextCodec {
  if (tokenizer === 'chars') {
    return {
      encode: (text) => {
        const bad = [...text].find((ch) => !CHARSET.includes(ch));
        if (bad !== undefined) throw new Error(`the chars tokenizer knows only ${JSON.stringify(CHARSET)}: ${JSON.stringify(bad)} is not among them`);
        return encodeText(text);
      },
      decoder: () => (id) => decodeText([id]),
    };
  }
  if (tokenizer === 'bytes') {
    return {
      encode: (text) => Int32Array.from(new TextEncoder().encode(text)),
      decoder: () => {
        const d = new TextDecoder('utf-8', { fatal: false });
        return (id) => d.decode(Uint8Array.of(id), { stream: true });
      },
    };
  }
  throw new Error(`sampling with the ${tokenizer} tokenizer is not available in this build`);
}

export interface SampleRequest extends Omit<SampleOptions, 'onToken'> {
  prompt: string;
}

export class Sampler {
  private constructor(private readonly model: Model, private readonly codec: TextCodec) {}

  /** The job's model with the checkpoint's parameters (checked as the server checks them). */
  static load(backend: Backend, spec: JobSpec, checkpoint: Uint8Array): Sampler {
    if (!spec.tokenizer) throw new Error(`a ${spec.preset} job on ${spec.dataset} has no text to sample`);
    const { params } = verifyCheckpoint(spec, checkpoint);
    const model = createModel(presetOf(spec), backend, spec.seed);
    model.store.writeFlat(params);
    return new Sampler(model, textCodec(spec.tokenizer));
  }

  /** Continues the prompt; `onText` gets each new piece of text as it is drawn. Returns the new text. */
  async sample(req: SampleRequest, onText: (piece: string) => void = () => {}): Promise<string> {
    const decode = this.codec.decoder();
    let text = '';
    await generate(this.model, this.codec.encode(req.prompt), {
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
