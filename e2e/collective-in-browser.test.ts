// Four headless Chromium tabs on loopback form a ring over WebRTC data channels (simple-peer's
// browser bundle, host candidates, no STUN) and allreduce 16 MB: every tab gets the plain sum,
// bit-identical across tabs in fp32. Signaling is relayed by the test between ring neighbours
// (e2e/collective-tabs.ts), standing in for the coordinator's `signal` event.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { openCollectiveTabs } from '@tabfleet/headless/collective-tabs';
import { browserSession } from '@tabfleet/headless';

let session: Awaited<ReturnType<typeof browserSession>>;
before(async () => {
  session = await browserSession();
});
after(async () => {
  await session?.close();
});

test('4 tabs allreduce 16 MB over WebRTC data channels (fp32 exact and identical, fp16 within rounding)', { timeout: 5 * 60_000 }, async () => {
  const log = (l: string) => {
    if (process.env.TABFLEET_VERBOSE || /error|mismatch|fail/i.test(l)) console.log(l);
  };
  const fleet = await openCollectiveTabs(session.browser, `${session.baseUrl}/e2e/pages/collective.html`, 4, { jobId: 'e2e-collective', round: 1, deadlineMs: 120_000, log });
  try {
    const connectMs = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate(() => window.tabfleetCollective.connect())));
    assert.equal(fleet.signals.refused, 0, 'only ring neighbours signal each other');
    assert.ok(fleet.signals.relayed > 0);
    const len = (16 * 1024 * 1024) / 4;
    for (const dtype of ['f32', 'f16'] as const) {
      const range = dtype === 'f32' ? 1 << 20 : 500;
      const rs = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate((o) => window.tabfleetCollective.allreduceCheck(o), { len, seed: 7, dtype, op: 'sum' as const, range })));
      const ms = Math.max(...rs.map((r) => r.ms));
      console.log(`4 tabs, 16 MB ${dtype}: ${ms.toFixed(0)} ms (busbw ${((16 * 1024 * 1024) / ms / 1e3 * 1.5).toFixed(1)} MB/s); connect ${Math.max(...connectMs).toFixed(0)} ms`);
      for (const [i, r] of rs.entries()) {
        assert.equal(r.mismatches, 0, `tab ${i}: ${r.mismatches} elements off the plain sum (max error ${r.maxErr})`);
        assert.ok(r.inputUntouched, `tab ${i}: input modified`);
      }
      assert.equal(new Set(rs.map((r) => r.checksum)).size, 1, 'every tab holds the same bytes');
    }
    const stats = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate(() => window.tabfleetCollective.stats())));
    for (const [i, s] of stats.entries()) {
      for (const l of s.links) assert.ok(l.maxBufferedAmount <= 1024 * 1024 + 65536, `tab ${i} → ${l.peer}: ${l.maxBufferedAmount} bytes queued`);
      assert.equal(s.ring.bad + s.ring.duplicate, 0);
    }
    assert.deepEqual(fleet.errors(), []);
  } finally {
    await fleet.close();
  }
});
