// Cancellation in Postgres (docs/adr/0013): one conditional write decides
// between a cancellation and a completion, job_cancelled is queued with the
// status change, the operator hears of it on CANCEL_CHANNEL after commit,
// another key's job is not found, and a cancelled batch ends once with its
// open episodes (MediaJob or not) cancelled and one batch_completed.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type pg from 'pg';
import { cancelBatch, getBatch, insertBatch, type NewBatch } from '../src/db/batches.js';
import { cancelJob, cancelledAmong, getJob, markEpisodesCreated, mirrorStatus, syncStatus } from '../src/db/jobs.js';
import { mediaJobsToCreate } from '../src/db/materialize.js';
import { CANCEL_CHANNEL, parseCancelNotice, type CancelNotice } from '../src/job-cancellation.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';

const shared = {
  format: 'm4a', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: true,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
} as NewBatch['options'];

describe('lib: cancellation in Postgres', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let pool: pg.Pool;
  let keyId: string;
  let listener: pg.PoolClient;
  const notices: CancelNotice[] = [];

  before(async () => {
    db = await createTestDatabase('mediajobs_cancel');
    pool = db.pool;
    keyId = await insertApiKey(pool);
    listener = await pool.connect();
    listener.on('notification', (m) => {
      const n = m.channel === CANCEL_CHANNEL ? parseCancelNotice(m.payload) : undefined;
      if (n) notices.push(n);
    });
    await listener.query(`LISTEN ${CANCEL_CHANNEL}`);
  });
  after(async () => {
    listener?.release();
    await db?.drop();
  });

  async function job(opts: { status?: string; webhook?: boolean; crName?: boolean } = {}): Promise<string> {
    const id = randomUUID();
    await pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, webhook_url_enc, cr_namespace, cr_name, storage_enc, created_at)
       VALUES ($1, $2, 'https://media.test/v.mp4', $3, 'Downloading', 10, '{}', $4, 'mediajobs', $5, 'sealed-creds', now() - interval '5 minutes')`,
      [id, keyId, opts.status ?? 'Processing', opts.webhook === false ? null : 'sealed-hook', opts.crName === false ? null : id]);
    return id;
  }
  const events = async (id: string) => (await pool.query<{ type: string; payload: Record<string, unknown> }>(
    'SELECT type, payload FROM outbox WHERE job_id = $1 ORDER BY id', [id])).rows;
  const waitNotice = async (jobId: string) => {
    for (let i = 0; i < 100 && !notices.some((n) => n.jobId === jobId); i++) await new Promise((r) => setTimeout(r, 20));
    return notices.find((n) => n.jobId === jobId);
  };

  it('cancels an unfinished job once: Cancelled, job_cancelled queued, credentials gone, the operator notified', async () => {
    const id = await job();
    expect(await cancelJob(pool, id, 'Cancelled', keyId)).to.deep.equal({ outcome: 'cancelled', previous: 'Processing' });
    const detail = (await getJob(pool, keyId, id))!;
    expect(detail).to.include({ status: 'Cancelled', step: 'Downloading', error: null });
    expect(detail.finished_at).to.be.a('number');
    const row = (await pool.query('SELECT storage_enc FROM jobs WHERE id = $1', [id])).rows[0] as { storage_enc: string | null };
    expect(row.storage_enc).to.equal(null);
    const queued = await events(id);
    expect(queued.map((e) => e.type)).to.deep.equal(['job_cancelled']);
    expect(queued[0]!.payload).to.deep.include({
      type: 'job_cancelled', job_id: id, status: 'cancelled', url: 'https://media.test/v.mp4', cancelled_by: 'user',
    });
    expect(await waitNotice(id)).to.deep.equal({ jobId: id, namespace: 'mediajobs', name: id, status: 'Cancelled' });
    // A second cancel changes nothing and queues nothing.
    expect(await cancelJob(pool, id, 'CancelledByAdmin')).to.deep.equal({ outcome: 'finished', status: 'Cancelled' });
    expect(await events(id)).to.have.length(1);
  });

  it('lets the first terminal write win: a late Completed is refused, and a Completed job is not cancelled', async () => {
    const cancelled = await job();
    await cancelJob(pool, cancelled, 'CancelledByAdmin');
    const done = { status: 'Completed', step: 'Finished', progress: 100, result: { storageKey: 'videos/x.mp4', fileSize: 10 } } as const;
    expect(await mirrorStatus(pool, cancelled, done, () => [])).to.deep.equal({ previous: 'CancelledByAdmin', current: 'CancelledByAdmin', updated: false });
    expect((await getJob(pool, keyId, cancelled))!).to.include({ status: 'CancelledByAdmin', s3_key: null });

    const completed = await job();
    expect(await syncStatus(pool, completed, done, () => [])).to.equal('Processing');
    expect(await cancelJob(pool, completed, 'Cancelled', keyId)).to.deep.equal({ outcome: 'finished', status: 'Completed' });
    expect((await getJob(pool, keyId, completed))!.status).to.equal('Completed');
  });

  it('treats another key\'s job as not found, and cancels it for an administrator', async () => {
    const id = await job({ webhook: false });
    const other = await insertApiKey(pool, 'other');
    expect(await cancelJob(pool, id, 'Cancelled', other)).to.deep.equal({ outcome: 'not_found' });
    expect(await cancelJob(pool, randomUUID(), 'Cancelled', keyId)).to.deep.equal({ outcome: 'not_found' });
    expect(await cancelJob(pool, id, 'CancelledByAdmin')).to.deep.equal({ outcome: 'cancelled', previous: 'Processing' });
    expect(await events(id), 'no webhook, no event').to.deep.equal([]);
    expect((await cancelledAmong(pool, [id, randomUUID()])).get(id)).to.equal('CancelledByAdmin');
  });

  it('leaves a cancelled Pending job to nobody: the materializer does not create its MediaJob', async () => {
    const id = await job({ status: 'Pending' });
    const toCreate = async () => (await mediaJobsToCreate(pool, 10_000)).map((j) => j.metadata.name);
    expect(await toCreate()).to.include(id);
    await cancelJob(pool, id, 'CancelledByAdmin');
    expect(await toCreate()).to.not.include(id);
  });

  it('cancels a batch: open episodes (with or without a MediaJob) Cancelled, the batch finished once with one batch_completed', async () => {
    const batchId = randomUUID();
    const eps = [0, 1, 2].map((i) => ({ id: randomUUID(), url: `https://feeds.test/ep${i}.mp3` }));
    const inserted = await insertBatch(pool, {
      id: batchId, apiKeyId: keyId, kind: 'show', showUrl: 'https://podcasts.test/show', folder: null, paused: false,
      webhookUrl: () => 'sealed-hook', crNamespace: 'mediajobs', crName: batchId, options: shared,
      target: { kind: 'given', destination: { type: 'managed' } },
    }, eps);
    expect(inserted.outcome).to.equal('inserted');
    // Episode 0 completed, episode 1 has its MediaJob, episode 2 none yet.
    await markEpisodesCreated(pool, [0, 1].map((i) => ({ jobId: eps[i]!.id, namespace: 'mediajobs', name: eps[i]!.id })));
    await syncStatus(pool, eps[0]!.id, { status: 'Completed', step: 'Finished', progress: 100, result: { storageKey: 'k', fileSize: 1 } }, () => []);

    expect(await cancelBatch(pool, batchId, await insertApiKey(pool, 'stranger'))).to.deep.equal({ outcome: 'not_owner' });
    const r = await cancelBatch(pool, batchId, keyId);
    expect(r.outcome).to.equal('cancelled');
    expect(r.outcome === 'cancelled' && [...r.cancelledJobs].sort()).to.deep.equal([eps[1]!.id, eps[2]!.id].sort());
    const b = (await getBatch(pool, batchId))!;
    expect(b).to.include({ status: 'finished', completed_episodes: 1, failed_episodes: 2, skipped_episodes: 0 });
    expect(b.finished_at).to.be.a('number');
    expect((await getJob(pool, keyId, eps[2]!.id))!.status).to.equal('Cancelled');
    // Only the episode with a MediaJob is the operator's business.
    expect(await waitNotice(eps[1]!.id)).to.include({ status: 'Cancelled' });
    expect(notices.some((n) => n.jobId === eps[2]!.id)).to.equal(false);
    const batchEvents = await pool.query<{ type: string; job_id: string | null; payload: Record<string, unknown> }>(
      'SELECT type, job_id, payload FROM outbox WHERE batch_id = $1 ORDER BY id', [batchId]);
    const types = batchEvents.rows.map((e) => e.type);
    expect(types.filter((t) => t === 'job_cancelled')).to.have.length(2);
    expect(types.at(-1)).to.equal('batch_completed');
    expect(batchEvents.rows.at(-1)!.payload).to.include({ status: 'finished', total_episodes: 3, completed_episodes: 1, failed_episodes: 2 });
    expect(await cancelBatch(pool, batchId, keyId)).to.deep.equal({ outcome: 'finished', status: 'finished' });
    expect(await cancelBatch(pool, randomUUID(), keyId)).to.deep.equal({ outcome: 'not_found' });
  });
});
