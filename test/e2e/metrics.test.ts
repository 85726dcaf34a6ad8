// Prometheus metrics through the whole system (issue 17 item 1): jobs of
// each outcome (Completed, Failed, a content Warning, Cancelled) run by the
// real operator, runner and local cluster, with one runner slot so that
// jobs wait for admission; after them, /metrics says what happened. The
// gateway and the operator share one registry as in local mode, so the
// gateway's metrics listener (METRICS_PORT, never the API's port) serves
// both sets, and the operator's own listener serves the same. The runners' phase durations reach the
// operator's histogram: download, mux and upload of the completed job, the
// download of every attempt that failed. Every label is from a bounded
// set: no job id, key or URL appears anywhere in the text.
import { expect } from 'chai';
import { eventually } from '../../local-cluster/test/support.js';
import { newRegistry } from '@mediajobs/lib/metrics';
import { scrape, type Scrape } from '../support/metrics.js';
import { startMediaServer, unreachableUrl, type MediaServer } from '../support/media.js';
import { startReceiver, startService, type Receiver, type Service } from './support.js';

describe('end to end: metrics', function () {
  this.timeout(240_000);
  let svc: Service;
  let media: MediaServer;
  let receiver: Receiver;
  let before0: Scrape;
  const ids: string[] = [];
  const outcomes: Record<string, { status: string; error?: string | null }> = {};

  before(async () => {
    media = await startMediaServer();
    receiver = await startReceiver();
    svc = await startService({ operatorEnv: { MAX_RUNNING_JOBS: '1', METRICS_PORT: '0', METRICS_HOST: '127.0.0.1' }, metricsRegistry: newRegistry() });
    before0 = await scrape(`${svc.gateway.metricsUrl!}/metrics`);
  });

  after(async () => {
    await svc?.stop();
    await receiver?.stop();
    await media?.stop();
  });

  const job = async (id: string) => (await svc.api('GET', `/jobs/${id}`)).body;
  const until = (id: string, statuses: string[], ms = 90_000) =>
    eventually(async () => {
      const j = await job(id);
      return statuses.includes(j.status as string) ? j : undefined;
    }, ms, 100);
  const post = async (url: string, extra: Record<string, unknown> = {}) => {
    const r = await svc.api('POST', '/jobs', { url, ...extra });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    ids.push(r.body.job_id as string);
    return r.body.job_id as string;
  };
  const moved = (now: Scrape, name: string, labels: Record<string, string> = {}) => now.value(name, labels) - before0.value(name, labels);

  it('counts jobs accepted, started, waiting and finished by status and error category, and webhook deliveries', async () => {
    // One slot: the three jobs posted together wait their turn, one at a time.
    const done = [await post(media.mp4Url, { webhook_url: receiver.url }), await post(await unreachableUrl()), await post(media.notFoundUrl)];
    for (const id of done) {
      const j = await until(id, ['Completed', 'Failed', 'Warning']);
      outcomes[id] = { status: j.status as string, error: j.error as string | null };
    }
    expect(Object.values(outcomes).map((o) => o.status)).to.deep.equal(['Completed', 'Failed', 'Warning']);
    const cancelled = await post(media.slowUrl(120));
    await until(cancelled, ['Processing']);
    expect((await svc.api('POST', `/jobs/${cancelled}/cancel`)).status).to.equal(200);
    await eventually(async () => (await svc.cluster.kubectl(['get', 'mediajob', cancelled, '-o', 'jsonpath={.status.status}'])).stdout === 'Cancelled', 30_000);
    await eventually(() => receiver.hooks.find((h) => h.body.type === 'job_completed'), 15_000);

    const m = await eventually(async () => {
      const s = await scrape(`${svc.gateway.metricsUrl!}/metrics`);
      return moved(s, 'mediajobs_outbox_deliveries_total', { channel: 'webhook', result: 'delivered' }) >= 2 ? s : undefined;
    }, 15_000, 200);
    expect(moved(m, 'mediajobs_jobs_accepted_total', { source: 'api' })).to.equal(4);
    expect(moved(m, 'mediajobs_jobs_started_total')).to.equal(4);
    const finished = (status: string, category: string) => moved(m, 'mediajobs_jobs_finished_total', { status, error_category: category });
    expect(finished('Completed', 'none')).to.equal(1);
    expect(finished('Failed', 'connection_error') + finished('Failed', 'download_failed'), m.text).to.equal(1);
    expect(finished('Warning', 'unavailable'), m.text).to.equal(1);
    expect(finished('Cancelled', 'none')).to.equal(1);
    expect(moved(m, 'mediajobs_jobs_finished_total')).to.equal(4);
    expect(moved(m, 'mediajobs_delivered_bytes_total')).to.be.greaterThan(1000);

    // Runner phases, once per attempt that reported: the completed job went through all three; the failed
    // one's attempts (it is retried) and the warning stopped in the download; the cancelled one reported nothing.
    const [completedId, failedId] = done;
    const attempts = async (id: string) => (await svc.cluster.kubectl(['get', 'mediajob', id, '-o', 'jsonpath={.status.attempts[*].attempt}']))
      .stdout.trim().split(/\s+/).length;
    const failedAttempts = await attempts(failedId!);
    const phase = (p: string) => ({ count: moved(m, 'mediajobs_runner_phase_seconds_count', { phase: p }), sum: moved(m, 'mediajobs_runner_phase_seconds_sum', { phase: p }) });
    expect(phase('download').count, m.text).to.equal(1 + failedAttempts + 1);
    expect(phase('mux').count).to.equal(1);
    expect(phase('upload').count).to.equal(1);
    expect(phase('download').sum).to.be.greaterThan(0);
    // What the completed job's runner reported is what was observed.
    const reported = JSON.parse((await svc.cluster.kubectl(['get', 'mediajob', completedId!, '-o', 'jsonpath={.status.phaseSeconds}'])).stdout) as Record<string, number>;
    expect(Object.keys(reported).sort()).to.deep.equal(['download', 'mux', 'upload']);
    expect(phase('mux').sum).to.be.closeTo(reported.mux!, 1e-9);
    expect(phase('upload').sum).to.be.closeTo(reported.upload!, 1e-9);

    // Admission: every attempt was admitted once (a retried attempt asks for a slot again, ADR 0018), most after
    // waiting for the one slot; none waits or runs now.
    expect(moved(m, 'mediajobs_admission_wait_time_seconds_count')).to.equal(3 + failedAttempts);
    expect(m.value('mediajobs_admission_max_running_jobs')).to.equal(1);
    await eventually(async () => {
      const now = await scrape(`${svc.gateway.metricsUrl!}/metrics`);
      return now.value('mediajobs_admission_pending_jobs') === 0 && now.value('mediajobs_admission_running_jobs') === 0;
    }, 15_000, 200);

    // The work queue passed over the jobs; webhooks (job_processing, job_completed) delivered, nothing left undelivered.
    expect(moved(m, 'mediajobs_workqueue_adds_total', { name: 'mediajobs' })).to.be.greaterThan(4);
    expect(moved(m, 'mediajobs_workqueue_work_duration_seconds_count', { name: 'mediajobs' })).to.be.greaterThan(4);
    expect(m.find('mediajobs_workqueue_depth', { name: 'mediajobs' })).to.have.length(1);
    expect(m.find('mediajobs_outbox_oldest_undelivered_age_seconds', { channel: 'webhook' })).to.have.length(1);
    expect(m.find('mediajobs_pg_pool_clients').map((s) => s.labels.pool).sort()).to.include.members(['gateway', 'operator']);

    // HTTP: by route template, never by URL.
    expect(moved(m, 'mediajobs_http_requests_total', { route: '/jobs', method: 'POST', status: '201' })).to.equal(4);
    expect(moved(m, 'mediajobs_http_requests_total', { route: '/jobs/:id', method: 'GET', status: '200' })).to.be.greaterThan(4);
    expect(moved(m, 'mediajobs_http_requests_total', { route: '/jobs/:id/cancel', method: 'POST', status: '200' })).to.equal(1);
  });

  it('names no job, key or URL in any label, and the operator\'s own listener serves the same metrics', async () => {
    const m = await scrape(`${svc.gateway.metricsUrl!}/metrics`);
    for (const secret of [...ids, svc.apiKey, svc.apiKeyId, media.baseUrl, '127.0.0.1']) {
      expect(m.text, secret).to.not.include(secret);
    }
    const allowed = new Set(['route', 'method', 'status', 'source', 'error_category', 'counter', 'verdict', 'name', 'pool', 'state', 'channel',
      'result', 'informer', 'trigger', 'phase', 'le', 'quantile', 'type', 'kind', 'space', 'version', 'major', 'minor', 'patch',
      // mediajobs_runner_tool_info: which tool (the status.tools schema's keys, a fixed set), never a job's.
      'tool']);
    for (const label of m.labelNames('mediajobs_')) expect(allowed, `label ${label}`).to.include(label);
    expect((await fetch(`${svc.gateway.url}/metrics`)).status, 'not on the API port').to.equal(404);
    expect(svc.operator.metricsUrl).to.be.a('string');
    const own = await scrape(`${svc.operator.metricsUrl!}/metrics`);
    expect(own.value('mediajobs_jobs_finished_total')).to.equal(m.value('mediajobs_jobs_finished_total'));
    expect((await fetch(`${svc.operator.metricsUrl!}/other`)).status).to.equal(404);
  });
});
