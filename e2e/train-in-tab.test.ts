// The real path: page → Web Worker (comlink) → WebGPU (SwiftShader in CI) trains on the full
// Fashion-MNIST training set and is evaluated on the 10k test set.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { browserSession, openPage } from '@tabfleet/headless';

let session: Awaited<ReturnType<typeof browserSession>>;
before(async () => {
  session = await browserSession();
});
after(async () => {
  await session?.close();
});

async function trainInTab(preset: string, epochs: number, maxSteps?: number) {
  const log = (l: string) => {
    if (process.env.TABFLEET_VERBOSE || /progress.*testAccuracy|error/i.test(l)) console.log(l);
  };
  const { page, errors, close } = await openPage(session.browser, `${session.baseUrl}/apps/trainer/index.html`, { log });
  try {
    const info = await page.evaluate(() => window.tabfleetTrainer.ready);
    assert.equal(info.kind, 'webgpu', 'the tab must train on WebGPU, not the CPU fallback');
    const report = await page.evaluate(
      ({ preset, epochs, maxSteps }) => window.tabfleetTrainer.run({ ...window.tabfleetTrainer.defaultConfig(preset as never, epochs), maxSteps }),
      { preset, epochs, maxSteps },
    );
    assert.deepEqual(errors, []);
    console.log(`${preset}: ${report.steps} steps, ${report.msPerStep.toFixed(1)} ms/step, test accuracy ${(100 * report.testAccuracy).toFixed(2)}% on ${report.testCount}`);
    return report;
  } finally {
    await close();
  }
}

test('a tab trains the MLP on full Fashion-MNIST to ≥ 85% test accuracy in one epoch', { timeout: 15 * 60_000 }, async () => {
  // One epoch for the suite's time: 86.02% (two took twice as long for 86.72%; the run is seeded).
  const r = await trainInTab('mlp-fashion', 1);
  assert.equal(r.testCount, 10000);
  assert.ok(r.testAccuracy >= 0.85, `MLP test accuracy ${r.testAccuracy}`);
});

test('a tab trains the small CNN on Fashion-MNIST to ≥ 78% test accuracy in a fifth of an epoch', { timeout: 20 * 60_000 }, async () => {
  // Scaled down for the suite's time budget: one epoch (468 steps, ~3.8 min here) measured 85.9%,
  // two 87.7%, half an epoch 84.1%, 117 steps 80.6%, 88 steps 81.5% (not monotone along a run);
  // a fifth shows the same real path learning (chance is 10%).
  const r = await trainInTab('cnn-fashion', 1, 88);
  assert.equal(r.testCount, 10000);
  assert.ok(r.testAccuracy >= 0.78, `CNN test accuracy ${r.testAccuracy}`);
});

test('a tab trains the char transformer and its loss falls well below chance', { timeout: 15 * 60_000 }, async () => {
  // 96 of the epoch's 140 steps (the whole epoch measured loss 3.24 → 0.87, test loss 0.83).
  const r = await trainInTab('transformer-char', 1, 96);
  const chance = Math.log(30); // uniform over the 30-character charset
  const first = r.losses.slice(0, 5).reduce((a, b) => a + b, 0) / 5;
  const last = r.losses.slice(-5).reduce((a, b) => a + b, 0) / 5;
  console.log(`transformer: loss ${first.toFixed(3)} → ${last.toFixed(3)} over ${r.steps} steps; test loss ${r.testLoss.toFixed(3)} (chance ${chance.toFixed(3)})`);
  assert.ok(last < first * 0.6, `training loss should fall: ${first} → ${last}`);
  assert.ok(r.testLoss < chance * 0.6, `test loss ${r.testLoss} should be well below chance ${chance}`);
});
