// The job form's memory line: what the job's model needs in a volunteer tab's GPU memory (protocol's
// memory-estimate.ts, in the WebGPU runtime's buffer sizes): parameters, the flat gradient buffer, the
// inner optimizer's state, activations per example with and without recompute, and the job's batch in
// one pass (which also counts the parameters' own gradient tensors backward holds until it copies them).
import { estimateJobMemory, type jobSpecSchema } from '@tabfleet/protocol';
import { formatBytes } from '../shared/format';

type Parsed = ReturnType<typeof jobSpecSchema.safeParse>;

const STATE_NAMES = { sgd: 'SGD velocity', adamw: 'AdamW state', lamb: 'LAMB state' } as const;
/** Fields that decide the model; the size line above already says what is wrong with them. */
const MODEL_FIELDS = ['gpt', 'tokenizer', 'preset', 'dataset'];

/** The line for a parsed (or refused) job spec. */
export function memoryLine(parsed: Parsed): string {
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    if (!issue || parsed.error.issues.some((i) => MODEL_FIELDS.includes(String(i.path[0])))) return '';
    return `memory: not estimated while ${issue.path.join('.') || 'the job'} is invalid (${issue.message})`;
  }
  const spec = parsed.data;
  let e;
  try {
    e = estimateJobMemory(spec);
  } catch (err) {
    return `memory: ${(err as Error).message}`;
  }
  const { recompute, plain } = e.perExample;
  const activations = recompute === null
    ? `activations ${formatBytes(plain)} an example (this model does not recompute them)`
    : `activations ${formatBytes(recompute)} an example with recompute, ${formatBytes(plain)} without`;
  const B = e.batch.examples;
  const batch = e.batch.recompute === null ? formatBytes(e.batch.plain)
    : spec.recompute === 'on' ? `${formatBytes(e.batch.recompute)} with recompute (the job's setting)`
    : spec.recompute === 'off' ? `${formatBytes(e.batch.plain)} without recompute (the job's setting)`
    : `${formatBytes(e.batch.recompute)} with recompute, ${formatBytes(e.batch.plain)} without`;
  return `A tab's GPU memory (WebGPU buffers, in the runtime's pool sizes): ${formatBytes(e.parameters)} of parameters, `
    + `${formatBytes(e.gradients)} of gradients, ${formatBytes(e.optimizerState)} of ${STATE_NAMES[e.optimizer!]}; ${activations}; `
    + `the batch of ${B} in one pass: ${batch}${B > 1 ? '; a tab with less memory splits it into micro-batches' : ''}.`;
}
