// Removing the files of a completion that lost to a cancellation talks to
// the job's own destination, an address its user chose, from inside a
// reconcile that awaits it. A backend answering the deletes with a huge or a
// never-ending body must not hang that reconcile nor land in the operator's
// memory: the deletes run within REMOVAL_BUDGET (lib/src/read-budget.ts).
// Real parts: the local cluster holds the MediaJob and its credentials
// Secret, the official S3 client talks to a hostile backend on loopback.
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { expect } from 'chai';
import { pino } from 'pino';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIAJOB_PLURAL, VERSION, jobIdOf, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { DESTINATION_DATA_KEY } from '@mediajobs/lib/saved-destinations';
import { kubeConfigFor, startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { HostileBackend, MiB } from '../../test/support/hostile-backend.js';
import { loadOperatorConfig } from '../src/config.js';
import { credentialsSecretName } from '../src/job-builder.js';
import { removeFiles, resultKeys } from '../src/stored-files.js';

const OPTIONS: MediaJobOptions = {
  url: 'https://media.example/watch?v=removal', format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
  audioOnly: false, downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
};

describe('operator: removing a cancelled job\'s files reads a bounded answer', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;
  let custom: k8s.CustomObjectsApi;
  const backend = new HostileBackend();
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  }));
  const cfg = (allowed = '127.0.0.0/8') => loadOperatorConfig({
    DATABASE_URL: 'postgres://127.0.0.1:1/unused', KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: 'unused',
    RUNNER_IMAGE: 'mediajobs/runner:unused', OUTBOUND_ALLOWED_CIDRS: allowed,
  });

  /** A MediaJob on an inline s3 destination at the hostile backend, with its credentials Secret as the operator writes it. */
  async function jobOnHostileStorage(): Promise<MediaJob> {
    const jobId = randomUUID();
    const built = buildMediaJob({
      jobId, apiKeyId: randomUUID(), namespace: 'default', options: { ...OPTIONS }, destination: { type: 'inline', provider: 's3' },
    });
    const mj = (await custom.createNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, body: built,
    })) as MediaJob;
    const document = { provider: 's3', endpoint: backend.url, bucket: 'media', region: 'us-east-1', access_key: 'AKIAHOSTILE', secret_key: 'secret' };
    await core.createNamespacedSecret({
      namespace: 'default',
      body: {
        metadata: {
          name: credentialsSecretName(mj),
          ownerReferences: [{ apiVersion: mj.apiVersion, kind: 'MediaJob', name: mj.metadata.name!, uid: mj.metadata.uid!, controller: true }],
        },
        data: { [DESTINATION_DATA_KEY]: Buffer.from(JSON.stringify(document)).toString('base64') },
      },
    });
    return mj;
  }

  /** The job's own keys (the operator deletes only keys the job may have written: mayHaveWritten). */
  const result = (mj: MediaJob) => ({ storageKey: `videos/${jobIdOf(mj)}.mp4`, subtitleKey: `videos/${jobIdOf(mj)}.en.vtt` });
  const failures = () => lines.filter((l) => l.msg === 'could not remove files nobody will be told of');

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    const kc = kubeConfigFor(tc.cluster);
    core = kc.makeApiClient(k8s.CoreV1Api);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    await backend.start();
  });
  after(async () => {
    await backend.stop();
    await tc?.stop();
  });

  it('deletes answered with 300 MB error bodies: given up at the byte bound, connections closed, little written, logged', async () => {
    const mj = await jobOnHostileStorage();
    // The objects name the job (their HEAD, read first, is answered as the job's own): the deletes meet the huge answers.
    backend.reset('huge', 500, jobIdOf(mj));
    lines.length = 0;
    await removeFiles({ core, cfg: cfg(), log }, mj, resultKeys(result(mj)), 'a completion that lost to a cancellation');
    // From the backend's first request: loading the S3 SDK is no part of it (seconds on a loaded machine).
    expect(Date.now() - backend.firstRequestAt!).to.be.below(4_000);
    await backend.allClosed(backend.firstRequestAt!, 2_000);
    expect(backend.written).to.be.below(16 * MiB);
    expect(failures()).to.have.length(1);
    expect(failures()[0]).to.include({ cut: 'bytes' });
  });

  it('a backend trickling its answer: the reconcile gets its worker back at the deadline, the connection is cut', async () => {
    const mj = await jobOnHostileStorage();
    backend.reset('trickle', 503, jobIdOf(mj));
    lines.length = 0;
    await removeFiles({ core, cfg: cfg(), log, budget: { maxBytes: 256 * 1024, deadlineMs: 1_000 } }, mj, resultKeys(result(mj)), 'a completion that lost to a cancellation');
    const started = backend.firstRequestAt!;
    expect(Date.now() - started).to.be.within(900, 3_000);
    expect(await backend.allClosed(started, 1_500)).to.be.within(900, 3_000);
    expect(failures()[0]).to.include({ cut: 'deadline' });
  });

  it('an endpoint the operator\'s outbound policy refuses (loopback, with no allowance): not contacted at all, logged', async () => {
    const mj = await jobOnHostileStorage();
    backend.reset('huge');
    lines.length = 0;
    await removeFiles({ core, cfg: cfg(''), log }, mj, resultKeys(result(mj)), 'a completion that lost to a cancellation');
    expect(backend.firstRequestAt).to.equal(undefined);
    expect(failures()).to.have.length(1);
    expect(failures()[0]).to.include({ refused: 'loopback' });
  });
});
