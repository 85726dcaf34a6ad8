// A spec the CRD's rules refuse that reached the operator anyway, because
// the CRD the apiserver has lacks them (installed without its
// x-kubernetes-validations and enums, as local mode once did): on the
// local cluster with real kubectl, Postgres and the scripted runner, a
// MediaJob with videoCodec av1, one whose clipEnd comes before its
// clipStart, a job the gateway accepted (its row) with such a clip, and a
// MediaBatch with an invalid option each end once, with reason
// invalid_spec: Failed (the batch: Accepted=False, InvalidSpec), a
// condition naming the field, one Warning Event, no runner Job, no episode,
// the row Failed with the error when there is one, and no retry: the work
// queues count no retry, passes over the objects after (a change, the keys
// added again, an operator restart) write and announce nothing.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { parse as parseYaml, stringify } from 'yaml';
import type { Registry } from '@mediajobs/lib/metrics';
import { SecretBox } from '@mediajobs/lib/secret-box';
import {
  GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, TERMINAL_STATUSES, VERSION, type MediaBatch, type MediaJob, type MediaJobOptions,
} from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { TestLocalStorage } from './support/local-storage.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};
const GATEWAY_JOB = '6f1c2d3e-4a5b-4c6d-8e7f-0000000000aa';

/** A checked-in CRD without what makes the apiserver refuse a bad spec: its CEL rules and its enums. */
function withoutRules(file: string): string {
  const crd = parseYaml(readFileSync(fileURLToPath(new URL(`../../crds/${file}`, import.meta.url)), 'utf8')) as unknown;
  const strip = (node: unknown): void => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(strip);
    const o = node as Record<string, unknown>;
    delete o['x-kubernetes-validations'];
    delete o.enum;
    Object.values(o).forEach(strip);
  };
  strip(crd);
  return stringify(crd);
}

/** A work queue's count of keys put back after a failed pass, and of passes (client-go's retries_total, work_duration count). */
async function queueCounts(registry: Registry, name: 'mediajobs' | 'mediabatches'): Promise<{ retries: number; passes: number }> {
  const text = await registry.metrics();
  const value = (metric: string) => Number(new RegExp(`^${metric}\\{name="${name}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { retries: value('mediajobs_workqueue_retries_total'), passes: value('mediajobs_workqueue_work_duration_seconds_count') };
}

describe('operator: a spec the CRD\'s rules refuse, reaching it through a CRD without them', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let batch: k8s.BatchV1Api;
  let apiKeyId: string;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;
  /** The operator's log lines, as JSON. */
  const lines: { msg?: string; level?: number; jobId?: string; category?: string }[] = [];
  const secretKeys = SecretBox.generateSpec('t1');

  const start = () => startOperator(loadOperatorConfig({
    DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys, ...storage.settings,
    RUNNER_IMAGE: 'mediajobs/runner:scripted', LEADER_ELECTION: 'false', MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8',
  }), {
    log: pino({ level: 'info' }, new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as { msg?: string });
        cb();
      },
    })),
    storage: storage.access,
  });

  const getMj = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const getMb = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, name })) as MediaBatch;
  const eventsOf = async (kind: string, name: string) => {
    const out = await tc.kubectl(['get', 'events', '--field-selector', `involvedObject.kind=${kind},involvedObject.name=${name}`, '-o', 'json']);
    return (JSON.parse(out.stdout) as { items: k8s.CoreV1Event[] }).items.map((e) => [e.type, e.reason, e.message, e.count]);
  };
  const row = async (id: string) => (await db.pool.query('SELECT status, error, reason, error_type FROM jobs WHERE id = $1', [id])).rows[0] as Record<string, unknown> | undefined;
  /** A MediaJob once it has ended, however. */
  const ended = (name: string) => eventually(async () => {
    const mj = await getMj(name);
    return mj.status?.status && TERMINAL_STATUSES.includes(mj.status.status) ? mj : undefined;
  }, 30_000);
  const WANT = {
    'codec-av1': 'spec.videoCodec: must be one of copy, h264, h265, vp9',
    'clip-backwards': 'spec.clipEnd: must be greater than clipStart',
    [GATEWAY_JOB]: 'spec.clipEnd: must be greater than clipStart',
  };
  const BATCH_ERROR = 'spec.options.videoCodec: must be one of copy, h264, h265, vp9';
  /** Each MediaJob as it ended. */
  const endedAs = new Map<string, MediaJob>();

  /** Failed with invalid_spec before anything ran, the field named in the error and the Succeeded condition. */
  async function failsInvalidSpec(name: keyof typeof WANT): Promise<MediaJob> {
    const error = WANT[name];
    const mj = await ended(name);
    endedAs.set(name, mj);
    expect(mj.status, name).to.include({ status: 'Failed', errorType: 'error', reason: 'invalid_spec', category: 'invalid_spec', error, step: 'Queued' });
    expect(mj.status!.jobName, `${name}: never admitted`).to.equal(undefined);
    const conditions = Object.fromEntries(mj.status!.conditions!.map((c) => [c.type, [c.status, c.reason, c.message]]));
    expect(conditions, name).to.deep.equal({
      Admitted: ['False', 'NotRun', 'The job ended before a runner was started'], Running: ['False', 'Finished', ''], Succeeded: ['False', 'Failed', error],
    });
    expect((await batch.listNamespacedJob({ namespace: 'default', labelSelector: `mediajobs.io/mediajob=${name}` })).items, `${name}: no runner Job`).to.deep.equal([]);
    return mj;
  }

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    for (const file of ['mediajob.yaml', 'mediabatch.yaml']) await tc.kubectl(['apply', '-f', tc.manifest(`stripped-${file}`, withoutRules(file))]);
    db = await createTestDatabase();
    storage = new TestLocalStorage();
    apiKeyId = await insertApiKey(db.pool);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    batch = kc.makeApiClient(k8s.BatchV1Api);

    operator = await start();
    const owner = { apiKeyId };
    const manifests = [
      { apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name: 'codec-av1', namespace: 'default' },
        spec: { url: 'http://scripted.invalid/complete', owner, videoCodec: 'av1' } },
      { apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name: 'clip-backwards', namespace: 'default' },
        spec: { url: 'http://scripted.invalid/complete', owner, clipStart: '00:04', clipEnd: '00:02' } },
      { apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaBatch', metadata: { name: 'batch-av1', namespace: 'default' },
        spec: { showUrl: 'https://www.youtube.com/playlist?list=PLabcdefghijkl', owner, options: { videoCodec: 'av1' },
          episodes: [{ url: 'http://scripted.invalid/complete?ep=1' }, { url: 'http://scripted.invalid/complete?ep=2' }] } },
    ];
    // The apiserver takes all three: its CRD has no rule that refuses them.
    const applied = await tc.kubectl(['apply', '-f', '-'], { input: manifests.map((m) => stringify(m)).join('---\n') });
    expect(applied.stdout).to.match(/codec-av1 created/).and.match(/clip-backwards created/).and.match(/batch-av1 created/);
    // A job the gateway accepted, its row holding such a clip (stored before the check existed): the materializer makes its MediaJob.
    await db.pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name, created_at)
       VALUES ($1, $2, $3, 'Pending', 'Queued', 0, $4, 'default', $5, now())`,
      [GATEWAY_JOB, apiKeyId, 'http://scripted.invalid/complete', JSON.stringify({ ...OPTIONS, url: 'http://scripted.invalid/complete', clipStart: '00:04', clipEnd: '00:02' }), GATEWAY_JOB]);
  });

  after(async () => {
    await operator?.stop();
    await db?.drop();
    await tc?.stop();
    storage?.remove();
  });

  it('videoCodec av1 on a MediaJob: Failed, invalid_spec, naming spec.videoCodec; no runner, nothing recorded', async () => {
    const mj = await failsInvalidSpec('codec-av1');
    expect(await row(mj.metadata.uid!), 'a manifest refused is not recorded').to.equal(undefined);
  });

  it('clipEnd before clipStart on a MediaJob: Failed, invalid_spec, naming spec.clipEnd; never run (a whole file can never complete it)', async () => {
    const mj = await failsInvalidSpec('clip-backwards');
    expect(await row(mj.metadata.uid!)).to.equal(undefined);
  });

  it('a job the gateway accepted with such a clip: Failed as the manifests, and its row Failed with the same error', async () => {
    await failsInvalidSpec(GATEWAY_JOB);
    expect(await eventually(async () => {
      const r = await row(GATEWAY_JOB);
      return r?.status === 'Pending' ? undefined : r;
    })).to.deep.equal({ status: 'Failed', error: WANT[GATEWAY_JOB], reason: 'invalid_spec', error_type: 'error' });
  });

  it('an invalid option on a MediaBatch: rejected (Accepted=False, InvalidSpec) naming spec.options.videoCodec; nothing recorded, no episode', async () => {
    const mb = await eventually(async () => {
      const b = await getMb('batch-av1');
      return b.status?.conditions?.some((c) => c.type === 'Accepted') ? b : undefined;
    }, 30_000);
    expect(mb.status!.conditions!.map((c) => [c.type, c.status, c.reason, c.message])).to.deep.equal([['Accepted', 'False', 'InvalidSpec', BATCH_ERROR]]);
    expect(mb.status!.status, 'never processed').to.equal(undefined);
    expect((await db.pool.query('SELECT count(*)::int AS n FROM batches')).rows[0]).to.deep.equal({ n: 0 });
    const jobs = await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL }) as { items: MediaJob[] };
    expect(jobs.items.map((j) => j.metadata.name).sort(), 'no episode MediaJob').to.deep.equal([GATEWAY_JOB, 'clip-backwards', 'codec-av1'].sort());
  });

  it('none is retried: no pass put back, passes after (a change, the keys again, a restart) change nothing; one Warning Event each, logged once', async () => {
    if (!operator || endedAs.size !== 3) throw new Error('the jobs above did not end');
    const mb = await getMb('batch-av1');
    // Never retried: no failed pass was put back, and passes over the objects after change nothing.
    await Promise.all([operator.controller.queue.idle(), operator.batches.queue.idle()]);
    const jobsBefore = await queueCounts(operator.metrics.registry, 'mediajobs');
    const batchesBefore = await queueCounts(operator.metrics.registry, 'mediabatches');
    expect([jobsBefore.retries, batchesBefore.retries]).to.deep.equal([0, 0]);
    // A change to each object (an informer event), and their keys added again.
    for (const [plural, name] of [[MEDIAJOB_PLURAL, 'codec-av1'], [MEDIAJOB_PLURAL, 'clip-backwards'], [MEDIAJOB_PLURAL, GATEWAY_JOB], [MEDIABATCH_PLURAL, 'batch-av1']]) {
      await tc.kubectl(['label', plural!, name!, 'poked=yes']);
    }
    await eventually(async () => (await queueCounts(operator!.metrics.registry, 'mediajobs')).passes >= jobsBefore.passes + 3, 10_000);
    for (let i = 0; i < 3; i++) {
      for (const name of Object.keys(WANT)) operator.controller.queue.add(`default/${name}`);
      operator.batches.queue.add('default/batch-av1');
      await Promise.all([operator.controller.queue.idle(), operator.batches.queue.idle()]);
    }
    const jobsAfter = await queueCounts(operator.metrics.registry, 'mediajobs');
    const batchesAfter = await queueCounts(operator.metrics.registry, 'mediabatches');
    expect(jobsAfter.passes, 'the passes ran').to.be.at.least(jobsBefore.passes + 9);
    expect(batchesAfter.passes).to.be.at.least(batchesBefore.passes + 3);
    expect([jobsAfter.retries, batchesAfter.retries]).to.deep.equal([0, 0]);
    for (const [name, mj] of endedAs) expect((await getMj(name)).status, `${name} unchanged`).to.deep.equal(mj.status);
    expect((await getMb('batch-av1')).status).to.deep.equal(mb.status);

    // And after a restart, which remembers nothing of what it announced.
    await operator.stop();
    operator = await start();
    await Promise.all([operator.controller.queue.idle(), operator.batches.queue.idle()]);
    const restarted = [await queueCounts(operator.metrics.registry, 'mediajobs'), await queueCounts(operator.metrics.registry, 'mediabatches')];
    expect(restarted[0]!.passes, 'each job passed over again').to.be.at.least(3);
    expect(restarted[1]!.passes, 'the batch too').to.be.at.least(1);
    expect(restarted.map((c) => c.retries)).to.deep.equal([0, 0]);
    await operator.stop();
    operator = undefined;
    for (const [name, mj] of endedAs) expect((await getMj(name)).status, `${name} unchanged`).to.deep.equal(mj.status);

    // No runner Job and no episode MediaJob was ever made.
    expect((await batch.listNamespacedJob({ namespace: 'default' })).items.map((j) => j.metadata!.name)).to.deep.equal([]);
    const jobs = await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL }) as { items: MediaJob[] };
    expect(jobs.items.map((j) => j.metadata.name).sort()).to.deep.equal([GATEWAY_JOB, 'clip-backwards', 'codec-av1'].sort());

    // One Warning Event each, written once (the operators flushed theirs when they stopped).
    for (const [name, error] of Object.entries(WANT)) {
      expect(await eventsOf('MediaJob', name), name).to.deep.equal([['Warning', 'Failed', `Failed (invalid_spec): ${error}`, 1]]);
    }
    expect(await eventsOf('MediaBatch', 'batch-av1')).to.deep.equal([['Warning', 'Rejected', `InvalidSpec: ${BATCH_ERROR}`, 1]]);

    // Each job's end logged once (its transition's line), with its category; never as a failure to retry.
    expect(lines.filter((l) => /will retry/.test(l.msg ?? ''))).to.deep.equal([]);
    const failed = lines.filter((l) => l.msg === 'job failed');
    expect(failed.map((l) => l.category)).to.deep.equal(['invalid_spec', 'invalid_spec', 'invalid_spec']);
    expect(new Set(failed.map((l) => l.jobId)).size).to.equal(3);
    expect(lines.filter((l) => l.msg === 'batch rejected; retrying cannot help')).to.have.length(1);
  });
});
