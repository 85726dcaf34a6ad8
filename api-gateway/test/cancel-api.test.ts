// POST /jobs/{id}/cancel, POST /batch/{id}/cancel and the admin CLI's
// cancel-job on real Postgres: the exact answers a client gets (200 with
// the job as GET /jobs/{id} shows it, 409 and 404 with their messages), and
// what a cancellation leaves in the rows and the outbox.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { insertBatch, type NewBatch } from '@mediajobs/lib/db/batches';
import { runAdmin } from '../src/admin.js';
import { startTestGateway, type TestGateway } from './support.js';

const shared = {
  format: 'm4a', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: true,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
} as NewBatch['options'];

describe('api-gateway: cancelling jobs and batches', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let key: { id: string; key: string };

  before(async () => {
    gw = await startTestGateway();
    key = await gw.newKey('canceller');
  });
  after(async () => gw?.stop());

  const newJob = async (k = key.key) => {
    const r = await gw.request('POST', '/jobs', { key: k, body: { url: 'http://127.0.0.1:9/video.mp4', webhook_url: 'http://127.0.0.1:9/hook' } });
    expect(r.status, r.text).to.equal(201);
    return (r.body as { job_id: string }).job_id;
  };
  const cancel = (id: string, k = key.key) => gw.request('POST', `/jobs/${id}/cancel`, { key: k });

  it('cancels a Pending job: 200 with the job as GET /jobs/{id} shows it, Cancelled, and a job_cancelled event', async () => {
    const id = await newJob();
    const r = await cancel(id);
    expect(r.status, r.text).to.equal(200);
    const shown = await gw.request('GET', `/jobs/${id}`, { key: key.key });
    expect(r.body).to.deep.equal(shown.body);
    expect(r.body).to.include({ id, status: 'Cancelled', step: 'Queued', s3_key: null, s3_url: null, error: null });
    expect((r.body as { finished_at: unknown }).finished_at).to.be.a('number');
    const events = await gw.pool.query<{ type: string; payload: Record<string, unknown> }>('SELECT type, payload FROM outbox WHERE job_id = $1', [id]);
    expect(events.rows.map((e) => e.type)).to.deep.equal(['job_cancelled']);
    expect(events.rows[0]!.payload).to.include({ job_id: id, status: 'cancelled', cancelled_by: 'user' });
  });

  it('answers 409 for a finished job, naming its status', async () => {
    const id = await newJob();
    await gw.pool.query(`UPDATE jobs SET status = 'Completed', step = 'Finished' WHERE id = $1`, [id]);
    const r = await cancel(id);
    expect(r.status).to.equal(409);
    expect(r.body).to.deep.equal({ error: 'Job is already finished (status: Completed)' });
    const again = await newJob();
    expect((await cancel(again)).status).to.equal(200);
    expect((await cancel(again)).body).to.deep.equal({ error: 'Job is already finished (status: Cancelled)' });
  });

  it('answers 404 Job not found for another key\'s, an unknown and a malformed id, and changes nothing', async () => {
    const other = await gw.newKey('other');
    const theirs = await newJob(other.key);
    for (const id of [theirs, randomUUID(), 'not-a-uuid']) {
      const r = await cancel(id);
      expect(r.status, id).to.equal(404);
      expect(r.body).to.deep.equal({ error: 'Job not found' });
    }
    expect((await gw.request('GET', `/jobs/${theirs}`, { key: other.key })).body).to.include({ status: 'Pending' });
    expect((await gw.request('POST', `/jobs/${theirs}/cancel`, { key: null })).status).to.equal(401);
  });

  it('cancels a batch: every open episode Cancelled, the batch finished; 409 once done, 401 and 404 as the other batch endpoints', async () => {
    const batchId = randomUUID();
    const eps = [0, 1].map((i) => ({ id: randomUUID(), url: `http://127.0.0.1:9/ep${i}.mp3` }));
    await insertBatch(gw.pool, {
      id: batchId, apiKeyId: key.id, kind: 'show', showUrl: 'http://127.0.0.1:9/show', folder: null, paused: true,
      webhookUrl: null, crNamespace: 'default', crName: batchId, options: shared, target: { kind: 'given', destination: { type: 'managed' } },
    }, eps);
    const stranger = await gw.newKey('stranger');
    expect((await gw.request('POST', `/batch/${batchId}/cancel`, { key: stranger.key })).body).to.deep.equal({ error: 'Batch does not belong to this API key' });
    const r = await gw.request('POST', `/batch/${batchId}/cancel`, { key: key.key });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.deep.include({ id: batchId, status: 'finished', total_episodes: 2, completed_episodes: 0, failed_episodes: 2, progress: 100 });
    expect((r.body as { cancelled_jobs: string[] }).cancelled_jobs.sort()).to.deep.equal(eps.map((e) => e.id).sort());
    for (const e of eps) expect((await gw.request('GET', `/jobs/${e.id}`, { key: key.key })).body).to.include({ status: 'Cancelled' });
    const again = await gw.request('POST', `/batch/${batchId}/cancel`, { key: key.key });
    expect(again.status).to.equal(409);
    expect(again.body).to.deep.equal({ error: 'Batch is already finished (status: finished)' });
    const unknown = await gw.request('POST', `/batch/${randomUUID()}/cancel`, { key: key.key });
    expect([unknown.status, unknown.body]).to.deep.equal([404, { error: 'Batch not found' }]);
  });

  it('admin cancel-job: CancelledByAdmin for any key\'s job, with an error for a finished or unknown one', async () => {
    const other = await gw.newKey('admin-target');
    const id = await newJob(other.key);
    const out: string[] = [];
    await runAdmin(['cancel-job', '--id', id], gw.pool, (l) => out.push(l));
    expect(out.join('\n')).to.include(`job ${id} cancelled (was Pending)`);
    expect((await gw.request('GET', `/jobs/${id}`, { key: other.key })).body).to.include({ status: 'CancelledByAdmin' });
    const ev = await gw.pool.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM outbox WHERE job_id = $1`, [id]);
    expect(ev.rows[0]!.payload).to.include({ type: 'job_cancelled', cancelled_by: 'admin' });
    const refused = await runAdmin(['cancel-job', '--id', id], gw.pool, () => undefined).catch((e: Error) => e.message);
    expect(refused).to.equal(`job ${id} is already finished (status: CancelledByAdmin)`);
    const unknown = randomUUID();
    expect(await runAdmin(['cancel-job', '--id', unknown], gw.pool, () => undefined).catch((e: Error) => e.message)).to.equal(`no job ${unknown}`);
  });
});
