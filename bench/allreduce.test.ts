// `npm run bench -- allreduce --quick` end to end (dispatcher, build, headless Chromium tabs over
// WebRTC) into a temporary file, then the JSON's shape: every N, size and dtype present, one raw run
// before each allreduce run, medians of the runs, busbw = algbw·2(N−1)/N, the ratio of medians and the
// spread of per-pair ratios, fp16 on the bytes actually sent, the summary. Speed lives in the JSON.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allreduceBenchConfig } from './allreduce';
import { median } from './stats';
import { runBench } from './child';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-allreduce-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// The report is checked field by field below, so it is read loosely typed.
type Json = Record<string, any>;

test('npm run bench -- allreduce --quick writes a complete allreduce JSON', { timeout: 5 * 60_000 }, async (t) => {
  const out = join(dir, 'allreduce.json');
  const code = await runBench(['allreduce', '--quick', '--out', out], t.signal);
  assert.equal(code, 0, 'the benchmark exits 0');
  const r: Json = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  const cfg = allreduceBenchConfig(1, true);
  assert.equal(r.benchmark, 'allreduce');
  assert.equal(r.quick, true);
  assert.deepEqual(r.options, cfg);
  assert.equal(r.machine.cores > 0, true);
  assert.match(r.browser.version, /^\d+\./);
  assert.match(r.browser.userAgent, /Chrome/);

  assert.equal(r.results.length, cfg.members.length * cfg.sizesMiB.length * cfg.dtypes.length);
  for (const x of r.results) {
    const where = `N=${x.members} ${x.sizeMiB} MiB ${x.dtype}`;
    // Interleaved: one raw run before every timed allreduce run, every ring link measured at once.
    assert.equal(x.runsMs.length, cfg.runs, where);
    assert.equal(x.rawRunsMBps.length, cfg.runs, `${where}: one raw run per allreduce run`);
    for (const links of x.rawLinksMBps) assert.equal(links.length, x.members, `${where}: every ring link measured at once`);
    assert.deepEqual(x.rawRunsMBps, x.rawLinksMBps.map((l: number[]) => median(l)));
    assert.equal(x.raw_MBps, median(x.rawRunsMBps));
    assert.ok(x.raw_MBps > 0 && Number.isFinite(x.raw_MBps), where);
    assert.equal(x.medianMs, median(x.runsMs), where);
    assert.ok(x.medianMs > 0, where);
    assert.equal(x.bytes, x.sizeMiB * 1024 * 1024);
    const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) <= 1e-9 * Math.abs(b), `${where}: ${what} ${a} vs ${b}`);
    close(x.algbw_MBps, x.bytes / 1e6 / (x.medianMs / 1000), 'algbw');
    close(x.busbw_MBps, x.algbw_MBps * 2 * (x.members - 1) / x.members, 'busbw');
    // The summary ratio is a ratio of medians; the spread is over the per-pair ratios.
    close(x.busbw_over_raw, x.busbw_MBps / x.raw_MBps, 'busbw/raw');
    assert.equal(x.pairRatios.length, cfg.runs);
    x.pairRatios.forEach((p: number, i: number) => close(p, (x.bytes / 1e6 / (x.runsMs[i] / 1000)) * 2 * (x.members - 1) / x.members / x.rawRunsMBps[i], `pair ${i} ratio`));
    const sp = x.busbw_over_raw_spread;
    assert.deepEqual([sp.min, sp.max, sp.median], [Math.min(...x.pairRatios), Math.max(...x.pairRatios), median(x.pairRatios)]);
    assert.ok(sp.min <= sp.q1 && sp.q1 <= sp.median && sp.median <= sp.q3 && sp.q3 <= sp.max, `${where}: quartiles in order`);
    // Each member sends 2(N−1)/N of the vector (in its wire dtype) plus 28-byte frame headers.
    const payload = (2 * (x.members - 1) / x.members) * x.bytes * (x.dtype === 'f16' ? 0.5 : 1);
    assert.ok(x.wireBytesPerMember >= payload && x.wireBytesPerMember < payload * 1.01 + 1024, `${where}: ${x.wireBytesPerMember} wire bytes, payload ${payload}`);
    close(x.busbw_sent_MBps, x.wireBytesPerMember / 1e6 / (x.medianMs / 1000), 'busbw on bytes sent');
    close(x.wire_over_raw, x.busbw_sent_MBps / x.raw_MBps, 'wire/raw');
  }
  const s = r.summary;
  const n4 = r.results.find((x: Json) => x.members === 4 && x.sizeMiB === s.sizeMiB && x.dtype === 'f32');
  const n4f16 = r.results.find((x: Json) => x.members === 4 && x.sizeMiB === s.sizeMiB && x.dtype === 'f16');
  assert.equal(s.raw_MBps, n4.raw_MBps);
  assert.equal(s.busbw_over_raw_n4, n4.busbw_over_raw);
  assert.deepEqual(s.busbw_over_raw_n4_spread, n4.busbw_over_raw_spread);
  assert.equal(s.busbw_MBps_n4_f16, n4f16.busbw_MBps);
  assert.equal(s.busbw_sent_MBps_n4_f16, n4f16.busbw_sent_MBps);
  // fp16 sends half the payload: on the bytes sent its busbw is about half the logical figure.
  assert.ok(Math.abs(s.busbw_sent_MBps_n4_f16 / s.busbw_MBps_n4_f16 - 0.5) < 0.01, `fp16 sent/logical ${s.busbw_sent_MBps_n4_f16 / s.busbw_MBps_n4_f16}`);
  assert.ok(s.busbw_over_raw_n4 > 0);
});
