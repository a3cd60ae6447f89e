// The real path: page → Web Worker (comlink) → WebGPU (SwiftShader in CI) trains on the full
// Fashion-MNIST training set and is evaluated on the 10k test set.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { browserSession, openPage } from './harness';

let session: Awaited<ReturnType<typeof browserSession>>;
before(async () => {
  session = await browserSession();
});
after(async () => {
  await session?.close();
});

async function trainInTab(preset: string, epochs: number) {
  const log = (l: string) => {
    if (process.env.TABFLEET_VERBOSE || /progress.*testAccuracy|error/i.test(l)) console.log(l);
  };
  const { page, errors, close } = await openPage(session.browser, `${session.baseUrl}/apps/trainer/index.html`, { log });
  try {
    const info = await page.evaluate(() => window.tabfleetTrainer.ready);
    assert.equal(info.kind, 'webgpu', 'the tab must train on WebGPU, not the CPU fallback');
    const report = await page.evaluate(
      ({ preset, epochs }) => window.tabfleetTrainer.run(window.tabfleetTrainer.defaultConfig(preset as never, epochs)),
      { preset, epochs },
    );
    assert.deepEqual(errors, []);
    console.log(`${preset}: ${report.steps} steps, ${report.msPerStep.toFixed(1)} ms/step, test accuracy ${(100 * report.testAccuracy).toFixed(2)}% on ${report.testCount}`);
    return report;
  } finally {
    await close();
  }
}

test('a tab trains the MLP on full Fashion-MNIST to ≥ 85% test accuracy', { timeout: 15 * 60_000 }, async () => {
  const r = await trainInTab('mlp-fashion', 2);
  assert.equal(r.testCount, 10000);
  assert.ok(r.testAccuracy >= 0.85, `MLP test accuracy ${r.testAccuracy}`);
});
