// The monitoring bundle (deploy/monitoring) against what the services serve:
// every mediajobs_ metric that the Grafana dashboard, the PrometheusRule
// alerts and the runbook name is listed (a `# TYPE` line) by a real
// gateway's or a real operator's METRICS_PORT listener, so a
// renamed or dropped metric cannot leave a panel blank or an alert silent.
// Every alert has a severity, a `for`, its annotations, and a runbook_url
// whose section exists in docs/runbook.md.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { pino } from 'pino';
import { parse } from 'yaml';
import { newRegistry } from '@mediajobs/lib/metrics';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { GatewayMetrics } from '../api-gateway/src/metrics.js';
import { startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from '../api-gateway/test/support.js';
import { loadOperatorConfig } from '../operator/src/config.js';
import { startOperator, type OperatorHandle } from '../operator/src/operator.js';
import { scrape } from './support/metrics.js';

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const DASHBOARD = root('deploy/monitoring/grafana-dashboard.json');
const RULES = root('deploy/monitoring/prometheus-rules.yaml');
const RUNBOOK = root('docs/runbook.md');

/**
 * Series the bundle reads that mediajobs does not serve: they come from
 * kube-state-metrics (the operator counts no pod termination reasons), so
 * they are not looked for in /metrics. Any other name without the
 * mediajobs_ prefix fails the test.
 */
const EXTERNAL = new Set([
  'kube_pod_container_status_terminated_reason', // MediajobsRunnerOOMKilled
]);

/** Words of PromQL that look like identifiers without being called like functions. */
const PROMQL_WORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan']);

/**
 * The metric names a PromQL expression (or a Grafana variable query)
 * selects. Label matchers, strings, ranges, grouping label lists and Grafana
 * variables are removed first; what is left that is an identifier not
 * called as a function (rate, sum, histogram_quantile …) nor a keyword is a
 * metric name, with its braces or bare.
 */
function metricNames(expr: string): Set<string> {
  const s = expr
    .replace(/\$\{[^}]*\}|\$\w+/g, ' ') // Grafana variables: ${datasource}, $__rate_interval, $namespace
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""') // strings, which may hold braces and commas (regexes)
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // grouping label lists
    // Grafana's label_values(metric, label) or label_values(label): only the metric is one.
    .replace(/\blabel_values\s*\(\s*(?:([a-zA-Z_:][\w:]*)\s*,\s*)?[a-zA-Z_]\w*\s*\)/g, (_m, metric?: string) => metric ?? ' ');
  const names = new Set<string>();
  for (const [name] of s.matchAll(/(?<![\w.:])[a-zA-Z_:][\w:]*(?![\w:]|\s*\()/g)) {
    if (!PROMQL_WORDS.has(name)) names.add(name);
  }
  return names;
}

/** A Markdown heading's anchor as GitHub makes it. */
function anchorOf(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
}

/** The anchors of `markdown`'s headings, code blocks left out. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const h = !fenced && /^#{1,6}\s+(.+)$/.exec(line);
    if (h) out.add(anchorOf(h[1]!));
  }
  return out;
}

interface Target { expr: string }
interface Panel { type: string; title?: string; datasource?: { type?: string; uid?: string }; targets?: (Target & { datasource?: { uid?: string } })[]; panels?: Panel[] }
interface Dashboard {
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: unknown; datasource?: { uid?: string } }[] };
}
interface Rule { alert?: string; record?: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }
interface RuleFile { apiVersion: string; kind: string; spec: { groups: { name: string; rules: Rule[] }[] } }

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
const rulesText = readFileSync(RULES, 'utf8');
const ruleFile = parse(rulesText) as RuleFile;
const rules = ruleFile.spec.groups.flatMap((g) => g.rules);
const runbook = readFileSync(RUNBOOK, 'utf8');
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');

/** Every expression of the bundle, with where it is. */
function expressions(): [where: string, expr: string][] {
  const out: [string, string][] = [];
  for (const p of panels) for (const t of p.targets ?? []) out.push([`dashboard panel "${p.title}"`, t.expr]);
  for (const v of dashboard.templating.list) {
    if (v.type !== 'query') continue;
    const q = typeof v.query === 'string' ? v.query : (v.query as { query: string }).query;
    out.push([`dashboard variable ${v.name}`, q]);
  }
  for (const r of rules) out.push([`alert ${r.alert ?? r.record}`, r.expr]);
  for (const [, block] of runbook.matchAll(/```promql\n([\s\S]*?)```/g)) out.push(['docs/runbook.md', block!]);
  return out;
}

/** Every name a file mentions with the prefix, in prose and comments too (a description naming a metric to look at). */
const mentioned = (text: string) => new Set([...text.matchAll(/\bmediajobs_[a-z0-9_]+\b/g)].map((m) => m[0]));

describe('monitoring bundle (deploy/monitoring)', function () {
  this.timeout(60_000);

  it('finds the metric names of PromQL expressions, and nothing else', () => {
    expect([...metricNames(
      'histogram_quantile(0.99, sum by (route, le) (rate(a_seconds_bucket{namespace=~"$namespace", pod=~"mj-[a-z]{10}-.+"}[$__rate_interval])))'
      + ' / ignoring (error_category) group_left sum(b_total offset 5m) > bool 1e3 and on (x) c_gauge or max_over_time(d[1h:1m]) unless count(e) without (le)',
    )]).to.have.members(['a_seconds_bucket', 'b_total', 'c_gauge', 'd', 'e']);
    expect([...metricNames('label_values(m_info, namespace)')]).to.deep.equal(['m_info']);
    expect([...metricNames('label_values(namespace)')]).to.deep.equal([]);
  });

  it('has a dashboard on a ${datasource} variable whose every panel queries it, covering each part', () => {
    expect(dashboard.schemaVersion).to.be.within(36, 41);
    const ds = dashboard.templating.list.find((v) => v.name === 'datasource');
    expect(ds, 'datasource variable').to.include({ type: 'datasource', query: 'prometheus' });
    expect(panels.length).to.be.greaterThan(10);
    for (const p of panels) {
      expect(p.datasource?.uid, p.title).to.equal('${datasource}');
      expect(p.targets?.length, p.title).to.be.greaterThan(0);
      for (const t of p.targets!) {
        expect(t.expr, p.title).to.match(/\S/);
        expect(t.datasource?.uid, p.title).to.equal('${datasource}');
      }
    }
    const named = new Set(panels.flatMap((p) => p.targets!.flatMap((t) => [...metricNames(t.expr)])));
    // The panels the dashboard is for: requests, jobs, runner phases, admission, queues, outbox, rate limit, pool, informers.
    expect([...named]).to.include.members([
      'mediajobs_http_requests_total', 'mediajobs_http_request_duration_seconds_bucket', 'mediajobs_jobs_accepted_total',
      'mediajobs_jobs_started_total', 'mediajobs_jobs_finished_total', 'mediajobs_runner_phase_seconds_bucket', 'mediajobs_admission_pending_jobs', 'mediajobs_admission_running_jobs',
      'mediajobs_admission_max_running_jobs', 'mediajobs_admission_wait_time_seconds_bucket', 'mediajobs_workqueue_depth',
      'mediajobs_workqueue_queue_duration_seconds_bucket', 'mediajobs_outbox_oldest_undelivered_age_seconds', 'mediajobs_outbox_deliveries_total',
      'mediajobs_rate_limit_rejections_total', 'mediajobs_pg_pool_clients', 'mediajobs_informer_relists_total',
    ]);
  });

  it('has the alerts, each with a for, a severity, a summary, a description and a runbook section', () => {
    expect(ruleFile).to.include({ apiVersion: 'monitoring.coreos.com/v1', kind: 'PrometheusRule' });
    expect(rules.map((r) => r.alert)).to.have.members([
      'MediajobsJobFailureRateHigh', 'MediajobsAdmissionWaitHigh', 'MediajobsOutboxBacklog', 'MediajobsInformerRelisting',
      'MediajobsNoOperatorLeader', 'MediajobsRunnerOOMKilled', 'MediajobsGateway5xx', 'MediajobsPlatformBreakerOpen', 'MediajobsPlatformCookieUnhealthy',
    ]);
    const sections = anchors(runbook);
    for (const r of rules) {
      expect(r.for, r.alert).to.match(/^\d+[smh]$/);
      expect(r.labels?.severity, r.alert).to.be.oneOf(['warning', 'critical']);
      expect(r.annotations?.summary, r.alert).to.match(/\S/);
      expect(r.annotations?.description, r.alert).to.match(/\S/);
      const url = /^docs\/runbook\.md#(.+)$/.exec(r.annotations?.runbook_url ?? '');
      expect(url, `${r.alert} runbook_url`).to.not.equal(null);
      expect([...sections], `${r.alert}: no heading for #${url![1]} in docs/runbook.md`).to.include(url![1]);
      expect(url![1], r.alert).to.equal(anchorOf(r.alert!));
    }
  });

  describe('against the services', () => {
    let gw: TestGateway;
    let tc: TestCluster;
    let op: OperatorHandle;
    /** Every metric the gateway and the operator list, with its type. */
    const types = new Map<string, string>();

    before(async () => {
      gw = await startTestGateway({ metrics: new GatewayMetrics(newRegistry()) });
      tc = await startClusterWithCrd({ mediaBatch: true });
      op = await startOperator(loadOperatorConfig({
        DATABASE_URL: gw.db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('t1'),
        LEADER_ELECTION: 'false', METRICS_PORT: '0', METRICS_HOST: '127.0.0.1',
      }), { log: pino({ level: 'silent' }), storage: { presign: async (key) => `http://files.test/${key}`, destination: () => ({ provider: 'managed' }) } });
      for (const url of [`${gw.metricsUrl!}/metrics`, `${op.metricsUrl!}/metrics`]) {
        for (const [, name, type] of (await scrape(url)).text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(name!, type!);
      }
    });

    after(async () => {
      await op?.stop();
      await tc?.stop();
      await gw?.stop();
    });

    /** Served as is, or a histogram's (summary's) _bucket, _sum or _count series. */
    const served = (name: string) => {
      if (types.has(name)) return true;
      const [, base, suffix] = /^(.+)_(bucket|sum|count)$/.exec(name) ?? [];
      const type = base && types.get(base);
      return type === 'histogram' || (type === 'summary' && suffix !== 'bucket');
    };

    it('serves every mediajobs_ metric the dashboard, the alerts and the runbook query, and reads no other but the listed external ones', () => {
      expect(types.size, 'metrics listed by the two /metrics').to.be.greaterThan(30);
      const missing: string[] = [];
      let checked = 0;
      for (const [where, expr] of expressions()) {
        for (const name of metricNames(expr)) {
          checked++;
          if (name.startsWith('mediajobs_') ? !served(name) : !EXTERNAL.has(name)) missing.push(`${where}: ${name}`);
        }
      }
      expect(checked).to.be.greaterThan(50);
      expect(missing, 'named but not served (nor a listed external metric)').to.deep.equal([]);
    });

    it('serves every mediajobs_ name the files mention in descriptions, comments and prose', () => {
      const names = new Set([...mentioned(rulesText), ...mentioned(readFileSync(DASHBOARD, 'utf8')), ...mentioned(runbook)]);
      expect(names.size).to.be.greaterThan(15);
      expect([...names].filter((n) => !served(n))).to.deep.equal([]);
    });
  });
});
