// A completion's claim check is cheap (issue 35): the destination's client is
// kept between checks, a job's Secret that now names another destination is
// read with a client for that one, and a completion is asked of the storage
// once per attempt (the finish's second check answers from the verdict).
// Real local cluster, real s3rver on loopback.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobResult } from '@mediajobs/lib/mediajob/types';
import { DESTINATION_DATA_KEY } from '@mediajobs/lib/saved-destinations';
import { S3StorageProvider } from '@mediajobs/lib/storage/s3';
import { kubeConfigFor, startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { startS3rver, type RunningS3rver } from '../../test/support/s3rver.js';
import { loadOperatorConfig } from '../src/config.js';
import { DestinationClients } from '../src/destination-clients.js';
import { credentialsSecretName } from '../src/job-builder.js';
import { checkedResult, closeCheckClients, REMOVAL_BUDGET, type RemovalDeps } from '../src/stored-files.js';

const OPTIONS = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
} as const;

describe('operator: the completion\'s claim check keeps its clients and its verdict (local cluster, s3rver)', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let s3: RunningS3rver;
  let bucket: S3StorageProvider;
  let core: k8s.CoreV1Api;
  let custom: k8s.CustomObjectsApi;
  const docFor = (b: string) => ({ provider: 's3', endpoint: s3.endpoint, bucket: b, region: 'us-east-1', access_key: s3.accessKeyId, secret_key: s3.secretAccessKey });

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url))]);
    s3 = await startS3rver({ buckets: ['user', 'other'] });
    const kc = kubeConfigFor(tc.cluster);
    core = kc.makeApiClient(k8s.CoreV1Api);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    bucket = new S3StorageProvider({
      endpoint: s3.endpoint, bucket: 'user', region: 'us-east-1', accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, forcePathStyle: true,
    });
  });
  after(async () => {
    bucket?.destroy();
    await s3?.stop();
    await tc?.stop();
  });

  it('one client per destination; a Secret now naming another destination is read with that one', async () => {
    const key = `videos/${randomUUID()}.mp4`;
    await bucket.upload(key, Readable.from([Buffer.alloc(500)]), { jobId: 'j1' });
    const clients = new DestinationClients(REMOVAL_BUDGET, ['127.0.0.0/8'], {});
    try {
      const seen: unknown[] = [];
      const stat = (ref: string, b: string) => clients.with(ref, docFor(b), async (p) => (seen.push(p), p.stat!(key)));
      expect(await stat('default/a', 'user')).to.deep.equal({ size: 500, jobId: 'j1' });
      expect(await stat('default/b', 'user')).to.deep.equal({ size: 500, jobId: 'j1' });
      expect(seen[1]).to.equal(seen[0]);
      // The Secret of job a rotated to another bucket: its old client is not used for it, and is dropped.
      expect(await stat('default/a', 'other')).to.equal(undefined);
      expect(seen[2]).to.not.equal(seen[0]);
      expect(clients.size).to.equal(1);
    } finally {
      clients.close();
    }
  });

  it('the finish\'s check of the completion asks the storage nothing; another attempt is asked again', async () => {
    const jobId = randomUUID();
    const built = buildMediaJob({ jobId, apiKeyId: randomUUID(), namespace: 'default', options: { ...OPTIONS, url: 'https://media.test/x' }, destination: { type: 'inline', provider: 's3' } });
    const mj = (await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, body: built })) as MediaJob;
    const secret = credentialsSecretName(mj);
    await core.createNamespacedSecret({
      namespace: 'default',
      body: {
        metadata: { name: secret, ownerReferences: [{ apiVersion: mj.apiVersion, kind: 'MediaJob', name: mj.metadata.name!, uid: mj.metadata.uid!, controller: true }] },
        data: { [DESTINATION_DATA_KEY]: Buffer.from(JSON.stringify(docFor('user'))).toString('base64') },
      },
    });
    const key = `videos/${jobId}.mp4`;
    await bucket.upload(key, Readable.from([Buffer.alloc(700)]), { jobId });
    const deps: RemovalDeps = {
      core, log: pino({ level: 'silent' }),
      cfg: loadOperatorConfig({ DATABASE_URL: 'postgres://unused/x', KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: 'unused', RUNNER_IMAGE: 'unused', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8' }),
    };
    try {
      const claimed: MediaJobResult = { storageKey: key, fileSize: 9999, uploadedBytes: 9999 };
      const first = await checkedResult(deps, mj, claimed, async () => undefined);
      expect(first).to.deep.equal({ result: { storageKey: key, fileSize: 700, uploadedBytes: 700 } });
      // Nothing left to ask: the object and the Secret are gone, as they may be by the time the job finishes.
      await bucket.delete(key);
      await core.deleteNamespacedSecret({ name: secret, namespace: 'default' });
      const again = await checkedResult(deps, mj, (first as { result: MediaJobResult }).result, async () => undefined);
      expect(again).to.deep.equal(first);
      // A later attempt's completion is its own claim: checked again, and refused now.
      const next = { ...mj, status: { ...mj.status, attempt: 2 } } as MediaJob;
      expect(await checkedResult(deps, next, claimed, async () => undefined)).to.deep.equal({ refused: [key] });
    } finally {
      closeCheckClients(deps);
    }
  });
});
