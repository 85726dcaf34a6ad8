// The operator on the local cluster with real Postgres: MediaJobs become
// runner Jobs (here a scripted runner process speaking the runner protocol),
// status and the jobs row follow, webhooks go out once per transition, a
// job that cannot run (unknown owner, unresolvable destination, its runner
// Job's name taken) fails once without a runner, the global cap holds and
// admits in order, a restart mid-job creates nothing twice, and stranded
// rows get their MediaJob.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { DEFAULT_RUNNER_RESOURCES, loadOperatorConfig } from '../src/config.js';
import { runnerJobName } from '../src/job-builder.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { TestLocalStorage } from './support/local-storage.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};

interface Hook {
  body: Record<string, unknown>;
  eventId: string | undefined;
}

async function webhookReceiver(): Promise<{ url: string; hooks: Hook[]; server: Server }> {
  const hooks: Hook[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      hooks.push({ body: JSON.parse(text) as Record<string, unknown>, eventId: req.headers['x-mediajobs-event-id'] as string | undefined });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, hooks, server };
}

describe('operator on the local cluster', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let batch: k8s.BatchV1Api;
  let core: k8s.CoreV1Api;
  let kc: k8s.KubeConfig;
  let apiKeyId: string;
  let receiver: Awaited<ReturnType<typeof webhookReceiver>>;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;
  const secretKeys = SecretBox.generateSpec('t1');
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const start = (env: Record<string, string> = {}) => startOperator(loadOperatorConfig({
    DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys, ...storage.settings,
    RUNNER_IMAGE: 'mediajobs/runner:scripted', LEASE_DURATION_SECONDS: '2', LEASE_RENEW_SECONDS: '1',
    WEBHOOK_BACKOFF_MS: '100', MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8', ...env,
  }), { log, storage: storage.access });

  const mediaJob = (name: string, url: string, extra: Partial<MediaJob['spec']> = {}): MediaJob => ({
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
    spec: { ...OPTIONS, url, owner: { apiKeyId }, destination: { type: 'managed' }, ...extra },
  });
  const create = (mj: MediaJob) => custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, body: mj });
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const statusOf = async (name: string) => (await get(name)).status?.status;
  const row = async (id: string) => (await db.pool.query('SELECT * FROM jobs WHERE id = $1', [id])).rows[0] as Record<string, unknown> | undefined;
  /** The Events about a MediaJob, as `kubectl get events` lists them: [type, reason, message]. */
  const eventsOf = async (name: string) => {
    const out = await tc.kubectl(['get', 'events', '--field-selector', `involvedObject.kind=MediaJob,involvedObject.name=${name}`, '-o', 'json']);
    return (JSON.parse(out.stdout) as { items: k8s.CoreV1Event[] }).items.map((e) => [e.type, e.reason, e.message]);
  };

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    db = await createTestDatabase();
    storage = new TestLocalStorage();
    apiKeyId = await insertApiKey(db.pool);
    receiver = await webhookReceiver();
    kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    batch = kc.makeApiClient(k8s.BatchV1Api);
    core = kc.makeApiClient(k8s.CoreV1Api);
  });

  afterEach(async () => {
    await operator?.stop();
    operator = undefined;
  });

  after(async () => {
    receiver.server.close();
    await db.drop();
    await tc.stop();
    storage?.remove();
  });

  it('processes a MediaJob applied without the gateway and records it for the key it names', async () => {
    operator = await start();
    await create(mediaJob('gitops-1', 'http://scripted.invalid/complete?sleepMs=200', { webhookUrl: receiver.url }));
    await eventually(async () => (await statusOf('gitops-1')) === 'Completed', 60_000);
    const mj = await get('gitops-1');
    expect(mj.status).to.include({ step: 'Finished', progress: 100 });
    expect(mj.status!.result).to.include({ fileSize: 1234, actualQuality: '240p' });
    // The row follows the MediaJob's status write, so it may lag it by a moment.
    const r = await eventually(async () => {
      const x = await row(mj.metadata.uid!);
      return x?.status === 'Completed' ? x : undefined;
    });
    expect(r).to.include({ status: 'Completed', api_key_id: apiKeyId, file_size: '1234', actual_quality: '240p', cr_name: 'gitops-1' });
    const mine: Hook[] = await eventually(() => {
      const h = receiver.hooks.filter((x) => x.body.job_id === mj.metadata.uid);
      return h.length >= 2 ? h : undefined;
    });
    expect(mine.map((h) => h.body.type)).to.deep.equal(['job_processing', 'job_completed']);
    expect(mine[1]!.body).to.include({ status: 'completed', key: `videos/${mj.metadata.uid}.mp4`, s3_url: `http://files.test/videos/${mj.metadata.uid}.mp4`, title: 'Scripted' });
    expect(mine[1]!.eventId).to.equal(mine[1]!.body.event_id);
    // The webhook address is a secret: sealed in Postgres, never in the runner's pod.
    expect(String(r!.webhook_url_enc)).to.not.include('127.0.0.1');
    const job = await batch.readNamespacedJob({ name: mj.status!.jobName!, namespace: 'default' });
    expect(JSON.stringify(job.spec!.template)).to.not.include(receiver.url);
    // The CPU limit is the runner's thread budget; without it ffmpeg would size itself by the node.
    expect(job.spec!.template.spec!.containers[0]!.resources).to.deep.equal(DEFAULT_RUNNER_RESOURCES);
    // The configured Job policy (defaults here), and labels that find it from the MediaJob.
    expect(job.spec).to.include({ backoffLimit: 0, activeDeadlineSeconds: 6 * 3600, ttlSecondsAfterFinished: 3600 });
    expect(job.metadata!.labels).to.include({ 'app.kubernetes.io/managed-by': 'mediajobs-operator', 'mediajobs.io/mediajob': 'gitops-1', 'mediajobs.io/job-id': mj.metadata.uid });
    // Its credentials go when it finishes, not only with the MediaJob.
    await eventually(async () => core.readNamespacedSecret({ name: `${mj.status!.jobName!}-credentials`, namespace: 'default' })
      .then(() => false, (err: unknown) => err instanceof k8s.ApiException && err.code === 404), 10_000);
  });

  it('ends a technical failure Failed with job_failed, and a content issue Warning without it', async () => {
    operator = await start();
    await create(mediaJob('fails', 'http://scripted.invalid/fail', { webhookUrl: receiver.url }));
    await create(mediaJob('warns', 'http://scripted.invalid/warning', { webhookUrl: receiver.url }));
    await eventually(async () => (await statusOf('fails')) === 'Failed' && (await statusOf('warns')) === 'Warning', 60_000);
    const failed = await get('fails');
    expect(failed.status).to.include({ errorType: 'error', error: 'Connection error while downloading the media' });
    const warned = await get('warns');
    expect(warned.status).to.include({ errorType: 'warning', error: 'Video is private' });
    expect(await eventually(async () => {
      const x = await row(warned.metadata.uid!);
      return x?.status === 'Warning' ? x : undefined;
    })).to.include({ status: 'Warning', error_type: 'warning' });
    await eventually(() => receiver.hooks.some((h) => h.body.job_id === failed.metadata.uid && h.body.type === 'job_failed'));
    expect(receiver.hooks.filter((h) => h.body.job_id === warned.metadata.uid).map((h) => h.body.type)).to.not.include('job_failed');
  });

  it('fails a MediaJob whose owner key does not exist, once, and deletes it after its TTL like any finished job', async () => {
    // The TTL outlasts the 1.5 s of resyncs watched below, so the object is there to compare.
    operator = await start({ RESYNC_SECONDS: '1' });
    const orphan = mediaJob('orphan', 'http://scripted.invalid/complete', { ttlSecondsAfterFinished: 6 });
    await create({ ...orphan, spec: { ...orphan.spec, owner: { apiKeyId: '00000000-0000-4000-8000-000000000000' } } });
    await eventually(async () => (await statusOf('orphan')) === 'Failed');
    const failed = await get('orphan');
    expect(failed.status).to.include({ reason: 'invalid_owner' });
    // Its conditions say so as for any finished job (kubectl wait --for=condition=Succeeded=False).
    expect(failed.status!.conditions!.find((c) => c.type === 'Succeeded')).to.include({ status: 'False', reason: 'Failed', observedGeneration: failed.metadata.generation });
    expect(failed.status!.conditions!.find((c) => c.type === 'Admitted')).to.include({ status: 'False', reason: 'NotRun' });
    // Resyncs every second pass over it without writing its status again.
    await new Promise((r) => setTimeout(r, 1500));
    const later = await get('orphan');
    expect(later.metadata.resourceVersion, 'no status written again').to.equal(failed.metadata.resourceVersion);
    await eventually(async () => get('orphan').then(() => false, (err: unknown) => err instanceof k8s.ApiException && err.code === 404), 15_000);
  });

  it('fails a MediaJob whose destination cannot be resolved before any runner starts, announcing it once', async () => {
    operator = await start();
    await create(mediaJob('no-dest', 'http://scripted.invalid/complete', {
      webhookUrl: receiver.url, destination: { type: 'saved', provider: 's3', secretName: 'mj-dest-key-gone-s3' },
    }));
    await eventually(async () => (await statusOf('no-dest')) === 'Failed');
    const mj = await get('no-dest');
    expect(mj.status).to.include({
      status: 'Failed', step: 'Queued', errorType: 'error', reason: 'storage_unreachable', error: 'The storage destination is unreachable or rejected the credentials',
    });
    expect(mj.status!.conditions!.find((c) => c.type === 'Succeeded')).to.include({ status: 'False', reason: 'Failed' });
    expect(await eventually(async () => {
      const x = await row(mj.metadata.uid!);
      return x?.status === 'Failed' ? x : undefined;
    })).to.include({ reason: 'storage_unreachable', error_type: 'error' });
    await eventually(() => receiver.hooks.some((h) => h.body.job_id === mj.metadata.uid && h.body.type === 'job_failed'));
    expect((await batch.listNamespacedJob({ namespace: 'default', labelSelector: 'mediajobs.io/mediajob=no-dest' })).items).to.deep.equal([]);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.hooks.filter((h) => h.body.job_id === mj.metadata.uid).map((h) => h.body.type)).to.deep.equal(['job_processing', 'job_failed']);
    const events = await eventually(async () => {
      const e = await eventsOf('no-dest');
      return e.length >= 3 ? e : undefined;
    });
    expect(events).to.deep.equal([
      ['Normal', 'Admitted', `A runner slot is free: runner Job ${runnerJobName(mj)} is created`],
      ['Warning', 'Failed', 'Failed (storage_unreachable): The storage destination is unreachable or rejected the credentials'],
      ['Warning', 'StorageUnreachable', 'The storage destination is unreachable or rejected the credentials'],
    ]);
  });

  it('refuses a manifest naming another job\'s credentials Secret as its destination: Failed before any runner, the other job untouched', async () => {
    operator = await start();
    await create(mediaJob('victim', 'http://scripted.invalid/hang'));
    const victimSecret = await eventually(async () => (await core.listNamespacedSecret({ namespace: 'default', labelSelector: 'mediajobs.io/mediajob=victim' })).items[0]);
    await create(mediaJob('thief', 'http://scripted.invalid/complete', { destination: { type: 'saved', secretName: victimSecret.metadata!.name! } }));
    await eventually(async () => (await statusOf('thief')) === 'Failed');
    expect((await get('thief')).status).to.include({ status: 'Failed', step: 'Queued', reason: 'storage_unreachable' });
    expect((await batch.listNamespacedJob({ namespace: 'default', labelSelector: 'mediajobs.io/mediajob=thief' })).items, 'no runner').to.deep.equal([]);
    expect(await statusOf('victim')).to.equal('Processing');
    await custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name: 'victim' });
  });

  it('fails a MediaJob whose runner Job name is taken by a Job it does not control, and leaves that Job alone', async () => {
    operator = await start();
    const jobId = randomUUID();
    const mj = mediaJob('name-taken', 'http://scripted.invalid/complete', { webhookUrl: receiver.url, jobId });
    const jobName = runnerJobName(mj);
    await batch.createNamespacedJob({ namespace: 'default', body: {
      apiVersion: 'batch/v1', kind: 'Job', metadata: { name: jobName, labels: { app: 'someone-else' } },
      spec: { suspend: true, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'someone-else:1' }] } } },
    } });
    try {
      await create(mj);
      await eventually(async () => (await statusOf('name-taken')) === 'Failed');
      expect((await get('name-taken')).status).to.include({
        reason: 'runner_name_taken', error: `A Job named ${jobName} already exists and is not controlled by this MediaJob`,
      });
      const theirs = await batch.readNamespacedJob({ name: jobName, namespace: 'default' });
      expect(theirs.metadata!.ownerReferences ?? [], 'not adopted').to.deep.equal([]);
      expect(theirs.spec!.suspend).to.equal(true);
      // The credentials Secret made just before goes with the failure, as for any finished job.
      await eventually(async () => core.readNamespacedSecret({ name: `${jobName}-credentials`, namespace: 'default' })
        .then(() => false, (err: unknown) => err instanceof k8s.ApiException && err.code === 404), 10_000);
      await eventually(() => receiver.hooks.some((h) => h.body.job_id === jobId && h.body.type === 'job_failed'));
      expect(await row(jobId)).to.include({ status: 'Failed', reason: 'runner_name_taken' });
    } finally {
      await batch.deleteNamespacedJob({ name: jobName, namespace: 'default' });
    }
  });

  it('keeps at most MAX_RUNNING_JOBS runner Jobs active and admits the rest in order', async () => {
    // No periodic re-check within the test: each admission must come from the wake-up of a finishing job.
    operator = await start({ MAX_RUNNING_JOBS: '1', ADMISSION_RECHECK_SECONDS: '3600' });
    // Created in reverse name order, mostly within one second: creation timestamps tie, and the
    // tie-break (by name) must be the same when a slot frees as when a job asks for one.
    const names = ['cap-c', 'cap-b', 'cap-a'];
    // The order runner Jobs were created in, from a watch (events come in resourceVersion order):
    // timestamps, at one-second resolution, would tie and let a wrong order pass.
    const admitted: string[] = [];
    const watching = await new k8s.Watch(kc).watch('/apis/batch/v1/namespaces/default/jobs', { labelSelector: 'app.kubernetes.io/managed-by=mediajobs-operator' },
      (type: string, job: k8s.V1Job) => {
        const name = job.metadata?.labels?.['mediajobs.io/mediajob'];
        if (type === 'ADDED' && name?.startsWith('cap-') && !admitted.includes(name)) admitted.push(name);
      }, () => undefined);
    for (const n of names) await create(mediaJob(n, 'http://scripted.invalid/complete?sleepMs=400'));
    let maxActive = 0;
    await eventually(async () => {
      const jobs = await batch.listNamespacedJob({ namespace: 'default', labelSelector: 'app.kubernetes.io/managed-by=mediajobs-operator' });
      const capJobs = jobs.items.filter((j) => (j.metadata!.labels!['mediajobs.io/mediajob'] ?? '').startsWith('cap-'));
      const active = capJobs.filter((j) => !j.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True')).length;
      maxActive = Math.max(maxActive, active);
      const done = await Promise.all(names.map(statusOf));
      return done.every((s) => s === 'Completed');
    }, 90_000, 25);
    watching.abort();
    expect(maxActive).to.equal(1);
    // The first to ask found the slot free; the two that waited then go oldest first (same second: by name).
    expect(admitted).to.have.members(names);
    const [, ...waited] = await Promise.all(admitted.map(get));
    const fifo = [...waited].sort((a, b) => Date.parse(a.metadata.creationTimestamp!) - Date.parse(b.metadata.creationTimestamp!)
      || (a.metadata.name! < b.metadata.name! ? -1 : 1));
    expect(admitted.slice(1)).to.deep.equal(fifo.map((mj) => mj.metadata.name));
    // Each waiter says so once (not once per look at the slots), then is admitted.
    for (const name of admitted.slice(1)) {
      const reasons = await eventually(async () => {
        const r = (await eventsOf(name)).map(([, reason]) => reason);
        return r.includes('Completed') ? r : undefined;
      });
      expect(reasons, name).to.deep.equal(['WaitingForSlot', 'Admitted', 'RunnerJobCreated', 'Completed']);
    }
    const first = await eventually(async () => {
      const e = await eventsOf(admitted[0]!);
      return e.length >= 3 ? e : undefined;
    });
    expect(first.map(([, reason]) => reason)).to.deep.equal(['Admitted', 'RunnerJobCreated', 'Completed']);
  });

  it('survives a restart mid-job: one runner Job, one terminal webhook', async () => {
    operator = await start();
    await create(mediaJob('restart', 'http://scripted.invalid/complete?sleepMs=1500', { webhookUrl: receiver.url }));
    await eventually(async () => (await statusOf('restart')) === 'Processing', 60_000);
    await operator.stop();
    operator = await start();
    await eventually(async () => (await statusOf('restart')) === 'Completed', 60_000);
    const mj = await get('restart');
    const jobs = await batch.listNamespacedJob({ namespace: 'default', labelSelector: 'mediajobs.io/mediajob=restart' });
    expect(jobs.items).to.have.length(1);
    const pods = await tc.kubectl(['get', 'pods', '-l', 'mediajobs.io/mediajob=restart', '-o', 'name']);
    expect(pods.stdout.trim().split('\n')).to.have.length(1);
    await eventually(() => receiver.hooks.some((h) => h.body.job_id === mj.metadata.uid && h.body.type === 'job_completed'), 60_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.hooks.filter((h) => h.body.job_id === mj.metadata.uid && h.body.type === 'job_completed')).to.have.length(1);
  });

  it('keeps a finished MediaJob of a manifest without a TTL: applied again, it runs nothing (GitOps)', async () => {
    // The gateway's TTL is short; a manifest's MediaJob is not the gateway's.
    operator = await start({ FINISHED_MEDIAJOB_TTL_SECONDS: '1' });
    const manifest = JSON.stringify(mediaJob('applied-again', 'http://scripted.invalid/complete'));
    await tc.kubectl(['apply', '-f', '-'], { input: manifest });
    await eventually(async () => (await statusOf('applied-again')) === 'Completed', 30_000);
    const first = await get('applied-again');
    await new Promise((r) => setTimeout(r, 3000)); // past the gateway's TTL
    for (let i = 0; i < 3; i++) expect((await tc.kubectl(['apply', '-f', '-'], { input: manifest })).stdout).to.include('unchanged');
    await new Promise((r) => setTimeout(r, 1000));
    const later = await get('applied-again');
    expect(later.metadata.uid, 'the same object, kept').to.equal(first.metadata.uid);
    expect(later.status, 'still the first run\'s status').to.deep.equal(first.status);
    const runs = await batch.listNamespacedJob({ namespace: 'default', labelSelector: 'mediajobs.io/mediajob=applied-again' });
    expect(runs.items, 'one runner Job').to.have.length(1);
    expect((await db.pool.query(`SELECT 1 FROM jobs WHERE cr_name = 'applied-again'`)).rowCount, 'one record').to.equal(1);
  });

  it('deletes a finished MediaJob after its ttlSecondsAfterFinished while Postgres keeps the record', async () => {
    operator = await start();
    await create(mediaJob('short-lived', 'http://scripted.invalid/complete', { ttlSecondsAfterFinished: 1 }));
    const uid = (await get('short-lived')).metadata.uid!;
    await eventually(async () => (await row(uid))?.status === 'Completed', 30_000);
    await eventually(async () => {
      try {
        await get('short-lived');
        return false;
      } catch (err) {
        return err instanceof k8s.ApiException && err.code === 404;
      }
    }, 15_000);
    expect(await row(uid)).to.include({ status: 'Completed', cr_name: 'short-lived' });
    // Its runner Job and credentials Secret went with it (owner references).
    await eventually(async () => (await batch.listNamespacedJob({ namespace: 'default', labelSelector: 'mediajobs.io/mediajob=short-lived' })).items.length === 0);
  });

  it('restores, not reruns, a manifest applied again after its TTL deleted it; a changed spec runs anew (GitOps)', async () => {
    operator = await start();
    const spec = mediaJob('reapplied', 'http://scripted.invalid/complete?sleepMs=1500', { webhookUrl: receiver.url, ttlSecondsAfterFinished: 1 });
    const manifest = JSON.stringify(spec);
    // A pipeline syncing often: ten applies while it runs.
    for (let i = 0; i < 10; i++) await tc.kubectl(['apply', '-f', '-'], { input: manifest });
    const first = await get('reapplied');
    const gone = async () => get('reapplied').then(() => false, (err: unknown) => err instanceof k8s.ApiException && err.code === 404);
    await eventually(async () => (await row(first.metadata.uid!))?.status === 'Completed', 30_000);
    await eventually(gone, 15_000);

    await tc.kubectl(['apply', '-f', '-'], { input: manifest });
    const restored = await eventually(async () => {
      const mj = await get('reapplied');
      return mj.status?.status === 'Completed' ? mj : undefined;
    }, 15_000);
    expect(restored.metadata.uid, 'a new object').to.not.equal(first.metadata.uid);
    const rec = await row(first.metadata.uid!);
    expect(restored.status).to.include({ jobId: first.metadata.uid, status: 'Completed', step: 'Finished', progress: 100 });
    expect(restored.status!.result).to.include({ storageKey: rec!.s3_key });
    expect(restored.status!.restoredTime, 'when it was restored').to.be.a('string');
    expect(restored.status!.conditions!.find((c) => c.type === 'Admitted')).to.include({ status: 'False', reason: 'Restored' });
    expect(restored.status!.conditions!.find((c) => c.type === 'Succeeded')).to.include({ status: 'True' });
    await eventually(async () => (await eventsOf('reapplied')).some(([, reason]) => reason === 'Restored'));
    expect((await batch.listNamespacedJob({ namespace: 'default', labelSelector: 'mediajobs.io/mediajob=reapplied' })).items, 'no runner Job this time').to.deep.equal([]);
    expect((await db.pool.query(`SELECT 1 FROM jobs WHERE cr_name = 'reapplied'`)).rowCount, 'one record').to.equal(1);
    // Its TTL counts from the restore, then it goes again; GET /jobs/{id} still answers from the one record.
    await eventually(gone, 15_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.hooks.filter((h) => h.body.job_id === first.metadata.uid).map((h) => h.body.type), 'one run, one job_completed')
      .to.deep.equal(['job_processing', 'job_completed']);

    // Another spec under the same name is another request: it runs.
    await tc.kubectl(['apply', '-f', '-'], { input: JSON.stringify(mediaJob('reapplied', 'http://scripted.invalid/complete', { ttlSecondsAfterFinished: 60 })) });
    const changed = await eventually(async () => {
      const mj = await get('reapplied');
      return mj.status?.status === 'Completed' ? mj : undefined;
    }, 30_000);
    expect(changed.status!.jobId).to.equal(changed.metadata.uid);
    expect(changed.status!.restoredTime).to.equal(undefined);
    expect((await db.pool.query(`SELECT 1 FROM jobs WHERE cr_name = 'reapplied'`)).rowCount, 'a second record').to.equal(2);
  });

  it('runs a job POST /jobs accepted: its MediaJob is made from the committed row', async () => {
    const id = '6f1c2d3e-4a5b-4c6d-8e7f-001122334455';
    const options = { ...OPTIONS, url: 'http://scripted.invalid/complete' };
    await db.pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, created_at)
       VALUES ($1, $2, $3, 'Pending', 'Queued', 0, $4, 'default', $5, now())`,
      [id, apiKeyId, options.url, JSON.stringify(options), id]);
    expect(buildMediaJob({ jobId: id, apiKeyId, namespace: 'default', options }).metadata.name).to.equal(id);
    operator = await start();
    await eventually(async () => (await row(id))?.status === 'Completed', 30_000);
  });
});
