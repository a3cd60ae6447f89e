// What `npm run bench -- heterogeneous` trains: the Fashion-MNIST MLP (its target: validation
// accuracy) and a small GPT on the fortunes corpus (its target: validation loss), each as 8 LocalSGD
// workers sharing one device. Validation is held out of the training data; the final figure is on
// the test set (Fashion-MNIST's 10k images; the fortunes validation split, which no run tunes on);
// --quick takes part of each.
import { bytesTokenizer, textWindows, tokenize, type Dataset } from '@tabfleet/data';
import { loadFortunes } from '@tabfleet/data/node';
import { holdOutTail, mlpWorkers, presetWorkers, type SimWorker } from '@tabfleet/distributed';
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import type { ModelEngine } from '@tabfleet/distributed';
import type { Backend } from '@tabfleet/tensor';

export type WorkloadName = 'mlp' | 'gpt';

export interface Workload {
  name: WorkloadName;
  /** What evaluations measure, and which way is better. */
  metric: 'accuracy' | 'loss';
  batch: number;
  H: number;
  /** Steps per worker at equal speed: every run trains on this × 8 workers × batch samples. */
  stepsPerWorker: number;
  /** Evaluations per run (on the first `validationCount` held-out examples). */
  evaluations: number;
  validationCount: number;
  /** A fixed target (MLP), or null: read off the runs' validation curves (GPT, see heterogeneous.ts). */
  target: number | null;
  setup: Record<string, unknown>;
  workers(seed: number, slowdowns: readonly number[]): SimWorker[];
  validate(engine: ModelEngine): Promise<number>;
  /** The final figures: the whole validation hold-out and the test set. */
  final(engine: ModelEngine): Promise<{ validation: number; test: number }>;
}

async function mlpWorkload(backend: Backend, quick: boolean): Promise<Workload> {
  const all = await fashionMnistFromDisk();
  const split = holdOutTail(all.train, 5000);
  // Quick (the test suite): H = 4 and 8 steps per worker (two syncs; paced: one at measured paces),
  // and the final figures on part of each set.
  const batch = 32, H = quick ? 4 : 8, evalExamples = quick ? 500 : 2000, finalValidation = quick ? evalExamples : Infinity, testCount = quick ? 2000 : Infinity;
  return {
    name: 'mlp', metric: 'accuracy', batch, H, stepsPerWorker: quick ? 8 : 256, evaluations: quick ? 2 : 16, validationCount: evalExamples, target: 0.84,
    setup: { model: 'mlp-fashion', optimizer: 'SGD lr 0.05, Nesterov momentum 0.9', validation: 'the last 5,000 training images',
      test: quick ? `the first ${testCount} test images` : 'the 10,000 test images', target: 'validation accuracy 84%' },
    workers: (seed, slowdowns) => mlpWorkers(backend, {
      workers: slowdowns.length, data: { train: split.head, test: all.test }, batchSize: batch, seed,
      optimizer: { kind: 'sgd', lr: 0.05, momentum: 0.9, nesterov: true },
      strategy: { strategy: 'localsgd', H, compression: 'none', outerLr: 1, outerMomentum: 0 }, slowdowns,
    }),
    validate: async (engine) => (await engine.evaluate(evalExamples, 500, split.tail)).accuracy,
    final: async (engine) => ({ validation: (await engine.evaluate(finalValidation, 500, split.tail)).accuracy, test: (await engine.evaluate(testCount)).accuracy }),
  };
}

/** One block, width 32, context 32, byte tokens: small enough that 8 serialized workers × 9 runs fit the benchmark's time. */
export const HETEROGENEOUS_GPT = { layers: 1, heads: 2, width: 32, context: 32, vocab: 256 } as const;

async function gptWorkload(backend: Backend, quick: boolean): Promise<Workload> {
  const corpus = await loadFortunes();
  const windowsOf = (text: string): Dataset => textWindows(tokenize(text, bytesTokenizer).ids, HETEROGENEOUS_GPT.context, bytesTokenizer.vocabSize);
  const split = holdOutTail(windowsOf(corpus.train), 1024);
  const test = windowsOf(corpus.validation);
  const testCount = Math.min(test.count, quick ? 256 : 2048);
  const batch = 4, H = quick ? 4 : 8, evalWindows = quick ? 128 : 512, finalValidation = quick ? evalWindows : Infinity;
  return {
    // 128 steps a worker: a paced sync may now run MAX_STEPS_FACTOR × H = 64 steps of the fastest
    // member, a worker's whole run at the 64 this ran before (8–12 paced syncs, under a tenth and 4H).
    name: 'gpt', metric: 'loss', batch, H, stepsPerWorker: quick ? 12 : 128, evaluations: quick ? 2 : 8, validationCount: evalWindows, target: null,
    setup: {
      model: { kind: 'gpt', ...HETEROGENEOUS_GPT }, optimizer: 'AdamW lr 3e-3, weight decay 0.01', corpus: 'fortunes (Debian package), byte tokens',
      validation: 'the last 1,024 training windows', test: `the first ${testCount} windows of the corpus's validation split`,
      target: 'validation loss: the worst variant\'s best (median over seeds) + 1%, so every variant reaches it',
    },
    workers: (seed, slowdowns) => presetWorkers(backend, { kind: 'gpt', ...HETEROGENEOUS_GPT }, {
      workers: slowdowns.length, data: { train: split.head, test }, batchSize: batch, seed,
      optimizer: { kind: 'adamw', lr: 3e-3, weightDecay: 0.01 },
      strategy: { strategy: 'localsgd', H, compression: 'none', outerLr: 1, outerMomentum: 0 }, slowdowns,
    }),
    validate: async (engine) => (await engine.evaluate(evalWindows, 128, split.tail)).loss,
    final: async (engine) => ({ validation: (await engine.evaluate(finalValidation, 128, split.tail)).loss, test: (await engine.evaluate(testCount, 128, test)).loss }),
  };
}

export async function loadWorkload(name: WorkloadName, backend: Backend, quick: boolean): Promise<Workload> {
  return name === 'mlp' ? mlpWorkload(backend, quick) : gptWorkload(backend, quick);
}
