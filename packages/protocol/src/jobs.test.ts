import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bitsPerByte, DEFAULT_GPT, jobSpecSchema, targetStepsOf, type JobSpecInput } from './jobs';
import { layoutOf } from './models';

const base: JobSpecInput = { preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, hyperparameters: { lr: 0.1, batchSize: 64 }, maxWorkers: 4, targetSteps: 100 };

test('a job spec gets its defaults filled in', () => {
  const s = jobSpecSchema.parse(base);
  assert.equal(s.compression, 'none');
  assert.equal(s.minWorkers, 1);
  assert.equal(s.hyperparameters.outerLr, 0.7);
  assert.equal(s.hyperparameters.outerMomentum, 0.9);
  // Untrusted unless said otherwise, and then combined by centered clip.
  assert.equal(s.trust, 'untrusted');
  assert.equal(s.aggregation, 'centered-clip');
  assert.equal(jobSpecSchema.parse({ ...base, trust: 'trusted' }).aggregation, 'mean');
  assert.equal(jobSpecSchema.parse({ ...base, trust: 'trusted', aggregation: 'median' }).aggregation, 'median');
  assert.equal(jobSpecSchema.safeParse({ ...base, maxWorkers: 17 }).success, false);
  // An untrusted job's deltas go at 95% (sparser cost its 16-member group more than the validation rule allows: UNTRUSTED_DELTA_SPARSITY); a trusted job's at 99%.
  assert.equal(s.sparsity, 0.95);
  assert.equal(jobSpecSchema.parse({ ...base, trust: 'trusted', compression: 'dgc' }).sparsity, 0.99);
  // DDP sends its gradients sparser; DiLoCo with DGC deltas takes a gentler outer step.
  assert.equal(jobSpecSchema.parse({ ...base, strategy: 'ddp', H: 1, compression: 'dgc' }).sparsity, 0.999);
  const d = jobSpecSchema.parse({ ...base, strategy: 'diloco', compression: 'dgc' });
  assert.deepEqual([d.sparsity, d.hyperparameters.outerLr, d.hyperparameters.outerMomentum], [0.95, 1, 0.5]);
  const given = jobSpecSchema.parse({ ...base, strategy: 'diloco', compression: 'dgc', sparsity: 0.9, hyperparameters: { lr: 0.1, batchSize: 64, outerLr: 0.3, outerMomentum: 0 } });
  assert.deepEqual([given.sparsity, given.hyperparameters.outerLr, given.hyperparameters.outerMomentum], [0.9, 0.3, 0]);
  // A GPT's dense DiLoCo averages its deltas with no outer momentum (bench/results/lm-tuning.json).
  const gpt = jobSpecSchema.parse({ ...base, preset: 'gpt', gpt: { layers: 2, heads: 2, width: 64, context: 32 }, dataset: 'text-corpus', strategy: 'diloco' });
  assert.deepEqual([gpt.hyperparameters.outerLr, gpt.hyperparameters.outerMomentum], [1, 0]);
});

test('a job that names no pacing is auto where the server has it: paced in Moshpit groups, fixed in a ddp job whose batch does not split', () => {
  assert.equal(jobSpecSchema.parse(base).pacing, 'auto');
  assert.equal(jobSpecSchema.parse({ ...base, strategy: 'diloco' }).pacing, 'auto');
  assert.equal(jobSpecSchema.parse({ ...base, strategy: 'ddp', H: 1 }).pacing, 'auto', 'batch 64 splits into micro-batches');
  assert.equal(jobSpecSchema.parse({ ...base, strategy: 'ddp', H: 1, hyperparameters: { lr: 0.1, batchSize: 30 } }).pacing, 'fixed');
  assert.equal(jobSpecSchema.parse({ ...base, trust: 'trusted', groupSize: 4 }).pacing, 'paced');
  // What is asked for is kept; a budget needs paced, and says why when auto was only the default.
  assert.equal(jobSpecSchema.parse({ ...base, pacing: 'fixed' }).pacing, 'fixed');
  assert.throws(() => jobSpecSchema.parse({ ...base, roundBudgetMs: 500 }), /auto is the default\): give pacing 'paced'/);
  assert.equal(jobSpecSchema.parse({ ...base, pacing: 'paced', roundBudgetMs: 500 }).roundBudgetMs, 500);
});

test('target epochs convert to steps over one shard of the dataset', () => {
  const s = jobSpecSchema.parse({ ...base, targetSteps: undefined, targetEpochs: 2 });
  // 60000 / 4 workers = 15000 examples per shard; 2 epochs at batch 64 = ceil(30000 / 64).
  assert.equal(targetStepsOf(s), 469);
  assert.equal(targetStepsOf(jobSpecSchema.parse(base)), 100);
});

test('job specs that cannot run are refused', () => {
  for (const bad of [
    { ...base, strategy: 'ddp' },
    { ...base, targetEpochs: 1 },
    { ...base, minWorkers: 9 },
    { ...base, hyperparameters: { lr: Number.NaN, batchSize: 64 } },
    { ...base, unknownField: 1 },
  ]) assert.equal(jobSpecSchema.safeParse(bad).success, false, JSON.stringify(bad));
});

test('a gpt job has a shape (its own or the default), trains on text, and its tokenizer sets the vocabulary; what cannot run is refused with the reason', () => {
  const gpt: JobSpecInput = { ...base, preset: 'gpt', gpt: { layers: 2, heads: 4, width: 64, context: 32 }, dataset: 'text-corpus' };
  assert.equal(jobSpecSchema.parse(gpt).tokenizer, 'chars');
  assert.equal(jobSpecSchema.parse({ ...gpt, dataset: 'fortunes' }).tokenizer, 'bytes');
  assert.equal(jobSpecSchema.parse({ ...gpt, dataset: 'fortunes', tokenizer: 'gpt2' }).tokenizer, 'gpt2');
  assert.equal(jobSpecSchema.parse(base).tokenizer, undefined);
  assert.equal(layoutOf(jobSpecSchema.parse({ ...gpt, dataset: 'fortunes', tokenizer: 'gpt2' })).entries[0].shape.join(), '50257,64');
  const refusal = (input: unknown) => {
    const r = jobSpecSchema.safeParse(input);
    assert.equal(r.success, false, JSON.stringify(input));
    return r.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
  };
  assert.deepEqual(jobSpecSchema.parse({ ...gpt, gpt: undefined }).gpt, DEFAULT_GPT, 'a gpt job that gives no shape gets the default one');
  assert.match(refusal({ ...base, gpt: gpt.gpt }), /only a gpt job has a gpt shape/);
  assert.match(refusal({ ...gpt, dataset: 'fashion-mnist' }), /dataset: gpt trains on text/);
  assert.match(refusal({ ...base, tokenizer: 'bytes' }), /fashion-mnist is not text/);
  assert.match(refusal({ ...gpt, dataset: 'fortunes', tokenizer: 'chars' }), /knows only the generated corpus/);
  assert.match(refusal({ ...base, dataset: 'text-corpus' }), /mlp-fashion classifies images/);
  assert.match(refusal({ ...gpt, tokenizer: 'gpt2' }), /the generated corpus is cut by chars or bytes/);
  assert.equal(jobSpecSchema.parse({ ...gpt, hyperparameters: { lr: 0.01, batchSize: 8, optimizer: 'lamb' } }).hyperparameters.optimizer, 'lamb');
  assert.match(refusal({ ...gpt, hyperparameters: { lr: 0.01, batchSize: 8, optimizer: 'adam' } }), /hyperparameters.optimizer/);
  assert.equal(jobSpecSchema.parse({ ...gpt, dataset: 'text-upload', upload: 'u-0123456789ab' }).tokenizer, 'bytes');
  assert.match(refusal({ ...gpt, dataset: 'text-upload' }), /upload: with dataset text-upload, give the upload's id \(POST \/api\/datasets returns it\)/);
  assert.match(refusal({ ...gpt, upload: 'u-0123456789ab' }), /only a text-upload or image-upload job names an upload/);
  assert.match(refusal({ ...gpt, dataset: 'text-upload', upload: '../etc/passwd' }), /upload: an uploaded dataset id/);
  assert.equal(jobSpecSchema.parse({ ...base, dataset: 'image-upload', upload: 'u-0123456789ab' }).tokenizer, undefined);
  assert.match(refusal({ ...base, preset: 'cnn-fashion', dataset: 'image-upload' }), /upload: with dataset image-upload, give the upload's id/);
  assert.match(refusal({ ...gpt, dataset: 'image-upload', upload: 'u-0123456789ab' }), /gpt trains on text/);
  assert.match(refusal({ ...base, dataset: 'image-upload', upload: 'u-0123456789ab', targetSteps: undefined, targetEpochs: 1 }), /depend on the upload: give targetSteps/);
  assert.match(refusal({ ...gpt, gpt: { layers: 2, heads: 3, width: 64, context: 32 } }), /gpt.width: width must be a multiple of heads/);
  assert.match(refusal({ ...gpt, gpt: { layers: 2, heads: 4, width: 64, context: 32, dropout: 0.1 } }), /dropout/);
  assert.match(refusal({ ...gpt, dataset: 'fortunes', targetSteps: undefined, targetEpochs: 1 }), /depend on its tokenization: give targetSteps/);
  // The schema bounds a gpt's shape, not its size: the server bounds that (its maxModelBytes), so GPT-2 small is a valid spec.
  assert.equal(jobSpecSchema.safeParse({ ...gpt, dataset: 'fortunes', tokenizer: 'gpt2', gpt: { layers: 12, heads: 12, width: 768, context: 1024 } }).success, true);
});

test('bits per byte: a byte-level loss of ln 2 nats is one bit per byte; BPE divides by its measured bytes per token', () => {
  assert.equal(bitsPerByte(Math.LN2, 'bytes'), 1);
  assert.equal(bitsPerByte(Math.LN2, 'chars'), 1);
  assert.equal(bitsPerByte(4 * Math.LN2, 'gpt2', 4), 1);
  assert.equal(bitsPerByte(1, 'gpt2'), null);
});

test('an untrusted job grows past 16 members only in checked Moshpit groups of at most 16, drawn by the server', () => {
  const untrusted = { ...base, strategy: 'localsgd', trust: 'untrusted' } as const;
  // One group of 16 without groupSize, as before; past it the refusal says what to set.
  assert.equal(jobSpecSchema.parse({ ...untrusted, maxWorkers: 16 }).maxWorkers, 16);
  assert.throws(() => jobSpecSchema.parse({ ...untrusted, maxWorkers: 17 }), /without groupSize averages in one group of at most 16 members; set groupSize \(at most 16\)/);
  const grouped = jobSpecSchema.parse({ ...untrusted, groupSize: 16, maxWorkers: 10_000 });
  assert.deepEqual([grouped.maxWorkers, grouped.groupSize, grouped.aggregation, grouped.pacing], [10_000, 16, 'centered-clip', 'paced']);
  assert.throws(() => jobSpecSchema.parse({ ...untrusted, groupSize: 17, maxWorkers: 64 }), /checked groups of at most 16 members/);
  // Layouts a member could steer (its address, its region hint) would let Sybils gather in one group.
  assert.throws(() => jobSpecSchema.parse({ ...untrusted, groupSize: 4, hierarchical: true }), /hierarchical is for trusted jobs/);
  assert.throws(() => jobSpecSchema.parse({ ...untrusted, groupSize: 4, regionalGroups: true }), /regionalGroups is for trusted jobs/);
  // What Moshpit groups need of any job still holds.
  assert.throws(() => jobSpecSchema.parse({ ...untrusted, groupSize: 4, strategy: 'diloco' }), /built for localsgd/);
});

test('untrusted Moshpit groups take fp16 payloads, trusted ones do not; DGC is refused in any Moshpit groups with what to use instead', () => {
  const untrusted = { ...base, strategy: 'localsgd', trust: 'untrusted' } as const;
  const fp16 = jobSpecSchema.parse({ ...untrusted, groupSize: 4, maxWorkers: 64, compression: 'fp16' });
  assert.deepEqual([fp16.compression, fp16.groupSize, fp16.aggregation], ['fp16', 4, 'centered-clip']);
  assert.throws(() => jobSpecSchema.parse({ ...untrusted, trust: 'trusted', groupSize: 4, compression: 'fp16' }), /f32 parameters in a trusted job's rings/);
  const dgc = jobSpecSchema.safeParse({ ...untrusted, groupSize: 4, compression: 'dgc' });
  assert.equal(dgc.success, false);
  const issue = dgc.error!.issues.find((i) => i.path.join('.') === 'compression')!;
  assert.match(issue.message, /members of a new Moshpit group each hold their last group's model/);
  assert.match(issue.message, /use compression fp16 with groupSize \(half the bytes\), or DGC in one group of at most 16 without groupSize/);
  assert.throws(() => jobSpecSchema.parse({ ...untrusted, trust: 'trusted', groupSize: 4, compression: 'dgc' }), /use DGC in one ring without groupSize/);
  // Without groupSize an untrusted job of at most 16 still takes DGC (one group, a shared model).
  assert.equal(jobSpecSchema.parse({ ...untrusted, maxWorkers: 16, compression: 'dgc' }).sparsity, 0.95);
});

test('an untrusted job takes int8 and e2m1 payloads in one checked group, not in Moshpit groups (which average parameters)', () => {
  const untrusted = { ...base, strategy: 'diloco', trust: 'untrusted', maxWorkers: 16 } as const;
  for (const compression of ['int8', 'e2m1'] as const) {
    assert.equal(jobSpecSchema.parse({ ...untrusted, compression }).compression, compression);
    assert.throws(() => jobSpecSchema.parse({ ...untrusted, strategy: 'localsgd', groupSize: 4, maxWorkers: 64, compression }), /parameters, not quantized deltas/);
  }
});
