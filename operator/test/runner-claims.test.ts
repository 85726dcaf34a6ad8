// What a runner reports is a claim (issue 35 item 1): a key in
// status.storedFiles or status.result that the job's runner may not have
// written (lib mayHaveWritten) is never deleted, signed or recorded. On the
// local cluster with the real operator and the scripted runner; the hostile
// status patch is sent with the admin kubeconfig, with the same body and
// subresource a runner's token may patch (the MediaJob's status). Storage
// is local managed storage, whose owner record beside each file says which
// job stored it (docs/adr/0012 "Local managed storage").
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { keyUsage } from '@mediajobs/lib/db/jobs';
import { GROUP, MEDIAJOB_PLURAL, VERSION, jobIdOf, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { SecretBox } from '@mediajobs/lib/secret-box';
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
const LONG = 'http://scripted.invalid/complete?sleepMs=120000';

describe('operator: a runner\'s report is a claim, checked before it is acted on (local cluster)', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let apiKeyId: string;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;
  const secretKeys = SecretBox.generateSpec('t1');
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const start = () => startOperator(loadOperatorConfig({
    DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys, ...storage.settings,
    RUNNER_IMAGE: 'mediajobs/runner:scripted', LEASE_DURATION_SECONDS: '2', LEASE_RENEW_SECONDS: '1',
    MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128',
  }), { log, storage: storage.access });
  const create = async (name: string, url: string, filename?: string) => (await custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
    body: {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
      spec: { ...OPTIONS, url, owner: { apiKeyId }, destination: { type: 'managed' }, ...(filename && { filename }) },
    } satisfies MediaJob,
  })) as MediaJob;
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const row = async (id: string) => (await db.pool.query('SELECT * FROM jobs WHERE id = $1', [id])).rows[0] as Record<string, unknown> | undefined;
  const warnings = async (name: string) => {
    const out = await tc.kubectl(['get', 'events', '--field-selector', `involvedObject.name=${name}`, '-o', 'json']);
    return (JSON.parse(out.stdout) as { items: k8s.CoreV1Event[] }).items.filter((e) => e.reason === 'FileClaimRefused');
  };
  const refusedCount = async () => {
    const m = /^mediajobs_runner_claims_refused_total (\S+)$/m.exec(await operator!.metrics.registry.metrics());
    return m ? Number(m[1]) : undefined;
  };
  /** Another job's stored object in managed storage (a file of the same layout, under another job id, its owner record naming that job). */
  const foreignFile = async () => {
    const id = randomUUID();
    const key = `videos/${id}.mp4`;
    await storage.store(key, 'another user\'s file', id);
    return key;
  };
  const stored = (key: string) => existsSync(join(storage.dir, key));
  const ownerOf = (key: string) => readFileSync(join(storage.dir, '.owners', key), 'utf8');

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
    storage = new TestLocalStorage('mj-claims-storage-');
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });

  beforeEach(() => {
    storage.signed.length = 0;
  });

  afterEach(async () => {
    await operator?.stop();
    operator = undefined;
  });

  after(async () => {
    await db?.drop();
    await tc?.stop();
    storage?.remove();
  });

  it('a cancel does not delete another job\'s object named in status.storedFiles; the job\'s own stored file still goes', async () => {
    operator = await start();
    await create('claims-stored', LONG);
    await eventually(async () => (await get('claims-stored')).status?.status === 'Processing', 60_000);
    const id = (await get('claims-stored')).metadata.uid!;
    const own = `videos/${id}.mp4`;
    const foreign = await foreignFile();
    await storage.store(own, 'stored by this job', jobIdOf(await get('claims-stored')));
    await tc.kubectl(['patch', 'mediajob', 'claims-stored', '--subresource=status', '--type=merge', '-p',
      JSON.stringify({ status: { storedFiles: { [foreign]: 19, [own]: 18 } } })]);
    await eventually(async () => Object.keys((await get('claims-stored')).status?.storedFiles ?? {}).length === 2, 15_000);
    await custom.patchNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name: 'claims-stored', body: { spec: { cancel: true } },
    }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await eventually(async () => (await get('claims-stored')).status?.status === 'CancelledByAdmin', 30_000);
    await eventually(() => !stored(own), 15_000);
    expect(stored(foreign), 'the other job\'s object is still there').to.equal(true);
    await eventually(async () => (await warnings('claims-stored')).length === 1, 15_000);
    expect(await refusedCount()).to.equal(1);
  });

  it('a completion naming another job\'s object fails output_unverified: nothing signed or recorded, one Warning, the counter 1', async () => {
    operator = await start();
    const foreign = await foreignFile();
    await create('claims-result', `http://scripted.invalid/complete?storageKey=${encodeURIComponent(foreign)}`);
    await eventually(async () => (await get('claims-result')).status?.status === 'Failed', 60_000);
    const mj = await get('claims-result');
    expect(mj.status).to.include({ reason: 'output_unverified', category: 'output_unverified', error: 'the runner reported a file it did not store' });
    expect(mj.status?.result).to.equal(undefined);
    const r = await row(mj.metadata.uid!);
    expect(r).to.include({ status: 'Failed', s3_key: null });
    expect(storage.signed, 'no URL signed').to.deep.equal([]);
    expect(stored(foreign), 'the other job\'s object is still there').to.equal(true);
    await eventually(async () => (await warnings('claims-result')).length === 1, 15_000);
    expect(await refusedCount()).to.equal(1);
  });

  it('an end written straight into the status, naming another job\'s object, is refused alike', async () => {
    operator = await start();
    const foreign = await foreignFile();
    await create('claims-direct', LONG);
    await eventually(async () => (await get('claims-direct')).status?.status === 'Processing', 60_000);
    await tc.kubectl(['patch', 'mediajob', 'claims-direct', '--subresource=status', '--type=merge', '-p',
      JSON.stringify({ status: { status: 'Completed', step: 'Finished', progress: 100, result: { storageKey: foreign, fileSize: 19 } } })]);
    await eventually(async () => (await get('claims-direct')).status?.status === 'Failed', 30_000);
    const mj = await get('claims-direct');
    expect(mj.status).to.include({ reason: 'output_unverified', category: 'output_unverified' });
    expect(mj.status?.result).to.equal(undefined);
    expect(await row(mj.metadata.uid!)).to.include({ status: 'Failed', s3_key: null });
    expect(storage.signed, 'no URL signed').to.deep.equal([]);
    expect(stored(foreign)).to.equal(true);
    await eventually(async () => (await warnings('claims-direct')).length === 1, 15_000);
    expect(await refusedCount()).to.equal(1);
  });

  it('a key of the job\'s own layout whose owner record names another job fails output_unverified: nothing signed or recorded, the file and its record untouched', async () => {
    operator = await start();
    // The name this job's filename gives (`videos/taken.mp4`) already holds a file another job stored; the runner reports it without storing anything.
    const other = randomUUID();
    await storage.store('videos/taken.mp4', 'another job\'s file', other);
    await create('claims-taken', `http://scripted.invalid/complete?storageKey=${encodeURIComponent('videos/taken.mp4')}`, 'taken');
    await eventually(async () => (await get('claims-taken')).status?.status === 'Failed', 60_000);
    const mj = await get('claims-taken');
    expect(mj.status).to.include({ reason: 'output_unverified', category: 'output_unverified' });
    expect(mj.status?.result).to.equal(undefined);
    expect(await row(mj.metadata.uid!)).to.include({ status: 'Failed', s3_key: null });
    expect(storage.signed, 'no URL signed').to.deep.equal([]);
    expect(readFileSync(join(storage.dir, 'videos/taken.mp4'), 'utf8')).to.equal('another job\'s file');
    expect(ownerOf('videos/taken.mp4')).to.equal(other);
    await eventually(async () => (await warnings('claims-taken')).length === 1, 15_000);
    expect(await refusedCount()).to.equal(1);
  });

  it('a runner that stores 3000 bytes and reports 999999 is recorded, signed and counted at 3000', async () => {
    operator = await start();
    const before = await keyUsage(db.pool, apiKeyId);
    await create('claims-size', 'http://scripted.invalid/complete?upload=3000&reportedSize=999999');
    await eventually(async () => (await get('claims-size')).status?.status === 'Completed', 60_000);
    const mj = await get('claims-size');
    const key = `videos/${mj.metadata.uid}.mp4`;
    expect(statSync(join(storage.dir, key)).size).to.equal(3000);
    expect(mj.status?.result).to.include({ storageKey: key, fileSize: 3000, uploadedBytes: 3000 });
    expect(Number((await row(mj.metadata.uid!))!.file_size)).to.equal(3000);
    expect([...new Set(storage.signed)], 'the URL signed is the stored file\'s').to.deep.equal([key]);
    expect((await keyUsage(db.pool, apiKeyId)).uploadedBytes - before.uploadedBytes).to.equal(3000);
    expect(await refusedCount() ?? 0, 'a lying size is corrected, not refused').to.equal(0);
  });
});
