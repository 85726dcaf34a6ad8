// The retry policy on the local cluster with real Postgres (docs/adr/0018):
// a connection error is tried again with a backoff and the job completes
// on a later attempt with one job_completed and no job_failed; one that
// fails every time ends Failed after RETRY_MAX_ATTEMPTS with one
// job_failed; a content warning, a processing failure and an owner that
// does not exist are never tried again; rate limiting waits the platform's
// longer backoff; an OOM-killed or evicted runner is tried again; a
// cancellation during the wait ends the job at once; an operator restart
// during the wait neither loses the next attempt nor doubles it. Each
// attempt's runner phases (the scripted runner's fixed phaseSeconds) are
// observed once in mediajobs_runner_phase_seconds, the failed attempt's
// included, and never again on later passes or after a restart. A row that
// ended Completed before a restart lost the MediaJob's copy wins over the
// lost runner pod the restarted operator finds: its file stays, nothing runs
// again (ADR 0013).
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { cancelJob } from '@mediajobs/lib/db/jobs';
import { MERGE_PATCH } from '@mediajobs/lib/kube-client';
import type { Registry } from '@mediajobs/lib/metrics';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { runnerJobName } from '../src/job-builder.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { TestLocalStorage } from './support/local-storage.js';
import { PHASE_SECONDS } from './support/scripted-phases.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};
/** mediajobs_runner_phase_seconds' count and sum by phase, as the operator's registry exposes them. */
async function phaseHistogram(registry: Registry): Promise<Record<string, { count: number; sum: number }>> {
  const out: Record<string, { count: number; sum: number }> = {};
  for (const [, part, phase, value] of (await registry.metrics()).matchAll(/^mediajobs_runner_phase_seconds_(count|sum)\{phase="(\w+)"\} (\S+)$/gm)) {
    (out[phase!] ??= { count: 0, sum: 0 })[part as 'count' | 'sum'] = Number(value);
  }
  return out;
}

/** Short waits: 1 s doubling for technical failures, 3 s for the platform's pushback. */
const FAST = { RETRY_BACKOFF_SECONDS: '1', RETRY_PLATFORM_BACKOFF_SECONDS: '3', RETRY_MAX_BACKOFF_SECONDS: '8' };

describe('operator: retry policy on the local cluster', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let batch: k8s.BatchV1Api;
  let apiKeyId: string;
  let hooks: Record<string, unknown>[];
  let hookServer: Server;
  let hookUrl: string;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;
  const secretKeys = SecretBox.generateSpec('t1');
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const start = (env: Record<string, string> = {}) => startOperator(loadOperatorConfig({
    DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys, ...storage.settings,
    RUNNER_IMAGE: 'mediajobs/runner:scripted', LEASE_DURATION_SECONDS: '2', LEASE_RENEW_SECONDS: '1',
    WEBHOOK_BACKOFF_MS: '100', MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8', ...FAST, ...env,
  }), { log, storage: storage.access });

  const mediaJob = (name: string, url: string, extra: Partial<MediaJob['spec']> = {}): MediaJob => ({
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
    spec: { ...OPTIONS, url, owner: { apiKeyId }, destination: { type: 'managed' }, webhookUrl: hookUrl, ...extra },
  });
  const create = async (mj: MediaJob) => (await custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, body: mj,
  })) as MediaJob;
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const statusOf = async (name: string) => (await get(name)).status?.status;
  const ended = (name: string, status: string) => eventually(async () => {
    const mj = await get(name);
    return mj.status?.status === status ? mj : undefined;
  }, 60_000);
  const row = async (id: string) => (await db.pool.query('SELECT * FROM jobs WHERE id = $1', [id])).rows[0] as Record<string, unknown> | undefined;
  const runnerJobs = async (name: string) => (await batch.listNamespacedJob({ namespace: 'default', labelSelector: `mediajobs.io/mediajob=${name}` }))
    .items.map((j) => j.metadata!.name!).sort();
  const hooksOf = (id: string) => hooks.filter((h) => h.job_id === id).map((h) => h.type);
  /** The Events about a MediaJob: [type, reason, message]. */
  const eventsOf = async (name: string) => {
    const out = await tc.kubectl(['get', 'events', '--field-selector', `involvedObject.kind=MediaJob,involvedObject.name=${name}`, '-o', 'json']);
    return (JSON.parse(out.stdout) as { items: k8s.CoreV1Event[] }).items.map((e) => [e.type, e.reason, e.message]);
  };
  /** The runner pod of a job's first attempt once it runs and has reported its first step. */
  const runningPod = async (name: string) => {
    await eventually(async () => (await statusOf(name)) === 'Processing', 60_000);
    const out = await tc.kubectl(['get', 'pods', '-l', `mediajobs.io/mediajob=${name}`, '-o', 'jsonpath={.items[0].metadata.name}']);
    return out.stdout.trim();
  };
  const seconds = (t: string | undefined) => Date.parse(t ?? '') / 1000;

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
    storage = new TestLocalStorage('mj-retry-storage-');
    hooks = [];
    hookServer = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        hooks.push(JSON.parse(text) as Record<string, unknown>);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => hookServer.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}/hook`;
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    batch = kc.makeApiClient(k8s.BatchV1Api);
  });

  afterEach(async () => {
    await operator?.stop();
    operator = undefined;
  });

  after(async () => {
    hookServer?.close();
    await db?.drop();
    await tc?.stop();
    storage?.remove();
  });

  it('tries a connection error again with a doubling backoff: Completed on attempt 3, each attempt on the MediaJob, one job_completed, no job_failed', async () => {
    operator = await start();
    const created = await create(mediaJob('flaky', 'http://scripted.invalid/fail?category=connection_error&times=2'));
    const id = created.metadata.uid!;
    const mj = await ended('flaky', 'Completed');
    expect(mj.status).to.include({ attempt: 3, step: 'Finished', progress: 100 });
    expect(mj.status!.retryAt).to.equal(undefined);
    const attempts = mj.status!.attempts!;
    expect(attempts.map((a) => [a.attempt, a.jobName, a.outcome, a.category, a.retryAfterSeconds])).to.deep.equal([
      [1, runnerJobName(mj), 'Failed', 'connection_error', 1],
      [2, runnerJobName(mj, 2), 'Failed', 'connection_error', 2],
      [3, runnerJobName(mj, 3), 'Completed', undefined, undefined],
    ]);
    expect(attempts[0]).to.include({ reason: 'connection_error', error: 'Connection error while downloading the media' });
    // One runner at a time: each attempt starts after the last one's end and its wait.
    for (const [i, a] of attempts.slice(1).entries()) {
      const before = attempts[i]!;
      expect(seconds(a.startTime) - seconds(before.finishTime), `attempt ${a.attempt}`).to.be.at.least(before.retryAfterSeconds!);
    }
    expect(await runnerJobs('flaky')).to.deep.equal([runnerJobName(mj), runnerJobName(mj, 2), runnerJobName(mj, 3)].sort());
    expect(mj.status!.jobName).to.equal(runnerJobName(mj, 3));
    const r = await eventually(async () => {
      const x = await row(id);
      return x?.status === 'Completed' ? x : undefined;
    });
    expect(r).to.include({ status: 'Completed', error: null, reason: null, file_size: '1234' });
    await eventually(() => hooksOf(id).includes('job_completed'));
    await new Promise((res) => setTimeout(res, 300));
    expect(hooksOf(id)).to.deep.equal(['job_processing', 'job_completed']);
    const events = await eventsOf('flaky');
    expect(events.filter(([, reason]) => reason === 'Retrying')).to.deep.equal([
      ['Warning', 'Retrying', 'Attempt 1 failed (connection_error): attempt 2 in 1 s'],
      ['Warning', 'Retrying', 'Attempt 2 failed (connection_error): attempt 3 in 2 s'],
    ]);
    expect(events.map(([, reason]) => reason)).to.include.members(['Admitted', 'RunnerJobCreated', 'Completed']);
  });

  it('observes each attempt\'s runner phases once, the failed attempt\'s download too, and nothing more on later passes', async () => {
    operator = await start();
    const registry = operator.metrics.registry;
    expect(await phaseHistogram(registry)).to.deep.equal({});
    await create(mediaJob('timed', 'http://scripted.invalid/fail?category=connection_error&times=1'));
    const mj = await ended('timed', 'Completed');
    // Each attempt keeps what its runner reported; the retry cleared the failed one's from the top of the status.
    expect(mj.status!.attempts!.map((a) => [a.attempt, a.outcome, a.phaseSeconds])).to.deep.equal([
      [1, 'Failed', PHASE_SECONDS.failed], [2, 'Completed', PHASE_SECONDS.completed],
    ]);
    expect(mj.status!.phaseSeconds).to.deep.equal(PHASE_SECONDS.completed);
    const want = {
      download: { count: 2, sum: PHASE_SECONDS.failed.download + PHASE_SECONDS.completed.download },
      mux: { count: 1, sum: PHASE_SECONDS.completed.mux },
      upload: { count: 1, sum: PHASE_SECONDS.completed.upload },
    };
    await eventually(async () => JSON.stringify(await phaseHistogram(registry)) === JSON.stringify(want));
    // More passes over the finished MediaJob: a change that enqueues it, and its key added again.
    await custom.patchNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name: 'timed', body: { metadata: { labels: { poked: 'yes' } } },
    }, MERGE_PATCH);
    for (let i = 0; i < 3; i++) operator.controller.queue.add('default/timed');
    await new Promise((res) => setTimeout(res, 1500));
    expect(await phaseHistogram(registry)).to.deep.equal(want);
  });

  it('ends Failed after RETRY_MAX_ATTEMPTS of a failure that keeps coming back, with one job_failed', async () => {
    operator = await start({ RETRY_MAX_ATTEMPTS: '2' });
    const created = await create(mediaJob('hopeless', 'http://scripted.invalid/fail?category=connection_error'));
    const id = created.metadata.uid!;
    const mj = await ended('hopeless', 'Failed');
    expect(mj.status).to.include({ attempt: 2, errorType: 'error', error: 'Connection error while downloading the media', category: 'connection_error' });
    expect(mj.status!.attempts!.map((a) => [a.attempt, a.outcome, a.category, a.retryAfterSeconds])).to.deep.equal([
      [1, 'Failed', 'connection_error', 1],
      [2, 'Failed', 'connection_error', undefined],
    ]);
    expect(mj.status!.conditions!.find((c) => c.type === 'Succeeded')).to.include({ status: 'False', reason: 'Failed' });
    expect(await eventually(async () => {
      const x = await row(id);
      return x?.status === 'Failed' ? x : undefined;
    })).to.include({ status: 'Failed', error_type: 'error' });
    await eventually(() => hooksOf(id).includes('job_failed'));
    await new Promise((res) => setTimeout(res, 300));
    expect(hooksOf(id)).to.deep.equal(['job_processing', 'job_failed']);
    expect(await runnerJobs('hopeless')).to.have.length(2);
  });

  it('never tries again a content warning, a processing failure or an owner that does not exist', async () => {
    operator = await start();
    await create(mediaJob('private', 'http://scripted.invalid/warning?category=private'));
    await create(mediaJob('broken-media', 'http://scripted.invalid/fail?category=processing_failed'));
    await create({ ...mediaJob('nobody', 'http://scripted.invalid/complete'), spec: { ...mediaJob('nobody', 'http://scripted.invalid/complete').spec, owner: { apiKeyId: '00000000-0000-4000-8000-000000000000' } } });
    const warned = await ended('private', 'Warning');
    expect(warned.status!.attempts!.map((a) => [a.attempt, a.outcome, a.category])).to.deep.equal([[1, 'Warning', 'private']]);
    const failed = await ended('broken-media', 'Failed');
    expect(failed.status!.attempts!.map((a) => [a.attempt, a.outcome, a.category])).to.deep.equal([[1, 'Failed', 'processing_failed']]);
    const invalid = await ended('nobody', 'Failed');
    expect(invalid.status).to.include({ reason: 'invalid_owner' });
    expect(invalid.status!.attempts).to.equal(undefined);
    // Given time for a retry that must not come.
    await new Promise((res) => setTimeout(res, 2500));
    expect(await runnerJobs('private')).to.have.length(1);
    expect(await runnerJobs('broken-media')).to.have.length(1);
    expect(await runnerJobs('nobody')).to.have.length(0);
    for (const name of ['private', 'broken-media']) {
      expect((await eventsOf(name)).map(([, reason]) => reason), name).to.not.include('Retrying');
    }
  });

  it('waits the platform backoff after rate limiting, longer than a technical failure\'s', async () => {
    operator = await start();
    await create(mediaJob('throttled', 'http://scripted.invalid/fail?category=rate_limited&times=1'));
    const mj = await ended('throttled', 'Completed');
    const [first, second] = mj.status!.attempts!;
    expect(first).to.include({ outcome: 'Failed', category: 'rate_limited', retryAfterSeconds: 3 });
    expect(second).to.include({ attempt: 2, outcome: 'Completed' });
    expect(seconds(second!.startTime) - seconds(first!.finishTime)).to.be.at.least(3);
  });

  it('tries again a runner OOM-killed and one evicted by its node', async () => {
    operator = await start();
    await create(mediaJob('oom', 'http://scripted.invalid/hang?times=1'));
    await create(mediaJob('evicted', 'http://scripted.invalid/hang?times=1'));
    expect(tc.cluster.kubelet.oomKill('default', await runningPod('oom'))).to.equal(true);
    expect(tc.cluster.kubelet.evict('default', await runningPod('evicted'))).to.equal(true);
    const oom = await ended('oom', 'Completed');
    expect(oom.status!.attempts!.map((a) => [a.attempt, a.outcome, a.category])).to.deep.equal([[1, 'Failed', 'oom_killed'], [2, 'Completed', undefined]]);
    const evicted = await ended('evicted', 'Completed');
    expect(evicted.status!.attempts!.map((a) => [a.attempt, a.outcome, a.category])).to.deep.equal([[1, 'Failed', 'evicted'], [2, 'Completed', undefined]]);
  });

  it('ends a job cancelled during the backoff at once, with no further attempt', async () => {
    operator = await start({ RETRY_BACKOFF_SECONDS: '30', RETRY_MAX_BACKOFF_SECONDS: '60' });
    const created = await create(mediaJob('cancel-wait', 'http://scripted.invalid/fail?category=connection_error'));
    const id = created.metadata.uid!;
    const waiting = await eventually(async () => {
      const mj = await get('cancel-wait');
      return mj.status?.retryAt ? mj : undefined;
    }, 60_000);
    expect(waiting.status).to.include({ status: 'Pending', step: 'Queued', progress: 0, reason: 'retry_scheduled', attempt: 2 });
    expect(waiting.status!.conditions!.find((c) => c.type === 'Admitted')).to.include({ status: 'False', reason: 'WaitingToRetry' });
    // GET /jobs/{id} reads the row: Pending, the reason why, no error.
    expect(await eventually(async () => {
      const x = await row(id);
      return x?.reason === 'retry_scheduled' ? x : undefined;
    })).to.include({ status: 'Pending', step: 'Queued', error: null });
    expect(await cancelJob(db.pool, id, 'Cancelled', apiKeyId)).to.deep.include({ outcome: 'cancelled' });
    const mj = await ended('cancel-wait', 'Cancelled');
    expect(Date.parse(mj.status!.finishTime!)).to.be.below(Date.parse(waiting.status!.retryAt!));
    expect(mj.status!.retryAt).to.equal(undefined);
    await new Promise((res) => setTimeout(res, 500));
    expect(await runnerJobs('cancel-wait')).to.deep.equal([runnerJobName(mj)]);
    await eventually(() => hooksOf(id).includes('job_cancelled'));
    expect(hooksOf(id)).to.not.include('job_failed');
  });

  it('keeps the wait across an operator restart: the next attempt runs once', async () => {
    operator = await start({ RETRY_BACKOFF_SECONDS: '3' });
    const created = await create(mediaJob('restart-wait', 'http://scripted.invalid/fail?category=upload_failed&times=1'));
    const id = created.metadata.uid!;
    await eventually(async () => !!(await get('restart-wait')).status?.retryAt, 60_000);
    await eventually(async () => (await phaseHistogram(operator!.metrics.registry)).download?.count === 1);
    expect(await phaseHistogram(operator.metrics.registry)).to.deep.equal({ download: { count: 1, sum: PHASE_SECONDS.failed.download } });
    await operator.stop();
    operator = await start({ RETRY_BACKOFF_SECONDS: '3' });
    const mj = await ended('restart-wait', 'Completed');
    // The restarted operator observes the attempt it saw end, not the one recorded before it started.
    await eventually(async () => (await phaseHistogram(operator!.metrics.registry)).upload?.count === 1);
    expect(await phaseHistogram(operator.metrics.registry)).to.deep.equal({
      download: { count: 1, sum: PHASE_SECONDS.completed.download }, mux: { count: 1, sum: PHASE_SECONDS.completed.mux },
      upload: { count: 1, sum: PHASE_SECONDS.completed.upload },
    });
    expect(mj.status!.attempts!.map((a) => [a.attempt, a.outcome, a.category])).to.deep.equal([[1, 'Failed', 'upload_failed'], [2, 'Completed', undefined]]);
    expect(await runnerJobs('restart-wait')).to.deep.equal([runnerJobName(mj), runnerJobName(mj, 2)].sort());
    await eventually(() => hooksOf(id).includes('job_completed'));
    await new Promise((res) => setTimeout(res, 300));
    expect(hooksOf(id).filter((t) => t === 'job_completed')).to.have.length(1);
  });

  it('follows a row that ended Completed before a restart lost the MediaJob\'s copy: the file stays, nothing runs again', async () => {
    operator = await start();
    const created = await create(mediaJob('row-first', 'http://scripted.invalid/hang?times=1'));
    const id = created.metadata.uid!;
    const pod = await runningPod('row-first');
    // The runner stored its file and said so, as the real runner does the moment its upload completes ...
    const key = `videos/${id}.mp4`;
    await storage.store(key, 'delivered before the restart', id);
    await tc.kubectl(['patch', 'mediajob', 'row-first', '--subresource=status', '--type=merge', '-p',
      JSON.stringify({ status: { step: 'Uploading', progress: 90, storedFiles: { [key]: 28 } } })]);
    await eventually(async () => (await get('row-first')).status?.storedFiles?.[key] === 28);
    await operator.stop();
    // ... the operator mirrored its completion into the row and died before the MediaJob's write; the runner's pod
    // was lost with the machine (OOM-killed stands in for it: a category the policy retries).
    await db.pool.query(
      `UPDATE jobs SET status = 'Completed', step = 'Finished', progress = 100, s3_key = $2, file_size = 28, started_at = now(), finished_at = now()
        WHERE id = $1`, [id, key]);
    expect(tc.cluster.kubelet.oomKill('default', pod)).to.equal(true);
    operator = await start();
    const mj = await ended('row-first', 'Completed');
    await new Promise((res) => setTimeout(res, 1500));
    expect(existsSync(join(storage.dir, key)), 'the file the row delivered').to.equal(true);
    expect(await runnerJobs('row-first'), 'no second attempt').to.deep.equal([runnerJobName(mj)]);
    expect(mj.status!.result).to.deep.include({ storageKey: key, fileSize: 28 });
    expect(mj.status).to.include({ step: 'Finished', progress: 100 });
    expect(mj.status!.storedFiles).to.equal(undefined);
    expect(mj.status!.conditions!.find((c) => c.type === 'Succeeded')).to.include({ status: 'True' });
    expect(await row(id)).to.include({ status: 'Completed', s3_key: key });
    expect(hooksOf(id)).to.not.include('job_failed');
  });
});
