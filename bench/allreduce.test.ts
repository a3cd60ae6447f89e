// `npm run bench -- allreduce --quick` end to end (dispatcher, build, headless Chromium tabs over
// WebRTC) into a temporary file, then the JSON's shape: every N and size present, medians of the
// runs, busbw = algbw·2(N−1)/N, ratios against the raw figure of the same N, the summary. Speed lives
// in the JSON, not here.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allreduceBenchConfig } from './allreduce';
import { median } from './stats';
import { runBench } from './child';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-allreduce-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// The report is checked field by field below, so it is read loosely typed.
type Json = Record<string, any>;

test('npm run bench -- allreduce --quick writes a complete allreduce JSON', { timeout: 5 * 60_000 }, async (t) => {
  const out = join(dir, 'allreduce.json');
  const code = await runBench(['allreduce', '--quick', '--out', out], t.signal);
  assert.equal(code, 0, 'the benchmark exits 0');
  const r: Json = JSON.parse(readFileSync(out, 'utf8'));
  const cfg = allreduceBenchConfig(1, true);
  assert.equal(r.benchmark, 'allreduce');
  assert.equal(r.quick, true);
  assert.deepEqual(r.options, cfg);
  assert.equal(r.machine.cores > 0, true);
  assert.match(r.browser.version, /^\d+\./);
  assert.match(r.browser.userAgent, /Chrome/);

  for (const n of cfg.members) {
    const raw = r.raw[n];
    assert.equal(raw.runsMBps.length, cfg.rawRuns, `N=${n}: one raw figure per raw run`);
    assert.equal(raw.MBps, median(raw.runsMBps));
    for (const links of raw.linksMBps) assert.equal(links.length, n, `N=${n}: every ring link measured at once`);
    assert.ok(raw.MBps > 0 && Number.isFinite(raw.MBps));
  }
  assert.equal(r.results.length, cfg.members.length * cfg.sizesMiB.length * cfg.dtypes.length);
  for (const x of r.results) {
    const where = `N=${x.members} ${x.sizeMiB} MiB ${x.dtype}`;
    assert.equal(x.runsMs.length, cfg.runs, where);
    assert.equal(x.medianMs, median(x.runsMs), where);
    assert.ok(x.medianMs > 0, where);
    assert.equal(x.bytes, x.sizeMiB * 1024 * 1024);
    assert.ok(Math.abs(x.algbw_MBps - x.bytes / 1e6 / (x.medianMs / 1000)) < 1e-9 * x.algbw_MBps, `${where}: algbw`);
    assert.ok(Math.abs(x.busbw_MBps - x.algbw_MBps * 2 * (x.members - 1) / x.members) < 1e-9 * x.busbw_MBps, `${where}: busbw`);
    assert.ok(Math.abs(x.busbw_over_raw - x.busbw_MBps / r.raw[x.members].MBps) < 1e-9, `${where}: ratio to raw`);
    // Each member sends 2(N−1)/N of the vector (in its wire dtype) plus 28-byte frame headers.
    const payload = (2 * (x.members - 1) / x.members) * x.bytes * (x.dtype === 'f16' ? 0.5 : 1);
    assert.ok(x.wireBytesPerMember >= payload && x.wireBytesPerMember < payload * 1.01 + 1024, `${where}: ${x.wireBytesPerMember} wire bytes, payload ${payload}`);
  }
  const s = r.summary;
  assert.equal(s.raw_MBps, r.raw[4].MBps);
  const n4 = r.results.find((x: Json) => x.members === 4 && x.sizeMiB === s.sizeMiB && x.dtype === 'f32');
  assert.equal(s.busbw_over_raw_n4, n4.busbw_over_raw);
  assert.ok(s.busbw_over_raw_n4 > 0);
});
