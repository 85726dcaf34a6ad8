// Cancellation on the local cluster with real Postgres (docs/adr/0013): a
// row cancelled through the API (cancelJob, heard on its NOTIFY), spec.cancel
// and kubectl delete (real kubectl) of a running or a waiting MediaJob each
// stop the runner (its Job and pod deleted), end the MediaJob and the row
// with the right status and one job_cancelled, and leave the materializer
// nothing to re-create; so does a delete that came before the operator ever saw the
// MediaJob (the finalizer is there from creation); a completion reported
// after the row was cancelled is ignored and its file removed. The status
// rules themselves are pure and tested first.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import pg from 'pg';
import { pino } from 'pino';
import { cancelJob } from '@mediajobs/lib/db/jobs';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { CANCEL_CHANNEL, type CancelNotice } from '@mediajobs/lib/job-cancellation';
import { CancelNotices, FINALIZER, cancellationWanted, cancelledStatus } from '../src/cancellation.js';
import { loadOperatorConfig } from '../src/config.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { TestLocalStorage } from './support/local-storage.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};
const LONG = 'http://scripted.invalid/complete?sleepMs=120000';

const base = (patch: Partial<MediaJob> = {}): MediaJob => ({
  apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name: 'x', namespace: 'default', uid: 'u1', generation: 1 },
  spec: { ...OPTIONS, url: 'http://x.test/v', owner: { apiKeyId: 'k' }, destination: { type: 'managed' } } as MediaJob['spec'], ...patch,
});

describe('operator: cancellation rules (pure)', () => {
  const now = new Date('2026-01-02T03:04:05.678Z');

  it('asks for CancelledByAdmin on spec.cancel or a delete, and follows a cancelled row first', () => {
    expect(cancellationWanted(base(), undefined)).to.equal(undefined);
    expect(cancellationWanted(base({ spec: { ...base().spec, cancel: true } }), undefined)).to.equal('CancelledByAdmin');
    expect(cancellationWanted(base({ metadata: { ...base().metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } }), undefined)).to.equal('CancelledByAdmin');
    expect(cancellationWanted(base({ spec: { ...base().spec, cancel: true } }), 'Cancelled')).to.equal('Cancelled');
  });

  it('ends the status with the row\'s status, keeps step and progress, drops a result, and is stable once written', () => {
    const running = base({ status: {
      status: 'Processing', step: 'Uploading', progress: 70, jobName: 'x-runner', result: { storageKey: 'k' },
      conditions: [{ type: 'Admitted', status: 'True', reason: 'JobCreated', message: 'm', lastTransitionTime: '2026-01-01T00:00:00Z' }],
    } });
    const s = cancelledStatus(running, 'Cancelled', now);
    expect(s).to.include({ status: 'Cancelled', step: 'Uploading', progress: 70, finishTime: '2026-01-02T03:04:05Z', jobId: 'u1', jobName: 'x-runner' });
    expect(s.result).to.equal(undefined);
    expect(s.conditions!.map((c) => [c.type, c.status, c.reason])).to.deep.equal([
      ['Admitted', 'True', 'JobCreated'], ['Running', 'False', 'Finished'], ['Succeeded', 'False', 'Cancelled'],
    ]);
    expect(s.conditions![0]!.lastTransitionTime, 'Admitted keeps its time').to.equal('2026-01-01T00:00:00Z');
    expect(cancelledStatus({ ...running, status: s }, 'Cancelled', new Date())).to.equal(s);
    const waiting = cancelledStatus(base(), 'CancelledByAdmin', now);
    expect(waiting).to.include({ status: 'CancelledByAdmin', step: 'Queued', progress: 0 });
    expect(waiting.conditions![0]).to.include({ type: 'Admitted', status: 'False', reason: 'NotRun' });
  });
});

describe('operator: cancellation notices (real Postgres)', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  before(async () => { db = await createTestDatabase('mj_cancel_notices', { migrate: false }); });
  after(async () => db?.drop());

  const notify = (jobId: string) => db.pool.query('SELECT pg_notify($1, $2)', [CANCEL_CHANNEL, JSON.stringify({ jobId, namespace: 'default', name: `mj-${jobId}`, status: 'Cancelled' })]);
  const listeners = (pool: pg.Pool) => pool.query<{ pid: number }>(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'").then((r) => r.rows.map((row) => row.pid));

  it('replaces a LISTEN connection the server ended, catches up, hears later cancellations, and gives its connection back once on stop', async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 3 });
    const warned: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => warned.push(line) });
    const heard: CancelNotice[] = [];
    let catchUps = 0;
    const notices = new CancelNotices(pool, log, (n) => heard.push(n), () => catchUps++, 50);
    await notices.start();
    try {
      await notify('before');
      await eventually(() => heard.length === 1, 5000, 20);

      const [pid] = await listeners(db.pool);
      expect(pid, 'one LISTEN backend').to.be.a('number');
      await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      await eventually(async () => catchUps === 1 && (await listeners(db.pool)).some((p) => p !== pid), 5000, 20);
      expect(warned.join('')).to.include('cancellation LISTEN connection lost');

      await notify('after');
      await eventually(() => heard.length === 2, 5000, 20);
      expect(heard.map((n) => n.jobId)).to.deep.equal(['before', 'after']);
    } finally {
      await notices.stop();
    }
    // Every client back in the pool, none twice: end() settles, and nothing listens any more.
    await pool.end();
    expect(await listeners(db.pool)).to.deep.equal([]);
    expect(warned.join('')).to.not.include('already been released');
  });
});

describe('operator: cancellation on the local cluster', function () {
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
    WEBHOOK_BACKOFF_MS: '100', MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128', ...env,
  }), { log, storage: storage.access });

  const mediaJob = (name: string, url: string, extra: Partial<MediaJob['spec']> = {}): MediaJob => ({
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
    spec: { ...OPTIONS, url, owner: { apiKeyId }, destination: { type: 'managed' }, webhookUrl: hookUrl, ...extra },
  });
  const create = async (mj: MediaJob) => (await custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, body: mj,
  })) as MediaJob;
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const gone = (name: string) => get(name).then(() => false, (err: unknown) => err instanceof k8s.ApiException && err.code === 404);
  const statusOf = async (name: string) => (await get(name)).status?.status;
  const row = async (id: string) => (await db.pool.query('SELECT * FROM jobs WHERE id = $1', [id])).rows[0] as Record<string, unknown> | undefined;
  const runnerObjects = async (name: string) => {
    const jobs = await batch.listNamespacedJob({ namespace: 'default', labelSelector: `mediajobs.io/mediajob=${name}` });
    const pods = await tc.kubectl(['get', 'pods', '-l', `mediajobs.io/mediajob=${name}`, '-o', 'name']);
    return jobs.items.length + pods.stdout.trim().split('\n').filter(Boolean).length;
  };
  const hooksOf = (id: string) => hooks.filter((h) => h.job_id === id).map((h) => h.type);
  /** The row POST /jobs commits: what the materializer creates the MediaJob from (`mj`, as it builds it). */
  const gatewayJob = async (url: string, webhookUrl?: string) => {
    const id = randomUUID();
    const options = { ...OPTIONS, url };
    await db.pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, webhook_url_enc, cr_namespace, cr_name, created_at)
       VALUES ($1, $2, $3, 'Pending', 'Queued', 0, $4, $5, 'default', $6, now())`,
      [id, apiKeyId, url, JSON.stringify(options), webhookUrl ? new SecretBox(secretKeys).seal(webhookUrl, sealedAt.jobWebhook(id)) : null, id]);
    return { id, mj: buildMediaJob({ jobId: id, apiKeyId, namespace: 'default', options }) };
  };
  const running = async (name: string) => {
    await eventually(async () => (await statusOf(name)) === 'Processing', 60_000);
    const mj = await get(name);
    expect(mj.metadata.finalizers, 'an unfinished MediaJob holds the finalizer').to.include(FINALIZER);
    expect(await runnerObjects(name)).to.equal(2);
    return mj;
  };

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
    storage = new TestLocalStorage('mj-cancel-storage-');
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

  it('stops the runner of a job cancelled through the API: Job and pod deleted, MediaJob Cancelled, one job_cancelled', async () => {
    operator = await start();
    await create(mediaJob('api-cancel', LONG));
    const mj = await running('api-cancel');
    const id = mj.metadata.uid!;
    expect(await cancelJob(db.pool, id, 'Cancelled', apiKeyId)).to.deep.equal({ outcome: 'cancelled', previous: 'Processing' });
    await eventually(async () => (await statusOf('api-cancel')) === 'Cancelled', 30_000);
    await eventually(async () => (await runnerObjects('api-cancel')) === 0, 30_000);
    const after = await get('api-cancel');
    expect(after.metadata.finalizers ?? []).to.not.include(FINALIZER);
    expect(after.status!.conditions!.find((c) => c.type === 'Succeeded')).to.include({ status: 'False', reason: 'Cancelled' });
    expect(await row(id)).to.include({ status: 'Cancelled' });
    await eventually(() => hooksOf(id).includes('job_cancelled'), 15_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(hooksOf(id)).to.deep.equal(['job_processing', 'job_cancelled']);
  });

  it('cancels on spec.cancel: CancelledByAdmin, runner gone; a finished job ignores it', async () => {
    operator = await start();
    await create(mediaJob('spec-cancel', LONG));
    const id = (await running('spec-cancel')).metadata.uid!;
    await tc.kubectl(['patch', 'mediajob', 'spec-cancel', '--type=merge', '-p', '{"spec":{"cancel":true}}']);
    await eventually(async () => (await statusOf('spec-cancel')) === 'CancelledByAdmin', 30_000);
    await eventually(async () => (await runnerObjects('spec-cancel')) === 0, 30_000);
    expect(await row(id)).to.include({ status: 'CancelledByAdmin' });
    await eventually(() => hooksOf(id).includes('job_cancelled'), 15_000);
    expect(hooks.find((h) => h.job_id === id && h.type === 'job_cancelled')).to.include({ cancelled_by: 'admin', status: 'cancelled' });

    await create(mediaJob('spec-late', 'http://scripted.invalid/complete'));
    await eventually(async () => (await statusOf('spec-late')) === 'Completed', 60_000);
    await tc.kubectl(['patch', 'mediajob', 'spec-late', '--type=merge', '-p', '{"spec":{"cancel":true}}']);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await statusOf('spec-late')).to.equal('Completed');
  });

  it('records a kubectl delete of a running MediaJob as CancelledByAdmin before letting it go, and stops its runner', async () => {
    operator = await start();
    await create(mediaJob('deleted-running', LONG));
    const id = (await running('deleted-running')).metadata.uid!;
    await tc.kubectl(['delete', 'mediajob', 'deleted-running', '--wait=false']);
    await eventually(() => gone('deleted-running'), 30_000);
    expect(await row(id)).to.include({ status: 'CancelledByAdmin' });
    await eventually(async () => (await runnerObjects('deleted-running')) === 0, 30_000);
    await eventually(() => hooksOf(id).includes('job_cancelled'), 15_000);
  });

  it('records a kubectl delete of a waiting (Pending) MediaJob as CancelledByAdmin, and the materializer does not re-create it', async () => {
    operator = await start({ MAX_RUNNING_JOBS: '1', ADMISSION_RECHECK_SECONDS: '3600' });
    await create(mediaJob('holder', LONG));
    await running('holder');
    const { id } = await gatewayJob(LONG); // its MediaJob is the running operator's to create
    await eventually(async () => {
      const mj = await get(id);
      return mj.status?.status === 'Pending' && (mj.metadata.finalizers ?? []).includes(FINALIZER);
    }, 30_000);
    await tc.kubectl(['delete', 'mediajob', id]);
    expect(await gone(id)).to.equal(true);
    expect(await row(id)).to.include({ status: 'CancelledByAdmin' });
    // The materializer passes at start, on every NOTIFY and every second here (MATERIALIZE_SAFETY_SECONDS): some have run.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await gone(id), 'not re-created by the materializer').to.equal(true);
    expect(await runnerObjects(id)).to.equal(0);
    await tc.kubectl(['delete', 'mediajob', 'holder']);
  });

  it('records a delete that came before the operator\'s first pass as CancelledByAdmin, and the materializer does not re-create it', async () => {
    const { id, mj } = await gatewayJob(LONG, hookUrl);
    const made = await create(mj);
    expect(made.metadata.finalizers, 'held from its creation, before any operator pass').to.deep.equal([FINALIZER]);
    await tc.kubectl(['delete', 'mediajob', id, '--wait=false']);
    expect((await get(id)).metadata.deletionTimestamp, 'the delete waits for the operator').to.be.a('string');

    operator = await start();
    await eventually(() => gone(id), 30_000);
    expect(await row(id)).to.include({ status: 'CancelledByAdmin', step: 'Queued' });
    await eventually(() => hooksOf(id).includes('job_cancelled'), 15_000);
    expect(hooks.find((h) => h.job_id === id)).to.include({ status: 'cancelled', cancelled_by: 'admin', url: LONG });
    // The materializer passes at start, on every NOTIFY and every second here (MATERIALIZE_SAFETY_SECONDS): some have run.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await gone(id), 'not re-created by the materializer').to.equal(true);
    expect(await row(id)).to.include({ status: 'CancelledByAdmin' });
    expect(await runnerObjects(id)).to.equal(0);
    expect(hooksOf(id)).to.deep.equal(['job_cancelled']);
  });

  it('ignores a completion reported after the row was cancelled, and removes its file', async () => {
    operator = await start();
    await create(mediaJob('late-complete', LONG));
    const id = (await running('late-complete')).metadata.uid!;
    const key = `videos/${id}.mp4`;
    await storage.store(key, 'delivered after the cancellation', id);
    // Cancelled, its notice not yet acted on, when the runner reports its delivery (as the real runner's final patch).
    await db.pool.query(`UPDATE jobs SET status = 'Cancelled', finished_at = now() WHERE id = $1`, [id]);
    await tc.kubectl(['patch', 'mediajob', 'late-complete', '--subresource=status', '--type=merge', '-p',
      JSON.stringify({ status: { step: 'Finished', progress: 100, result: { storageKey: key, fileSize: 32 } } })]);
    await eventually(async () => (await statusOf('late-complete')) === 'Cancelled', 30_000);
    await eventually(() => !existsSync(join(storage.dir, key)), 15_000);
    await eventually(async () => (await get('late-complete')).status!.result === undefined, 15_000);
    await eventually(async () => (await runnerObjects('late-complete')) === 0, 30_000);
    expect(await row(id)).to.include({ status: 'Cancelled', s3_key: null });
    await new Promise((r) => setTimeout(r, 500));
    expect(hooksOf(id)).to.not.include('job_completed');
  });
});
