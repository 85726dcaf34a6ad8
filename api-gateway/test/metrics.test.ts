// The gateway's /metrics as Prometheus scrapes it, on the metrics listener's
// own port: requests counted by route template (never the URL), method and
// status, with their latency; jobs accepted by how they came; API
// cancellations; rate-limit refusals; the Postgres pool. Label values come
// from fixed sets only. The API's port has no /metrics.
import { expect } from 'chai';
import { newRegistry } from '@mediajobs/lib/metrics';
import { scrape, type Scrape } from '../../test/support/metrics.js';
import { ConfigError } from '@mediajobs/lib/config';
import { loadGatewayConfig } from '../src/config.js';
import { GatewayMetrics } from '../src/metrics.js';
import { inProcessBudget } from '../src/rate-limit.js';
import { startTestGateway, type TestGateway } from './support.js';

describe('api-gateway: metrics', () => {
  let gw: TestGateway;
  let key: string;
  let start: Scrape;

  before(async () => {
    // A limit of 8 per second: a burst of 10 is refused in part.
    gw = await startTestGateway({ metrics: new GatewayMetrics(newRegistry()), rateLimit: inProcessBudget(8) });
    key = (await gw.newKey('metrics')).key;
    start = await scrape(`${gw.metricsUrl!}/metrics`);
  });

  after(async () => {
    await gw?.stop();
  });

  const moved = (now: Scrape, name: string, labels: Record<string, string> = {}) => now.value(name, labels) - start.value(name, labels);
  const pause = () => new Promise((r) => setTimeout(r, 1100)); // a fresh rate-limit window

  it('counts requests by route template, method and status, with a latency histogram, and jobs accepted', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await gw.request('POST', '/jobs', { key, body: { url: `https://media.example/watch?v=${i}` } });
      expect(r.status, r.text).to.equal(201);
      ids.push((r.body as { job_id: string }).job_id);
    }
    await pause();
    for (const id of ids) expect((await gw.request('GET', `/jobs/${id}`, { key })).status).to.equal(200);
    expect((await gw.request('GET', '/jobs/0190a0a0-0000-7000-8000-000000000000', { key })).status).to.equal(404);
    expect((await gw.request('POST', '/jobs', { key, body: { url: 'not a url' } })).status).to.equal(400);
    await pause();
    expect((await gw.request('POST', '/jobs/bulk', { key, body: { urls: ['https://media.example/watch?v=a', 'https://media.example/watch?v=b'] } })).status)
      .to.equal(201);
    expect((await gw.request('POST', `/jobs/${ids[0]}/cancel`, { key })).status).to.equal(200);
    expect((await gw.request('GET', '/jobs', { key: null })).status).to.equal(401);
    expect((await gw.request('GET', '/no/such/path', { key: null })).status).to.equal(404);

    const m = await scrape(`${gw.metricsUrl!}/metrics`);
    const requests = (route: string, method: string, status: string) => moved(m, 'mediajobs_http_requests_total', { route, method, status });
    expect(requests('/jobs', 'POST', '201')).to.equal(3);
    expect(requests('/jobs', 'POST', '400')).to.equal(1);
    expect(requests('/jobs/:id', 'GET', '200')).to.equal(3);
    expect(requests('/jobs/:id', 'GET', '404')).to.equal(1);
    expect(requests('/jobs/bulk', 'POST', '201')).to.equal(1);
    expect(requests('/jobs/:id/cancel', 'POST', '200')).to.equal(1);
    expect(requests('/jobs/*', 'GET', '401'), 'refused before routing: its prefix').to.equal(1);
    expect(requests('unmatched', 'GET', '404')).to.equal(1);
    expect(moved(m, 'mediajobs_http_request_duration_seconds_count', { route: '/jobs/:id', method: 'GET' })).to.equal(4);
    expect(moved(m, 'mediajobs_http_request_duration_seconds_bucket', { route: '/jobs/:id', method: 'GET', le: '+Inf' })).to.equal(4);

    expect(moved(m, 'mediajobs_jobs_accepted_total', { source: 'api' })).to.equal(3);
    expect(moved(m, 'mediajobs_jobs_accepted_total', { source: 'bulk' })).to.equal(2);
    expect(moved(m, 'mediajobs_jobs_finished_total', { status: 'Cancelled', error_category: 'none' })).to.equal(1);

    // No URL, id or key in the text: routes are templates.
    for (const id of ids) expect(m.text).to.not.include(id);
    expect(m.text).to.not.include('/no/such/path');
    expect(m.text).to.not.include(key);
  });

  it('observes every POST /jobs insert statement with the jobs it wrote: a burst is written in as many or fewer', async () => {
    await pause();
    const before = await scrape(`${gw.metricsUrl!}/metrics`);
    const burst = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      gw.request('POST', '/jobs', { key, body: { url: `https://media.example/watch?v=burst${i}` } })));
    expect(burst.map((r) => r.status)).to.deep.equal(Array(8).fill(201));
    const after = await scrape(`${gw.metricsUrl!}/metrics`);
    const grew = (name: string) => after.value(name) - before.value(name);
    expect(grew('mediajobs_job_insert_statement_jobs_sum'), 'every job of the burst, once').to.equal(8);
    expect(grew('mediajobs_job_insert_statement_jobs_count')).to.be.within(1, 8);
  });

  it('counts rate-limit refusals and checks, and a method nobody defined as `other`', async () => {
    await pause();
    const answers = await Promise.all(Array.from({ length: 10 }, () => gw.request('GET', '/jobs', { key })));
    const refused = answers.filter((a) => a.status === 429).length;
    expect(refused).to.be.greaterThan(0);
    expect((await fetch(`${gw.url}/healthz`, { method: 'PROPFIND' })).status).to.equal(404);

    const m = await scrape(`${gw.metricsUrl!}/metrics`);
    expect(moved(m, 'mediajobs_rate_limit_rejections_total', { counter: 'in-process', verdict: 'limited' })).to.equal(refused);
    expect(moved(m, 'mediajobs_http_requests_total', { route: '/jobs/*', method: 'GET', status: '429' })).to.equal(refused);
    expect(moved(m, 'mediajobs_rate_limit_check_duration_seconds_count', { counter: 'in-process' })).to.be.at.least(10);
    expect(moved(m, 'mediajobs_http_requests_total', { method: 'other' })).to.equal(1);
    expect(m.text).to.not.include('PROPFIND');
  });

  it('shows the Postgres pool and Node process metrics, every name prefixed mediajobs_', async () => {
    const m = await scrape(`${gw.metricsUrl!}/metrics`);
    expect(m.value('mediajobs_pg_pool_max_clients', { pool: 'gateway' })).to.equal(10);
    expect(m.find('mediajobs_pg_pool_clients', { pool: 'gateway' }).map((s) => s.labels.state).sort()).to.deep.equal(['idle', 'in_use']);
    expect(m.find('mediajobs_pg_pool_waiting_requests', { pool: 'gateway' })).to.have.length(1);
    expect(m.find('mediajobs_process_cpu_seconds_total')).to.have.length(1);
    expect(m.find('mediajobs_nodejs_eventloop_lag_p99_seconds')).to.have.length(1);
    expect(m.find('mediajobs_nodejs_heap_size_used_bytes')).to.have.length(1);
    // Left out for its cost (docs/metrics.md, Cost): a GC observer on every collection.
    expect(m.samples.filter((s) => s.name.startsWith('mediajobs_nodejs_gc_'))).to.deep.equal([]);
    for (const s of m.samples) expect(s.name).to.match(/^mediajobs_/);
  });

  it('serves /metrics on the metrics port only: the API port answers 404, and the metrics port nothing else', async () => {
    const api = await gw.request('GET', '/metrics', { key: null });
    expect([api.status, api.body]).to.deep.equal([404, { error: 'Not found' }]);
    expect((await gw.request('HEAD', '/metrics', { key: null })).status).to.equal(404);
    expect(gw.metricsUrl).to.be.a('string').and.not.equal(gw.url);
    const served = await fetch(`${gw.metricsUrl!}/metrics`);
    expect(served.status).to.equal(200);
    expect(served.headers.get('content-type')).to.match(/^text\/plain/);
    expect(await served.text()).to.include('mediajobs_http_requests_total');
    for (const path of ['/', '/jobs', '/healthz', '/metrics/x']) {
      const other = await fetch(`${gw.metricsUrl!}${path}`);
      expect([path, other.status, await other.json()]).to.deep.equal([path, 404, { error: 'Not found' }]);
    }
  });

  it('METRICS_PORT is a port, named when it is not one; unset: no listener', () => {
    const base = { DATABASE_URL: 'postgres://x@127.0.0.1/db', SECRET_KEYS: 'k:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=' };
    const defaults = loadGatewayConfig(base);
    expect([defaults.METRICS_PORT, defaults.METRICS_HOST]).to.deep.equal([undefined, '0.0.0.0']);
    expect(loadGatewayConfig({ ...base, METRICS_PORT: '9090' }).METRICS_PORT).to.equal(9090);
    expect(() => loadGatewayConfig({ ...base, METRICS_PORT: '70000' })).to.throw(ConfigError, /METRICS_PORT/);
  });

  it('has no /metrics, and keeps nothing, without metrics', async () => {
    const plain = await startTestGateway();
    try {
      expect((await plain.request('GET', '/metrics', { key: null })).status).to.equal(404);
    } finally {
      await plain.stop();
    }
  });
});
