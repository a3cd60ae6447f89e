// The Grafana dashboard in docs/grafana/tabfleet.json cannot go stale: every metric its panels and
// variables query is one a live server exports, and every panel's PromQL parses (promtool check rules).
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { metricFamilies } from '../src/testing/exposition';
import { promtool } from '../src/testing/promtool';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const DASHBOARD = join(import.meta.dirname, '../../docs/grafana/tabfleet.json');

interface Panel {
  type: string;
  title: string;
  panels?: Panel[];
  targets?: { expr?: string }[];
}

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

/** What PromQL does not name a metric with: operators' keywords (functions are told by their parenthesis). */
const PROMQL_WORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan']);

/** The metric names a PromQL expression (or a Grafana `label_values(metric, label)` query) reads. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // label values, Grafana variables among them
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\[[^\]]*\]/g, '') // ranges
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // grouping labels
    .replace(/\blabel_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,[^)]*\)/g, '$1'); // a variable's query: its metric, not its label
  const names: string[] = [];
  // Not within a number or duration (the m of 5m).
  for (const m of bare.matchAll(/(?<![\w:.])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (bare.slice(m.index + m[0].length).trimStart().startsWith('(')) continue; // a function or aggregation
    if (!PROMQL_WORDS.has(m[0].toLowerCase())) names.push(m[0]);
  }
  return names;
}

function panelsOf(list: Panel[]): Panel[] {
  return list.flatMap((p) => [p, ...panelsOf(p.panels ?? [])]);
}

/** Grafana's variables as a Prometheus server would see them once Grafana has put them in. */
function withVariables(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)/g, '5m').replace(/\$\{?\w+\}?/g, '.+');
}

test('metricNames reads the metrics of an expression and nothing else', () => {
  assert.deepEqual(metricNames('sum by (job_id, outcome) (rate(a_total{instance=~"$instance", job_id=~"$job_id"}[$__rate_interval]))'), ['a_total']);
  assert.deepEqual(metricNames('max(b) by (state) / on (x) group_left c_bytes offset 5m'), ['b', 'c_bytes']);
  assert.deepEqual(metricNames('label_values(d{instance=~"$instance"}, job_id)'), ['d']);
});

test('every metric the Grafana dashboard queries is one a live /metrics exports, and every expression parses', async () => {
  const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8'));
  // A job this node coordinates, so the per-job series are in the scrape too.
  await server.createJob();
  const families = metricFamilies(await (await fetch(`${server.url}/metrics`)).text());
  // A histogram or summary is exported as its _bucket, _sum and _count series.
  const exported = new Set([...families].flatMap(([name, type]) => (type === 'histogram' || type === 'summary' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`, name] : [name])));

  const panels = panelsOf(dashboard.panels as Panel[]).filter((p) => p.type !== 'row');
  assert.ok(panels.length >= 10, `${panels.length} panels`);
  const exprs: { where: string; expr: string }[] = [];
  for (const p of panels) {
    const targets = (p.targets ?? []).filter((t) => t.expr);
    assert.ok(targets.length > 0, `panel "${p.title}" queries nothing`);
    for (const t of targets) exprs.push({ where: `panel "${p.title}"`, expr: t.expr! });
  }
  const variables = (dashboard.templating.list as { name: string; type: string; query: string | { query: string } }[]).filter((v) => v.type === 'query');
  assert.ok(variables.length >= 2, 'the node and job variables');
  for (const v of variables) exprs.push({ where: `variable $${v.name}`, expr: typeof v.query === 'string' ? v.query : v.query.query });

  const used = new Set<string>();
  for (const { where, expr } of exprs) {
    const names = metricNames(expr);
    assert.ok(names.length > 0, `${where}: no metric in ${expr}`);
    for (const name of names) {
      assert.ok(exported.has(name), `${where} queries ${name}, which /metrics does not export (${expr})`);
      used.add(name);
    }
  }
  // The dashboard shows what this issue added: per-job series and the runtime metrics.
  for (const name of ['tabfleet_job_rounds_total', 'tabfleet_job_round_aborts_total', 'tabfleet_job_evictions_total', 'tabfleet_job_exchange_bytes_total', 'process_resident_memory_bytes']) {
    assert.ok(used.has(name), `the dashboard shows ${name}`);
  }

  // PromQL syntax, by Prometheus's own parser: each panel expression as a recording rule.
  const dir = await mkdtemp(join(tmpdir(), 'tabfleet-dashboard-'));
  try {
    const rules = exprs.filter((e) => e.where.startsWith('panel'))
      .map((e, i) => `      - record: dashboard:expr_${i}\n        expr: ${JSON.stringify(withVariables(e.expr))}\n`).join('');
    const file = join(dir, 'rules.yml');
    await writeFile(file, `groups:\n  - name: dashboard\n    rules:\n${rules}`);
    const checked = await promtool(['check', 'rules', file]);
    assert.equal(checked.code, 0, `promtool check rules refused the dashboard's expressions:\n${checked.output}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
