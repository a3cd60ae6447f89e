// The kernel table of packages/tensor/src/testing/kernel-cases.ts, run in headless Chromium's WebGPU.
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

for (const variant of ['unrolled', 'tiled'] as const) {
  test(`every kernel matches the CPU reference in headless Chromium (matmul variant ${variant})`, { timeout: 10 * 60_000 }, async () => {
    const { page, errors, close } = await openPage(session.browser, `${session.baseUrl}/e2e/pages/kernels.html`);
    try {
      const { adapter, results } = await page.evaluate((v) => window.runKernelSuite(v), variant);
      const failed = results.filter((r) => !r.ok);
      console.log(`${adapter}: ${results.length - failed.length}/${results.length} kernel cases passed`);
      assert.ok(results.length > (variant === 'unrolled' ? 100 : 10), `suspiciously few cases: ${results.length}`);
      assert.deepEqual(failed, []);
      assert.deepEqual(errors, []);
    } finally {
      await close();
    }
  });
}
