// HTTP bodies (@tabfleet/protocol jobs.ts, the server's JSON routes): the job spec a researcher posts
// and the public credit request, as random JSON values, mutated JSON text and random bytes; at the
// schema and through a real server.
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import {
  AGGREGATIONS, COMPRESSIONS, DATASET_TRAIN_SIZES, ERROR_CODES, jobSpecSchema, LIMITS, parseEvent, ProtocolError, STRATEGIES, targetStepsOf,
  type JobSpec, type DatasetName, type JobSpecInput,
} from '@tabfleet/protocol';
import { startTestServer } from '@tabfleet/server/testing';
import { mutated } from './bytes';
import { wireValueArb } from './events';
import { decodeOrRefuse, type FuzzTarget } from './target';

/** A GPT small enough for the server's model limit at any vocabulary; width a multiple of heads, at least 4. */
const gptArb = fc.integer({ min: 1, max: 4 }).chain((heads) => fc.record({
  layers: fc.integer({ min: 1, max: 4 }),
  heads: fc.constant(heads),
  width: fc.integer({ min: Math.ceil(4 / heads), max: 16 }).map((w) => w * heads),
  context: fc.integer({ min: 2, max: 256 }),
}));

/** A model with a dataset it can train on (and what it needs besides: a GPT's shape, a tokenizer, an upload). */
const modelArb: fc.Arbitrary<Pick<JobSpecInput, 'preset' | 'gpt' | 'tokenizer' | 'upload'> & { dataset: DatasetName }> = fc.oneof(
  fc.record({ preset: fc.constantFrom('mlp-fashion' as const, 'cnn-fashion' as const), dataset: fc.constantFrom('fashion-mnist' as const, 'synthetic-blobs' as const) }),
  fc.record({ preset: fc.constant('transformer-char' as const), dataset: fc.constant('text-corpus' as const) }),
  fc.record({ preset: fc.constant('gpt' as const), gpt: gptArb, dataset: fc.constant('text-corpus' as const), tokenizer: fc.constantFrom('chars' as const, 'bytes' as const) }),
  fc.record({ preset: fc.constant('gpt' as const), gpt: gptArb, dataset: fc.constant('fortunes' as const), tokenizer: fc.constantFrom('bytes' as const, 'gpt2' as const) }),
  fc.record({
    preset: fc.constant('gpt' as const),
    gpt: gptArb,
    dataset: fc.constant('text-upload' as const),
    upload: fc.stringMatching(/^u-[0-9a-f]{12}$/),
    tokenizer: fc.constantFrom('bytes' as const, 'gpt2' as const),
  }),
);

/** Specs the schema must accept: every field in range, optional ones present or not. */
export const validSpecArb: fc.Arbitrary<JobSpecInput> = fc
  .record({
    name: fc.option(fc.string({ minLength: 1, maxLength: 40 }).filter((s) => s.trim().length > 0), { nil: undefined }),
    model: modelArb,
    strategy: fc.constantFrom(...STRATEGIES),
    H: fc.integer({ min: 1, max: 10_000 }),
    compression: fc.constantFrom(...COMPRESSIONS),
    lr: fc.double({ min: 1e-6, max: 10, noNaN: true }),
    batchSize: fc.integer({ min: 1, max: 4096 }),
    workers: fc.tuple(fc.integer({ min: 1, max: 256 }), fc.integer({ min: 1, max: 256 })),
    target: fc.oneof(fc.record({ targetSteps: fc.integer({ min: 1, max: 10_000_000 }) }), fc.record({ targetEpochs: fc.double({ min: 0.001, max: 10_000, noNaN: true }) })),
    targetAccuracy: fc.option(fc.double({ min: 0.01, max: 1, noNaN: true }), { nil: undefined }),
    seed: fc.option(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { nil: undefined }),
    trusted: fc.boolean(),
    aggregation: fc.option(fc.constantFrom(...AGGREGATIONS), { nil: undefined }),
  })
  .map((s) => ({
    ...(s.name === undefined ? {} : { name: s.name }),
    ...s.model,
    strategy: s.strategy,
    H: s.strategy === 'ddp' ? 1 : s.H,
    // Quantized payloads (int8, e2m1) go round trusted rings only.
    compression: !s.trusted && (s.compression === 'int8' || s.compression === 'e2m1') ? 'none' : s.compression,
    hyperparameters: { lr: s.lr, batchSize: s.batchSize },
    // An untrusted job is one group of at most LIMITS.maxGroupSize.
    minWorkers: Math.min(...s.workers, s.trusted ? Infinity : LIMITS.maxGroupSize),
    maxWorkers: Math.min(Math.max(...s.workers), s.trusted ? Infinity : LIMITS.maxGroupSize),
    trust: s.trusted ? ('trusted' as const) : ('untrusted' as const),
    ...(s.aggregation === undefined ? {} : { aggregation: s.aggregation }),
    // Epochs of a served text depend on its tokenization: such jobs give steps.
    ...(Number.isFinite(DATASET_TRAIN_SIZES[s.model.dataset]) ? s.target : { targetSteps: 'targetSteps' in s.target ? s.target.targetSteps : 1000 }),
    ...(s.targetAccuracy === undefined ? {} : { targetAccuracy: s.targetAccuracy }),
    ...(s.seed === undefined ? {} : { seed: s.seed }),
  }));

/** What every accepted spec satisfies (the server sizes the job from it). */
export function checkSpec(s: JobSpec): void {
  if (s.minWorkers > s.maxWorkers) throw new Error('minWorkers > maxWorkers');
  if ((s.targetSteps === undefined) === (s.targetEpochs === undefined)) throw new Error('not exactly one target');
  if (s.strategy === 'ddp' && s.H !== 1) throw new Error('ddp with H ≠ 1');
  if (s.trust === 'untrusted' && s.maxWorkers > LIMITS.maxGroupSize) throw new Error('an untrusted job larger than a group');
  if (s.groupSize !== undefined && (s.compression === 'int8' || s.compression === 'e2m1')) throw new Error(`Moshpit groups with ${s.compression} payloads`);
  if (!AGGREGATIONS.includes(s.aggregation)) throw new Error(`aggregation ${s.aggregation} not filled in`);
  if (![s.sparsity, s.hyperparameters.outerLr, s.hyperparameters.outerMomentum].every(Number.isFinite)) throw new Error('defaults not filled in');
  const steps = targetStepsOf(s);
  if (!Number.isSafeInteger(steps) || steps < 1) throw new Error(`targetStepsOf = ${steps}`);
}

/** A body as the server's readJson reads it: bytes → UTF-8 → JSON.parse, then the schema. */
function parseBody(bytes: Uint8Array): JobSpec | undefined {
  return decodeOrRefuse(() => {
    let v: unknown;
    try {
      v = JSON.parse(Buffer.from(bytes).toString('utf8') || 'null');
    } catch {
      throw new ProtocolError('bad_request', 'body is not valid JSON');
    }
    return parseEvent(jobSpecSchema, v, 'job spec');
  }, ProtocolError);
}

const specBytes = validSpecArb.map((s) => new TextEncoder().encode(JSON.stringify(s)));
/** Valid specs with one field replaced by any wire value (or one added). */
const editedSpecArb = fc.tuple(
  validSpecArb,
  fc.oneof(fc.string(), fc.constantFrom('H', 'minWorkers', 'maxWorkers', 'targetSteps', 'targetEpochs', 'hyperparameters', 'sparsity', 'seed', 'name')),
  wireValueArb,
).map(([s, k, v]) => ({ ...s, [k]: v }));

export const HTTP_TARGETS: FuzzTarget[] = [
  {
    decoder: 'http-bodies',
    name: 'valid job specs are accepted, in normal form (parsing the result again gives it back), with a finite step target',
    quickRuns: 300,
    open: () => ({
      property: fc.property(validSpecArb, (input) => {
        const s = parseEvent(jobSpecSchema, input, 'job spec');
        checkSpec(s);
        const again = parseEvent(jobSpecSchema, s, 'job spec');
        if (!isDeepStrictEqual(again, s)) throw new Error(`re-parse changed ${JSON.stringify(s)} into ${JSON.stringify(again)}`);
      }),
    }),
  },
  {
    decoder: 'http-bodies',
    name: 'edited specs, mutated JSON text and random bytes give a bad_request ProtocolError or a consistent spec',
    quickRuns: 1200,
    open: () => ({
      property: fc.property(
        fc.oneof(
          mutated(specBytes),
          editedSpecArb.map((s) => new TextEncoder().encode(JSON.stringify(s))),
          wireValueArb.map((v) => new TextEncoder().encode(JSON.stringify(v) ?? '')),
          fc.uint8Array({ maxLength: 100 }),
        ),
        (bytes) => {
          const s = parseBody(bytes);
          if (s) checkSpec(s);
        },
      ),
    }),
  },
  {
    decoder: 'http-bodies',
    name: 'a real server answers malformed job and credit bodies with a 4xx and a known error code, never a 5xx',
    quickRuns: 40,
    async open() {
      const server = await startTestServer();
      const ROUTES = ['/api/jobs', '/api/public/credit'];
      return {
        property: fc.asyncProperty(
          fc.constantFrom(...ROUTES),
          fc.oneof(mutated(specBytes), editedSpecArb.map((s) => new TextEncoder().encode(JSON.stringify(s))), fc.uint8Array({ maxLength: 100 })),
          async (route, bytes) => {
            const r = await server.api(route, { method: 'POST', body: Buffer.from(bytes), headers: { 'content-type': 'application/json' } });
            if (r.status === 200 || r.status === 201) return;
            const code = r.body?.error?.code;
            if (r.status >= 500 && code !== 'capacity') throw new Error(`${route}: ${r.status} ${r.text}`);
            if (!ERROR_CODES.includes(code)) throw new Error(`${route}: ${r.status} with no error code: ${r.text}`);
          },
        ),
        close: () => server.stop(),
      };
    },
  },
];
