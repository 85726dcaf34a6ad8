// The batches table on real Postgres: a batch and its episodes are written
// together and each episode counts as one job of the key; the paused
// workflow (renames, one start); the batch controller sees episodes only
// once the batch is processing, and the materializer never; an episode's end is
// counted in its batch, which completes exactly once, with one
// batch_completed, however its last episodes race.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type pg from 'pg';
import {
  batchCompletedEvent, episodesToCreate, getBatch, insertBatch, renameEpisodes, rollUp, startBatch,
  type BatchCounts, type NewBatch, type NewEpisode,
} from '../src/db/batches.js';
import { getJob, listJobs, markEpisodesCreated, syncStatus } from '../src/db/jobs.js';
import { markCreated, mediaBatchesToCreate, mediaJobsToCreate } from '../src/db/materialize.js';
import { claimDueEvents, eventId, markDelivered, type OutboxEvent } from '../src/db/outbox.js';
import type { JobStatus, MediaJobStatus } from '../src/mediajob/types.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';

// Rule 9's shape (the real SQL is api-gateway/src/destinations/store.ts's): the default, or the destination of a provider.
const rule9 = {
  byDefault: (key: string, org: string) => `SELECT id, provider, secret_name FROM storage_destinations
    WHERE ((owner_kind = 'api_key' AND owner_id = ${key}) OR (owner_kind = 'organization' AND owner_id = ${org})) AND is_default LIMIT 1`,
  byProvider: (key: string, org: string, provider: string) => `SELECT id, provider, secret_name FROM storage_destinations
    WHERE ((owner_kind = 'api_key' AND owner_id = ${key}) OR (owner_kind = 'organization' AND owner_id = ${org})) AND provider = ${provider}
    LIMIT 1`,
};

const shared = {
  format: 'm4a', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: true,
  downloadSubtitles: false, downloadThumbnail: true, liveRecording: false, liveFromStart: false, waitForVideo: false,
  enableProgressWebhook: false,
} as NewBatch['options'];

function newBatch(apiKeyId: string, patch: Partial<NewBatch> = {}): NewBatch {
  const id = randomUUID();
  return {
    id, apiKeyId, kind: 'show', showUrl: 'https://podcasts.test/podcast/show/id1', folder: 'shows/the-show', paused: true,
    webhookUrl: () => 'sealed-hook', crNamespace: 'mediajobs', crName: id, options: shared,
    target: { kind: 'saved', organizationId: null, rule9 }, ...patch,
  };
}

const episodes = (n: number): NewEpisode[] => Array.from({ length: n }, (_, i) => ({
  id: randomUUID(), url: `https://feeds.test/ep${i}.mp3`, info: { title: `Episode ${i}`, releaseDate: '2024-05-01T00:00:00Z' },
}));

describe('lib: the batches table (real PostgreSQL)', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let pool: pg.Pool;

  before(async () => {
    db = await createTestDatabase('mediajobs_batches_table');
    pool = db.pool;
  });
  after(async () => db?.drop());

  const usage = async (key: string) => (await listJobs(pool, key, { limit: 1, offset: 0 })).total;
  const rows = async (batchId: string) => (await pool.query(
    `SELECT id, status, step, options, episode, batch_index, cr_name, webhook_url_enc, destination, storage_enc
       FROM jobs WHERE batch_id = $1 ORDER BY batch_index`, [batchId])).rows;
  const batchEvents = async (batchId: string) => (await pool.query<{ event_id: string; job_id: string | null; payload: Record<string, unknown> }>(
    `SELECT event_id, job_id, payload FROM outbox WHERE batch_id = $1 AND job_id IS NULL`, [batchId])).rows;

  /** A recorded batch of `n` episodes; `start` makes it processing. */
  async function batchOf(n: number, patch: Partial<NewBatch> = {}) {
    const key = patch.apiKeyId ?? await insertApiKey(pool);
    const b = newBatch(key, patch);
    const eps = episodes(n);
    expect(await insertBatch(pool, b, eps)).to.include({ outcome: 'inserted' });
    return { key, batch: b, ids: eps.map((e) => e.id) };
  }

  describe('insert', () => {
    it('writes 500 episodes in one call, in order, each a Pending job of the key counted once', async () => {
      const key = await insertApiKey(pool);
      const b = newBatch(key);
      const eps = episodes(500);
      const started = performance.now();
      expect(await insertBatch(pool, b, eps)).to.deep.equal({ outcome: 'inserted', destination: { type: 'managed' } });
      const ms = performance.now() - started;
      console.log(`      insertBatch of 500 episodes: ${ms.toFixed(0)} ms`);
      expect(ms).to.be.below(2000);

      expect(await usage(key)).to.equal(500);
      const got = await getBatch(pool, b.id);
      expect(got).to.deep.include({
        id: b.id, api_key_id: key, kind: 'show', show_url: b.showUrl, status: 'paused', folder: 'shows/the-show',
        total_episodes: 500, completed_episodes: 0, failed_episodes: 0, skipped_episodes: 0, finished_at: null,
        destination: { type: 'managed' }, cr_namespace: 'mediajobs', cr_name: b.id,
      });
      expect(got!.episode_jobs).to.deep.equal(eps.map((e) => e.id));
      expect(got!.created_at).to.be.a('number');

      const written = await rows(b.id);
      expect(written.map((r) => r.batch_index)).to.deep.equal(eps.map((_, i) => i));
      expect(written[7]).to.deep.include({
        id: eps[7]!.id, status: 'Pending', step: 'Queued', cr_name: null, webhook_url_enc: 'sealed-hook',
        destination: { type: 'managed' }, storage_enc: null,
        options: { ...shared, url: 'https://feeds.test/ep7.mp3', folder: 'shows/the-show' },
        episode: { title: 'Episode 7', releaseDate: '2024-05-01T00:00:00Z' },
      });
      // Episode jobs are ordinary jobs for GET /jobs and GET /jobs/{id}.
      expect(await getJob(pool, key, eps[499]!.id)).to.include({ status: 'Pending', url: 'https://feeds.test/ep499.mp3' });
      expect((await listJobs(pool, key, { limit: 100, offset: 0 })).jobs).to.have.length(100);
    });

    it('gives every episode the saved destination rule 9 picks, and writes nothing for an unconfigured provider', async () => {
      const key = await insertApiKey(pool);
      const dest = (await pool.query<{ id: string }>(
        `INSERT INTO storage_destinations (owner_kind, owner_id, provider, source, config, secret_name)
         VALUES ('api_key', $1, 'gcs', 'keyvault', '{}', 'mj-dest-key-x-gcs') RETURNING id`, [key])).rows[0]!.id;
      const saved = newBatch(key, { paused: false, target: { kind: 'saved', organizationId: null, provider: 'gcs', rule9 } });
      const want = { type: 'saved', provider: 'gcs', secretName: 'mj-dest-key-x-gcs' };
      expect(await insertBatch(pool, saved, episodes(3))).to.deep.equal({ outcome: 'inserted', destination: want });
      expect((await getBatch(pool, saved.id))).to.deep.include({ status: 'processing', destination: want });
      const ids = (await pool.query('SELECT destination, destination_id FROM jobs WHERE batch_id = $1', [saved.id])).rows;
      expect(ids).to.deep.equal(Array(3).fill({ destination: want, destination_id: dest }));

      const missing = newBatch(key, { target: { kind: 'saved', organizationId: null, provider: 's3', rule9 } });
      expect(await insertBatch(pool, missing, episodes(3))).to.deep.equal({ outcome: 'storage_provider_not_configured' });
      expect(await getBatch(pool, missing.id)).to.equal(undefined);
      expect(await usage(key)).to.equal(3);
    });

    it('keeps inline credentials on each episode row until it ends', async () => {
      const inline = { type: 'inline', provider: 's3', secretName: 'mj-x' } as const;
      // Sealed once per row, for that row (lib/src/db/sealed-columns.ts).
      const { batch } = await batchOf(2, { target: { kind: 'inline', destination: inline, storage: (at) => `sealed-for-${at.table}.${at.column}:${at.row}` } });
      expect((await rows(batch.id)).map((r) => [r.destination, r.storage_enc]))
        .to.deep.equal((await rows(batch.id)).map((r) => [inline, `sealed-for-jobs.storage_enc:${r.id}`]));
    });

    it('records a kubectl-applied batch once, and nothing for a revoked key', async () => {
      const key = await insertApiKey(pool);
      const b = newBatch(key, { fromManifest: true, target: { kind: 'given', destination: { type: 'managed' } } });
      const eps = episodes(4);
      expect(await insertBatch(pool, b, eps)).to.deep.equal({ outcome: 'inserted', destination: { type: 'managed' } });
      expect(await insertBatch(pool, b, eps)).to.deep.equal({ outcome: 'exists' });
      expect(await usage(key)).to.equal(4);

      await pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [key]);
      const revoked = newBatch(key, { fromManifest: true, target: { kind: 'given', destination: { type: 'managed' } } });
      expect(await insertBatch(pool, revoked, episodes(2))).to.deep.equal({ outcome: 'invalid_owner' });
      expect(await getBatch(pool, revoked.id)).to.equal(undefined);
      expect(await usage(key)).to.equal(4);
    });

    it('finds no unknown batch', async () => {
      expect(await getBatch(pool, randomUUID())).to.equal(undefined);
    });
  });

  describe('the paused workflow', () => {
    it('renames episodes of a paused batch and reports each rename it could not apply', async () => {
      const { key, batch, ids } = await batchOf(3);
      const other = await batchOf(1, { apiKeyId: key });
      const unknown = randomUUID();
      const result = await renameEpisodes(pool, batch.id, key, [
        { jobId: ids[0]!, filename: 'First: the pilot' },
        { jobId: unknown, filename: 'nowhere' },
        { jobId: ids[1]!, filename: '../escape' },
        { jobId: other.ids[0]!, filename: 'not yours' },
        { jobId: 'not-a-uuid', filename: 'x' },
        { jobId: ids[2]!.toUpperCase(), filename: 'Third (draft)' },
        { jobId: ids[2]!, filename: 'Third' },
      ]);
      expect(result).to.deep.equal({
        outcome: 'renamed', updated: 2, errors: [
          { index: 1, jobId: unknown, reason: 'not_in_batch', message: `Job ${unknown} does not belong to this batch` },
          { index: 2, jobId: ids[1], reason: 'invalid_filename', message: `Job ${ids[1]}: Invalid field 'filename': must not contain '..'` },
          { index: 3, jobId: other.ids[0], reason: 'not_in_batch', message: `Job ${other.ids[0]} does not belong to this batch` },
          { index: 4, jobId: 'not-a-uuid', reason: 'not_in_batch', message: 'Job not-a-uuid does not belong to this batch' },
        ],
      });
      expect((await rows(batch.id)).map((r) => r.options.filename)).to.deep.equal(['First: the pilot', undefined, 'Third']);
      expect((await rows(other.batch.id))[0].options.filename).to.equal(undefined);
    });

    it('refuses renames once started, for another key, and for an unknown batch', async () => {
      const { key, batch, ids } = await batchOf(1);
      const rename = [{ jobId: ids[0]!, filename: 'late' }];
      expect(await renameEpisodes(pool, batch.id, await insertApiKey(pool), rename)).to.deep.equal({ outcome: 'not_owner' });
      expect(await renameEpisodes(pool, randomUUID(), key, rename)).to.deep.equal({ outcome: 'not_found' });
      expect(await startBatch(pool, batch.id, key)).to.deep.equal({ outcome: 'started', startedJobs: 1 });
      expect(await renameEpisodes(pool, batch.id, key, rename)).to.deep.equal({ outcome: 'not_paused', status: 'processing' });
      expect((await rows(batch.id))[0].options.filename).to.equal(undefined);
    });

    it('starts a paused batch exactly once, however many starts race', async () => {
      const { key, batch } = await batchOf(5);
      expect(await startBatch(pool, batch.id, await insertApiKey(pool))).to.deep.equal({ outcome: 'not_owner' });
      expect(await startBatch(pool, randomUUID(), key)).to.deep.equal({ outcome: 'not_found' });
      const results = await Promise.all(Array.from({ length: 6 }, () => startBatch(pool, batch.id, key)));
      expect(results.filter((r) => r.outcome === 'started')).to.deep.equal([{ outcome: 'started', startedJobs: 5 }]);
      expect(results.filter((r) => r.outcome !== 'started')).to.deep.equal(Array(5).fill({ outcome: 'not_paused', status: 'processing' }));
      expect(await getBatch(pool, batch.id)).to.include({ status: 'processing' });
    });

    it('leaves a batch recorded from a manifest to its spec: the API\'s start is refused naming the MediaBatch, the spec\'s start runs', async () => {
      const { key, batch } = await batchOf(2, { fromManifest: true, crNamespace: 'media', crName: 'weekly-show' });
      expect(await startBatch(pool, batch.id, key, 'api')).to.deep.equal({ outcome: 'held_by_manifest', crNamespace: 'media', crName: 'weekly-show' });
      expect(await getBatch(pool, batch.id)).to.include({ status: 'paused' });
      // The batch controller, once the manifest says paused: false.
      expect(await startBatch(pool, batch.id, key)).to.deep.equal({ outcome: 'started', startedJobs: 2 });
      expect(await startBatch(pool, batch.id, key, 'api')).to.deep.equal({ outcome: 'not_paused', status: 'processing' });
      // A batch the API made is the API's to start.
      const made = await batchOf(1);
      expect(await startBatch(pool, made.batch.id, made.key, 'api')).to.deep.equal({ outcome: 'started', startedJobs: 1 });
    });
  });

  describe('episode MediaJobs', () => {
    it('are the batch controller\'s to create, in order, only once the batch is processing', async () => {
      const { key, batch, ids } = await batchOf(5);
      expect(await episodesToCreate(pool, batch.id, 2), 'paused').to.deep.equal([]);
      await startBatch(pool, batch.id, key);
      const first = await episodesToCreate(pool, batch.id, 2);
      expect(first.map((e) => [e.id, e.batch_index])).to.deep.equal([[ids[0], 0], [ids[1], 1]]);
      expect(first[0]).to.deep.include({
        api_key_id: key, destination: { type: 'managed' }, info: { title: 'Episode 0', releaseDate: '2024-05-01T00:00:00Z' },
        options: { ...shared, url: 'https://feeds.test/ep0.mp3', folder: 'shows/the-show' },
      });
      const created = first.map((e) => ({ jobId: e.id, namespace: 'mediajobs', name: e.id }));
      expect(await markEpisodesCreated(pool, created)).to.equal(2);
      expect(await markEpisodesCreated(pool, created), 'already marked').to.equal(0);
      expect((await episodesToCreate(pool, batch.id, 10)).map((e) => e.id)).to.deep.equal(ids.slice(2));
    });

    it('a batch is the materializer\'s to create, as its MediaBatch with the shared options, until marked created', async () => {
      const { key, batch } = await batchOf(3);
      const [mb] = (await mediaBatchesToCreate(pool, 1000)).filter((b) => b.metadata.name === batch.id);
      expect(mb!.metadata.namespace).to.equal(batch.crNamespace);
      expect(mb!.spec).to.deep.include({ batchId: batch.id, kind: batch.kind, paused: true, showUrl: batch.showUrl, owner: { apiKeyId: key } });
      expect(mb!.spec.options).to.deep.include({ format: shared.format, audioOnly: shared.audioOnly });
      await markCreated(pool, 'batches', [batch.id]);
      expect((await mediaBatchesToCreate(pool, 1000)).map((b) => b.metadata.name), 'marked').to.not.include(batch.id);
    });

    it('a batch recorded from a kubectl manifest is never the materializer\'s: its MediaBatch is where it came from', async () => {
      const { batch } = await batchOf(1, { fromManifest: true });
      expect((await mediaBatchesToCreate(pool, 1000)).map((b) => b.metadata.name)).to.not.include(batch.id);
    });

    it('episodes are never the materializer\'s, created or not (the batch controller creates them)', async () => {
      const { batch, ids } = await batchOf(2, { paused: false });
      await markEpisodesCreated(pool, [{ jobId: ids[0]!, namespace: 'mediajobs', name: ids[0]! }]);
      const names = (await mediaJobsToCreate(pool, 10_000)).map((j) => j.metadata.name);
      expect(names).to.not.include.members(ids);
      expect(names).to.not.include(batch.id);
    });
  });

  describe('rollup', () => {
    const noEvents = () => [];
    const end = (jobId: string, status: JobStatus, events: (old: string) => OutboxEvent[] = noEvents) =>
      syncStatus(pool, jobId, { status, step: 'Finished', progress: 100 } as MediaJobStatus, events);

    it('counts completed, failed and skipped episodes, and finishes a batch with failures as finished', async () => {
      const { batch, ids } = await batchOf(4, { paused: false, folder: null });
      await end(ids[0]!, 'Completed');
      await end(ids[0]!, 'Failed'); // a terminal row never changes: not counted again
      await end(ids[1]!, 'Skipped');
      await end(ids[2]!, 'Failed');
      expect(await getBatch(pool, batch.id)).to.deep.include({
        status: 'processing', completed_episodes: 1, failed_episodes: 2, skipped_episodes: 1, finished_at: null,
      });
      expect(await batchEvents(batch.id)).to.deep.equal([]);
      await end(ids[3]!, 'Warning');
      const done = await getBatch(pool, batch.id);
      expect(done).to.deep.include({ status: 'finished', completed_episodes: 1, failed_episodes: 3, skipped_episodes: 1 });
      expect(done!.finished_at).to.be.a('number');
      const id = eventId(batch.id, 'batch_completed');
      expect(await batchEvents(batch.id)).to.deep.equal([{
        event_id: id, job_id: null, payload: {
          type: 'batch_completed', batch_id: batch.id, status: 'finished', show_url: batch.showUrl, folder: null,
          total_episodes: 4, completed_episodes: 1, failed_episodes: 3, event_id: id,
        },
      }]);
    });

    it('completes a batch with no failure as completed, and queues nothing without a webhook', async () => {
      const { batch, ids } = await batchOf(2, { paused: false, webhookUrl: null });
      for (const id of ids) await end(id, 'Completed');
      expect(await getBatch(pool, batch.id)).to.deep.include({ status: 'completed', completed_episodes: 2, failed_episodes: 0 });
      expect((await pool.query('SELECT count(*)::int AS n FROM outbox WHERE batch_id = $1', [batch.id])).rows[0].n).to.equal(0);
    });

    it('completes exactly once when the last two episodes end at the same time', async () => {
      for (let round = 0; round < 10; round++) {
        const { batch, ids } = await batchOf(4, { paused: false });
        await end(ids[0]!, 'Completed');
        await end(ids[1]!, 'Completed');
        await Promise.all([end(ids[2]!, 'Completed'), end(ids[3]!, 'Skipped')]);
        expect(await getBatch(pool, batch.id)).to.deep.include({
          status: 'finished', completed_episodes: 3, failed_episodes: 1, skipped_episodes: 1,
        });
        const events = await batchEvents(batch.id);
        expect(events.map((e) => e.payload.failed_episodes)).to.deep.equal([1]);
      }
    });

    it('delivers batch_completed only after the episode events queued before it', async () => {
      await pool.query('UPDATE outbox SET delivered_at = now() WHERE delivered_at IS NULL');
      const { batch, ids } = await batchOf(2, { paused: false });
      const completed = (jobId: string) => () => [{ type: 'job_completed', payload: { job_id: jobId } }];
      await end(ids[0]!, 'Completed', completed(ids[0]!));
      await end(ids[1]!, 'Completed', completed(ids[1]!));
      const first = await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 });
      expect(first.map((e) => e.event_id)).to.have.members([eventId(ids[0]!, 'job_completed'), eventId(ids[1]!, 'job_completed')]);
      await markDelivered(pool, first[0]!.id);
      expect(await claimDueEvents(pool, { batch: 16, leaseSeconds: 0 }), 'an episode event still open').to.deep.equal([]);
      await markDelivered(pool, first[1]!.id);
      const last = await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 });
      expect(last.map((e) => [e.event_id, e.type])).to.deep.equal([[eventId(batch.id, 'batch_completed'), 'batch_completed']]);
    });
  });

  describe('rollUp (the rule)', () => {
    const processing = (total: number, completed = 0, failed = 0, skipped = 0): BatchCounts =>
      ({ status: 'processing', total_episodes: total, completed_episodes: completed, failed_episodes: failed, skipped_episodes: skipped });
    const cases: [string, BatchCounts, JobStatus, Partial<BatchCounts> & { finished: boolean }][] = [
      ['a completed episode', processing(3), 'Completed', { completed_episodes: 1, status: 'processing', finished: false }],
      ['a skipped episode counts as failed too', processing(3), 'Skipped', { failed_episodes: 1, skipped_episodes: 1, finished: false }],
      ['a cancelled episode counts as failed', processing(3), 'Cancelled', { failed_episodes: 1, finished: false }],
      ['the last one, all succeeded', processing(2, 1), 'Completed', { completed_episodes: 2, status: 'completed', finished: true }],
      ['the last one, one skipped', processing(2, 1, 1, 1), 'Completed', { status: 'finished', finished: true }],
      ['the last one, a warning', processing(2, 1), 'Warning', { failed_episodes: 1, status: 'finished', finished: true }],
      ['a paused batch counts too', { ...processing(2), status: 'paused' }, 'Failed', { failed_episodes: 1, status: 'paused', finished: false }],
      ['a finished batch changes no more', { ...processing(1, 0, 1), status: 'finished' }, 'Completed', { completed_episodes: 0, finished: false }],
      ['a status that is no end is not counted', processing(1), 'Processing', { completed_episodes: 0, failed_episodes: 0, finished: false }],
    ];
    for (const [name, before, episode, want] of cases) {
      it(name, () => expect(rollUp(before, episode)).to.deep.include(want));
    }

    it('makes the spec\'s batch_completed', () => {
      expect(batchCompletedEvent({
        id: 'b', show_url: 'https://x', folder: 'f', status: 'completed', total_episodes: 2, completed_episodes: 2, failed_episodes: 0, skipped_episodes: 0,
      })).to.deep.equal({
        type: 'batch_completed', payload: {
          type: 'batch_completed', batch_id: 'b', status: 'completed', show_url: 'https://x', folder: 'f',
          total_episodes: 2, completed_episodes: 2, failed_episodes: 0,
        },
      });
    });
  });
});
