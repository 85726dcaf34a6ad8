// On a user's own destination a runner's report is checked against the
// objects (issue 35 item 1): a completion is accepted only for keys whose
// object's metadata (x-amz-meta-mediajobs-job) names this job, and its sizes
// (the row's file_size, the key's usage) are those a HEAD reads back, never
// the runner's. An object belongs to the job its metadata names, whichever
// job's filename gives the same key. The real operator on the local cluster,
// scripted runners uploading with the credentials of their per-job Secret
// to a user's bucket on s3rver, real Postgres.
import { expect } from 'chai';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { keyUsage } from '@mediajobs/lib/db/jobs';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { DESTINATION_DATA_KEY } from '@mediajobs/lib/saved-destinations';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { loadOperatorConfig } from '../src/config.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const BUCKET = 'user-bucket';
const SECRET = 'user-s3';
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};

describe('operator: on a user\'s destination, what a runner reports is checked against the objects\' metadata (local cluster, s3rver)', function () {
  this.timeout(180_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let s3: RunningS3rver;
  let bucket: S3StorageProvider;
  let custom: k8s.CustomObjectsApi;
  let apiKeyId: string;
  let operator: OperatorHandle | undefined;
  const secretKeys = SecretBox.generateSpec('t1');
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const create = async (name: string, url: string, filename?: string) => (await custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
    body: {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
      spec: { ...OPTIONS, url, owner: { apiKeyId }, destination: { type: 'saved', provider: 's3', secretName: SECRET }, ...(filename && { filename }) },
    } satisfies MediaJob,
  })) as MediaJob;
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const row = async (id: string) => (await db.pool.query('SELECT status, s3_key, file_size::float8 AS file_size, result_urls_enc IS NOT NULL AS signed FROM jobs WHERE id = $1', [id])).rows[0] as Record<string, unknown>;
  const ended = async (name: string) => {
    await eventually(async () => ['Completed', 'Failed'].includes((await get(name)).status?.status ?? ''), 90_000);
    return get(name);
  };
  const warnings = async (name: string) => {
    const out = await tc.kubectl(['get', 'events', '--field-selector', `involvedObject.name=${name}`, '-o', 'json']);
    return (JSON.parse(out.stdout) as { items: k8s.CoreV1Event[] }).items.filter((e) => e.reason === 'FileClaimRefused');
  };
  /** An object of another job in the user's bucket, as that job's runner stored it. */
  const foreignObject = async (key: string, body: string) => {
    await bucket.upload(key, Readable.from([Buffer.from(body)]), { jobId: 'another-job-0123456789' });
  };

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
    s3 = await startS3rver({ buckets: [BUCKET] });
    bucket = new S3StorageProvider({
      endpoint: s3.endpoint, bucket: BUCKET, region: 'us-east-1', accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
    });
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    // The user's saved destination, as a Secret of the MediaJob's namespace.
    const doc = { provider: 's3', endpoint: s3.endpoint, bucket: BUCKET, region: 'us-east-1', access_key: s3.accessKeyId, secret_key: s3.secretAccessKey };
    await kc.makeApiClient(k8s.CoreV1Api).createNamespacedSecret({
      namespace: 'default', body: { metadata: { name: SECRET }, data: { [DESTINATION_DATA_KEY]: Buffer.from(JSON.stringify(doc)).toString('base64') } },
    });
    operator = await startOperator(loadOperatorConfig({
      DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys,
      RUNNER_IMAGE: 'mediajobs/runner:scripted', LEASE_DURATION_SECONDS: '2', LEASE_RENEW_SECONDS: '1',
      MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128',
    }), { log, storage: { presign: async (key) => `http://files.test/${key}`, destination: () => ({ provider: 'managed' }) } });
  });

  after(async () => {
    await operator?.stop();
    bucket?.destroy();
    await s3?.stop();
    await db?.drop();
    await tc?.stop();
  });

  it('a runner that stores 3000 bytes and reports 999999 is recorded, signed and counted at 3000', async () => {
    const before = await keyUsage(db.pool, apiKeyId);
    await create('dest-size', 'http://scripted.invalid/complete?upload=3000&reportedSize=999999');
    const mj = await ended('dest-size');
    expect(mj.status?.status).to.equal('Completed');
    const key = `videos/${mj.metadata.uid}.mp4`;
    expect(mj.status?.result).to.include({ storageKey: key, fileSize: 3000, uploadedBytes: 3000 });
    expect(await row(mj.metadata.uid!)).to.deep.equal({ status: 'Completed', s3_key: key, file_size: 3000, signed: true });
    expect((await keyUsage(db.pool, apiKeyId)).uploadedBytes - before.uploadedBytes).to.equal(3000);
  });

  it('a key of the job\'s own layout holding another job\'s object fails output_unverified: nothing signed or recorded, the object untouched', async () => {
    const mj = await create('dest-foreign', 'http://scripted.invalid/complete?sleepMs=1500');
    // The name this job's runner will report (`videos/<job id>.mp4`) already holds an object another job stored.
    const key = `videos/${mj.metadata.uid}.mp4`;
    await foreignObject(key, 'another job\'s file');
    const done = await ended('dest-foreign');
    expect(done.status).to.include({ status: 'Failed', reason: 'output_unverified', category: 'output_unverified' });
    expect(done.status?.result).to.equal(undefined);
    expect(await row(mj.metadata.uid!)).to.include({ status: 'Failed', s3_key: null, signed: false });
    expect(await bucket.headObject(key)).to.deep.equal({ metadata: { 'mediajobs-job': 'another-job-0123456789' }, size: 18 });
    await eventually(async () => (await warnings('dest-foreign')).length === 1, 15_000);
  });

  it('two jobs given one filename: the object belongs to the job its metadata names; the other claiming it fails and the object stays', async () => {
    await create('dest-first', 'http://scripted.invalid/complete?upload=100', 'same');
    const first = await ended('dest-first');
    expect(first.status?.result).to.include({ storageKey: 'videos/same.mp4', fileSize: 100 });
    // The second job's runner names the same key (the name its filename gives) without storing it.
    await create('dest-second', 'http://scripted.invalid/complete', 'same');
    const second = await ended('dest-second');
    expect(second.status).to.include({ status: 'Failed', reason: 'output_unverified' });
    expect(await row(second.metadata.uid!)).to.include({ s3_key: null, signed: false });
    expect(await bucket.headObject('videos/same.mp4')).to.deep.equal({ metadata: { 'mediajobs-job': first.metadata.uid }, size: 100 });
  });

  it('a cancel leaves an object whose metadata names another job in place, and removes the job\'s own', async () => {
    const mj = await create('dest-cancel', 'http://scripted.invalid/complete?sleepMs=120000');
    await eventually(async () => (await get('dest-cancel')).status?.status === 'Processing', 60_000);
    const id = mj.metadata.uid!;
    const own = `videos/${id}.mp4`;
    const foreign = `videos/${id}.en.vtt`;
    await bucket.upload(own, Readable.from([Buffer.from('stored by this job')]), { jobId: id });
    await foreignObject(foreign, 'WEBVTT another job');
    await tc.kubectl(['patch', 'mediajob', 'dest-cancel', '--subresource=status', '--type=merge', '-p',
      JSON.stringify({ status: { storedFiles: { [foreign]: 18, [own]: 18 } } })]);
    await eventually(async () => Object.keys((await get('dest-cancel')).status?.storedFiles ?? {}).length === 2, 15_000);
    await custom.patchNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name: 'dest-cancel', body: { spec: { cancel: true } },
    }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await eventually(async () => (await get('dest-cancel')).status?.status === 'CancelledByAdmin', 30_000);
    await eventually(async () => (await bucket.headObject(own)) === undefined, 15_000);
    expect(await bucket.headObject(foreign), 'the other job\'s object is still there').to.deep.equal({ metadata: { 'mediajobs-job': 'another-job-0123456789' }, size: 18 });
    await eventually(async () => (await warnings('dest-cancel')).length === 1, 15_000);
  });
});
