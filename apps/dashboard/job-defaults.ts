// What the server fills in for each optional field the job form leaves blank, for the choices made
// so far: read from the protocol (defaultsFor, defaultPacing, defaultOptimizer, tokenizerFor) and
// from the schema's own defaults, never written again here.
import {
  DATASETS, STRATEGIES, TRUST_LEVELS, COMPRESSIONS, MODEL_PRESETS,
  defaultOptimizer, defaultPacing, defaultsFor, jobSpecSchema, tokenizerFor,
} from '@tabfleet/protocol';

/** The smallest job the schema takes: parsed, it shows the schema's own defaults. */
const PROBE = { preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', hyperparameters: { lr: 0.1, batchSize: 32 }, targetSteps: 1 } as const;

const oneOf = <T extends string>(list: readonly T[], v: unknown, fallback: T): T => ((list as readonly unknown[]).includes(v) ? (v as T) : fallback);

/** The form's choices that defaults depend on, as the form would send them (possibly invalid). */
export interface FormChoices {
  preset?: unknown;
  dataset?: unknown;
  strategy?: unknown;
  compression?: unknown;
  trust?: unknown;
  groupSize?: unknown;
  fragments?: unknown;
  overlapSteps?: unknown;
  hyperparameters?: { batchSize?: unknown };
}

/** Each optional field's default for these choices, as text, by the field's name in the form. */
export function formDefaults(c: FormChoices): Record<string, string> {
  const strategy = oneOf(STRATEGIES, c.strategy, 'localsgd');
  const compression = oneOf(COMPRESSIONS, c.compression, 'none');
  const preset = oneOf(MODEL_PRESETS, c.preset, 'mlp-fashion');
  const trust = oneOf(TRUST_LEVELS, c.trust, 'untrusted');
  const batchSize = Number(c.hyperparameters?.batchSize);
  const schema = jobSpecSchema.parse({ ...PROBE, trust });
  const d = defaultsFor(strategy, compression, preset, trust);
  const count = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const overlapSteps = count(c.overlapSteps) ?? schema.overlapSteps;
  const pacing = defaultPacing({
    strategy, groupSize: count(c.groupSize), hyperparameters: { batchSize: Number.isInteger(batchSize) ? batchSize : 1 }, fragments: count(c.fragments), overlapSteps,
  });
  return {
    optimizer: defaultOptimizer(strategy),
    sparsity: String(d.sparsity),
    outerLr: String(d.outerLr),
    outerMomentum: String(d.outerMomentum),
    momentum: String(schema.hyperparameters.momentum),
    weightDecay: String(schema.hyperparameters.weightDecay),
    pacing,
    aggregation: schema.aggregation,
    fragments: String(schema.fragments),
    overlapSteps: String(schema.overlapSteps),
    fragmentMixing: overlapSteps > 0 ? '0.5' : '0 (no overlap)',
    tokenizer: tokenizerFor(oneOf(DATASETS, c.dataset, 'fashion-mnist')) ?? 'none (not text)',
    evalEverySteps: String(schema.evalEverySteps),
    checkpointEvery: String(schema.checkpointEvery),
    seed: String(schema.seed),
  };
}
