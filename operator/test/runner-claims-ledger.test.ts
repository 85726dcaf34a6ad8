// On managed storage on S3 a runner's report is checked against the grant
// ledger (issue 35 items 1, 2 and 4): a completion is accepted only for keys
// this job's grant was the last to store, and its sizes (the row's
// file_size, the key's usage) are the ledger's, never the runner's. The real
// operator on the local cluster, scripted runners uploading through a real
// grant (the gateway's router over the broker) to s3rver, real Postgres.
import { expect } from 'chai';
import express from 'express';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { grantJobState, keyUsage } from '@mediajobs/lib/db/jobs';
import { createLogger } from '@mediajobs/lib/logger';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { managedKeyPrefix } from '@mediajobs/lib/storage/types';
import { UploadGrantBroker, UploadGrantKeys } from '@mediajobs/lib/storage/upload-grants';
import { uploadGrantsRouter } from '../../api-gateway/src/routes/upload-grants.js';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { loadOperatorConfig } from '../src/config.js';
import { runnerDocuments } from '../src/managed-storage.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const BUCKET = 'managed';
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};

describe('operator: on managed S3, what a runner reports is checked against the grant ledger (local cluster, s3rver)', function () {
  this.timeout(180_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let s3: RunningS3rver;
  let bucket: S3StorageProvider;
  let gateway: Server;
  let custom: k8s.CustomObjectsApi;
  let apiKeyId: string;
  let operator: OperatorHandle | undefined;
  let signed: string[];
  const secretKeys = SecretBox.generateSpec('t1');
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const start = (grantUrl: string) => {
    const cfg = loadOperatorConfig({
      DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys,
      MANAGED_STORAGE: 's3', MANAGED_S3_ENDPOINT: s3.endpoint, MANAGED_S3_BUCKET: BUCKET,
      MANAGED_S3_ACCESS_KEY: s3.accessKeyId, MANAGED_S3_SECRET_KEY: s3.secretAccessKey, UPLOAD_GRANT_URL: grantUrl,
      RUNNER_IMAGE: 'mediajobs/runner:scripted', LEASE_DURATION_SECONDS: '2', LEASE_RENEW_SECONDS: '1',
      MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128',
    });
    return startOperator(cfg, {
      log,
      storage: {
        presign: async (key) => {
          signed.push(key);
          return `http://files.test/${key}`;
        },
        // The operator's own runner documents: an upload grant per attempt.
        destination: runnerDocuments(cfg),
      },
    });
  };
  const create = async (name: string, url: string, filename?: string) => (await custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
    body: {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
      spec: { ...OPTIONS, url, owner: { apiKeyId }, destination: { type: 'managed' }, ...(filename && { filename }) },
    } satisfies MediaJob,
  })) as MediaJob;
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const row = async (id: string) => (await db.pool.query('SELECT status, s3_key, file_size::float8 AS file_size FROM jobs WHERE id = $1', [id])).rows[0] as Record<string, unknown>;
  const ended = async (name: string) => {
    await eventually(async () => ['Completed', 'Failed'].includes((await get(name)).status?.status ?? ''), 90_000);
    return get(name);
  };

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
    s3 = await startS3rver({ buckets: [BUCKET] });
    bucket = new S3StorageProvider({
      name: 'managed', endpoint: s3.endpoint, bucket: BUCKET, region: 'us-east-1',
      accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
    });
    // The gateway's grant route, as server.ts wires it.
    const app = express();
    const broker = new UploadGrantBroker({ store: bucket, keys: new UploadGrantKeys(secretKeys), jobs: (id) => grantJobState(db.pool, id), ledger: new PgGrantLedger(db.pool) });
    app.use(uploadGrantsRouter({ broker, logger: createLogger('api-gateway', 'silent') }));
    gateway = createServer(app);
    await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    operator = await start(`http://127.0.0.1:${(gateway.address() as AddressInfo).port}`);
  });

  beforeEach(() => {
    signed = [];
  });

  after(async () => {
    await operator?.stop();
    gateway?.closeAllConnections();
    await new Promise((resolve) => gateway?.close(resolve));
    bucket?.destroy();
    await s3?.stop();
    await db?.drop();
    await tc?.stop();
  });

  it('a runner that stores 3000 bytes and reports 999999 is recorded, signed and counted at 3000', async () => {
    const before = await keyUsage(db.pool, apiKeyId);
    await create('ledger-size', 'http://scripted.invalid/complete?upload=3000&reportedSize=999999');
    const mj = await ended('ledger-size');
    expect(mj.status?.status).to.equal('Completed');
    const key = `${managedKeyPrefix(apiKeyId)}/videos/${mj.metadata.uid}.mp4`;
    expect(mj.status?.result).to.include({ storageKey: key, fileSize: 3000, uploadedBytes: 3000 });
    expect(await row(mj.metadata.uid!)).to.deep.equal({ status: 'Completed', s3_key: key, file_size: 3000 });
    expect((await keyUsage(db.pool, apiKeyId)).uploadedBytes - before.uploadedBytes).to.equal(3000);
    expect(signed).to.deep.equal([key]);
  });

  it('a key of the job\'s own layout that its grant never stored fails output_unverified, nothing signed', async () => {
    await create('ledger-unstored', 'http://scripted.invalid/complete');
    const mj = await ended('ledger-unstored');
    expect(mj.status).to.include({ status: 'Failed', reason: 'output_unverified', category: 'output_unverified' });
    expect(mj.status?.result).to.equal(undefined);
    expect(await row(mj.metadata.uid!)).to.include({ status: 'Failed', s3_key: null });
    expect(signed).to.deep.equal([]);
  });

  it('two jobs of one key given one filename: the file is the job whose grant stored it; the other claiming it fails and the file stays', async () => {
    await create('ledger-first', 'http://scripted.invalid/complete?upload=100', 'same');
    const first = await ended('ledger-first');
    const key = `${managedKeyPrefix(apiKeyId)}/videos/same.mp4`;
    expect(first.status?.result).to.include({ storageKey: key, fileSize: 100 });
    // The second job's runner names the same key (the name its filename gives) without storing it.
    await create('ledger-second', 'http://scripted.invalid/complete', 'same');
    const second = await ended('ledger-second');
    expect(second.status).to.include({ status: 'Failed', reason: 'output_unverified' });
    expect(signed).to.deep.equal([key]);
    expect((await bucket.headObject(key))?.size, 'the first job\'s file is still there').to.equal(100);
  });
});
