// Cancellation end to end (docs/adr/0013), through every component: a long
// download (a slow loopback source) to an S3 bucket (s3rver) cancelled with
// POST /jobs/{id}/cancel ends Cancelled, its runner and every process it
// started (yt-dlp, ffmpeg) are gone, the bucket holds nothing, and
// job_cancelled reaches the webhook; real kubectl deleting a running and a
// waiting MediaJob ends each CancelledByAdmin and nothing re-creates them;
// the 409 and 404 answers.
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { eventually } from '../../local-cluster/test/support.js';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import { jobProcesses } from '../support/job-processes.js';
import { startMediaServer, type MediaServer } from '../support/media.js';
import { startS3rver, type RunningS3rver } from '../support/s3rver.js';
import { startReceiver, startService, type Receiver, type Service } from './support.js';

describe('end to end: cancellation', function () {
  this.timeout(240_000);
  let svc: Service;
  let media: MediaServer;
  let receiver: Receiver;
  let s3: RunningS3rver;

  before(async () => {
    media = await startMediaServer();
    receiver = await startReceiver();
    s3 = await startS3rver({ buckets: ['inline'] });
    svc = await startService({ operatorEnv: { MAX_RUNNING_JOBS: '1', MATERIALIZE_SAFETY_SECONDS: '1' } });
  });

  after(async () => {
    await svc?.stop();
    await s3?.stop();
    await receiver?.stop();
    await media?.stop();
  });

  const job = async (id: string) => (await svc.api('GET', `/jobs/${id}`)).body;
  const untilStatus = (id: string, statuses: string[], ms = 60_000) =>
    eventually(async () => (statuses.includes((await job(id)).status as string) ? job(id) : undefined), ms, 100);
  const downloading = async (id: string) => {
    await untilStatus(id, ['Processing']);
    await eventually(() => jobProcesses(id).length >= 2, 60_000, 100);
  };
  const mediaJobGone = async (name: string) => {
    const r = await svc.cluster.kubectl(['get', 'mediajob', name, '--ignore-not-found', '-o', 'name']);
    return r.stdout.trim() === '';
  };
  const bucketKeys = async () => {
    const client = new S3Client({
      endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
    try {
      return ((await client.send(new ListObjectsV2Command({ Bucket: 'inline' }))).Contents ?? []).map((o) => o.Key);
    } finally {
      client.destroy();
    }
  };

  it('cancels a download in progress: Cancelled, no process of the job left, nothing in the bucket, job_cancelled delivered', async () => {
    const storage = { provider: 's3', endpoint: s3.endpoint, bucket: 'inline', region: 'us-east-1', access_key: s3.accessKeyId, secret_key: s3.secretAccessKey };
    const created = await svc.api('POST', '/jobs', { url: media.slowUrl(120), webhook_url: receiver.url, storage });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.job_id as string;
    await downloading(id);

    const cancelled = await svc.api('POST', `/jobs/${id}/cancel`);
    expect(cancelled.status).to.equal(200);
    expect(cancelled.body).to.deep.equal(await job(id));
    expect(cancelled.body).to.include({ id, status: 'Cancelled', s3_key: null, s3_url: null });
    await eventually(() => jobProcesses(id).length === 0, 15_000, 100);
    // The MediaJob follows the row; its runner Job and pod are deleted.
    await eventually(async () => (await svc.cluster.kubectl(['get', 'mediajob', id, '-o', 'jsonpath={.status.status}'])).stdout === 'Cancelled', 15_000);
    await eventually(async () => (await svc.cluster.kubectl(['get', 'jobs,pods', '-l', `mediajobs.io/mediajob=${id}`, '-o', 'name'])).stdout.trim() === '', 30_000);
    expect(await bucketKeys(), 'no object, partial or whole').to.deep.equal([]);
    const hook = await eventually(() => receiver.hooks.find((h) => h.body.job_id === id && h.body.type === 'job_cancelled'), 15_000);
    expect(hook.body).to.include({ status: 'cancelled', cancelled_by: 'user', url: media.slowUrl(120) });
    expect(receiver.hooks.filter((h) => h.body.job_id === id).map((h) => h.body.type)).to.not.include.members(['job_failed', 'job_completed']);
    // Nothing changes afterwards: a second cancel is a 409 naming the status.
    const again = await svc.api('POST', `/jobs/${id}/cancel`);
    expect([again.status, again.body]).to.deep.equal([409, { error: 'Job is already finished (status: Cancelled)' }]);
  });

  it('records kubectl delete of a running and of a waiting MediaJob as CancelledByAdmin, and re-creates neither', async () => {
    const running = (await svc.api('POST', '/jobs', { url: media.slowUrl(120) })).body.job_id as string;
    await downloading(running);
    // MAX_RUNNING_JOBS is 1: this one waits, Pending.
    const waiting = (await svc.api('POST', '/jobs', { url: media.slowUrl(120) })).body.job_id as string;
    await eventually(async () => (await svc.cluster.kubectl(['get', 'mediajob', waiting, '-o', 'jsonpath={.metadata.finalizers}'])).stdout
      .includes('mediajobs.io/cancel-on-delete'), 30_000);
    expect((await job(waiting)).status).to.equal('Pending');

    await svc.cluster.kubectl(['delete', 'mediajob', waiting]);
    expect(await untilStatus(waiting, ['CancelledByAdmin'], 10_000)).to.include({ status: 'CancelledByAdmin' });
    await svc.cluster.kubectl(['delete', 'mediajob', running]);
    expect(await untilStatus(running, ['CancelledByAdmin'], 10_000)).to.include({ status: 'CancelledByAdmin' });
    await eventually(() => jobProcesses(running).length === 0, 15_000, 100);
    // The materializer passes every MATERIALIZE_SAFETY_SECONDS (1 s) besides its notifications: give it a few.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await mediaJobGone(waiting), 'the waiting job is not re-created').to.equal(true);
    expect(await mediaJobGone(running), 'the running job is not re-created').to.equal(true);
    expect(jobProcesses(waiting)).to.deep.equal([]);
    expect((await job(waiting)).status).to.equal('CancelledByAdmin');
  });

  it('answers 404 Job not found for an unknown job and another key\'s', async () => {
    const unknown = await svc.api('POST', '/jobs/0190a0a0-0000-7000-8000-000000000000/cancel');
    expect([unknown.status, unknown.body]).to.deep.equal([404, { error: 'Job not found' }]);
    const { key: other } = await createApiKey(svc.db.pool, { name: 'someone-else' });
    const theirs = (await svc.api('POST', '/jobs', { url: media.mp4Url }, other)).body.job_id as string;
    const r = await svc.api('POST', `/jobs/${theirs}/cancel`);
    expect([r.status, r.body]).to.deep.equal([404, { error: 'Job not found' }]);
    await svc.api('POST', `/jobs/${theirs}/cancel`, undefined, other);
  });
});
