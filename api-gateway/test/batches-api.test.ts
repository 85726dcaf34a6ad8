// Batches through the gateway (issue 13), as a client sees them: a show URL
// (a fake of the podcast platform's lookup API and an RSS feed on loopback)
// and a genuine playlist (the real yt-dlp, MEDIA_INFO_URL_MAP'd to a local
// document) become a batch with its rows in Postgres, from which the
// operator builds a MediaBatch that carries neither the episodes nor the
// webhook URL; the paused workflow (start moves the row only) and
// every error message of the batch endpoints; 501 entries create nothing;
// mixes and private lists stay single jobs; POST /jobs/bulk is all or nothing.
import { expect } from 'chai';
import { BatchSources } from '@mediajobs/lib/batches/index';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { SecretBox, type SecretContext } from '@mediajobs/lib/secret-box';
import { EXAMPLE_FEED, FEED_MEDIA } from '../../lib/test/batches-fixtures.js';
import { buildFeed, feedOfSize, lookupResult, serve, startFakePlatform, type FakePlatform } from '../../lib/test/batches-support.js';
import { GROUP, MEDIABATCH_PLURAL, VERSION, type MediaBatch } from '@mediajobs/lib/mediajob/types';
import { materialize, startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from './support.js';

type Json = Record<string, unknown>;

const SHOW_ID = '1000000001';
const SHOW_URL = `https://podcasts.apple.com/us/podcast/the-example-show/id${SHOW_ID}`;
const BIG_SHOW_ID = '1000000501';
const MISSING_SHOW_ID = '1000000404';
const PL = 'PLBCF2DAC6FFB574DE';
const PLAYLIST_URL = `https://www.youtube.com/watch?v=dQw4w9WgXcQ&list=${PL}`;
const VIDEO = 'https://www.youtube.com/watch?v=dQw4w9WgXcQ';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** EXAMPLE_FEED's episodes (its text-only item is no episode), in feed order. */
const FEED_EPISODES = [
  {
    url: `${FEED_MEDIA}/ep3.mp3?source=rss&id=3`, title: 'Ep. 3: <Tags> & "quotes"',
    description: '<p>Show notes with <a href="https://example.org/?a=1&b=2">a link</a> &amp; an entity.</p>', release_date: '2024-03-05T14:30:00.000Z',
  },
  { url: `${FEED_MEDIA}/ep2.m4a`, title: 'Ep. 2 without its own artwork', description: 'Second episode.', release_date: '2024-03-01T06:00:00.000Z' },
  { url: `${FEED_MEDIA}/ep1.mp4`, title: '1984', description: '<![CDATA-looking text]> in the notes', release_date: '2024-03-01T07:15:00.000Z' },
];

describe('api-gateway: batches (shows, playlists, bulk)', function () {
  this.timeout(60_000);
  let platform: FakePlatform;
  let gw: TestGateway;
  let key: { id: string; key: string };
  const secretBox = new SecretBox(SecretBox.generateSpec('batches'));

  const post = (body: unknown, k = key.key) => gw.request('POST', '/jobs', { key: k, body });
  const count = async (sql: string, values: unknown[] = []) => Number((await gw.pool.query(sql, values)).rows[0].n);
  /** Everything a request could have written for `apiKeyId`: jobs, batches, its usage counters. */
  const written = async (apiKeyId: string) => ({
    jobs: await count('SELECT count(*) AS n FROM jobs WHERE api_key_id = $1', [apiKeyId]),
    batches: await count('SELECT count(*) AS n FROM batches WHERE api_key_id = $1', [apiKeyId]),
    usage: await count('SELECT COALESCE(sum(count), 0) AS n FROM job_counters WHERE api_key_id = $1', [apiKeyId]),
  });

  before(async () => {
    platform = await startFakePlatform();
    platform.routes.set('/feed.xml', serve(EXAMPLE_FEED));
    platform.shows.set(SHOW_ID, lookupResult(SHOW_ID, `${platform.baseUrl}/feed.xml`));
    platform.routes.set('/501.xml', serve(feedOfSize(501, 'https://media.example.org/big')));
    platform.shows.set(BIG_SHOW_ID, lookupResult(BIG_SHOW_ID, `${platform.baseUrl}/501.xml`));
    // A playlist as yt-dlp's generic extractor reads one: flat extraction reads this document only.
    platform.routes.set('/playlist.rss', serve(buildFeed({
      title: 'A playlist',
      items: [
        { title: 'First video', link: 'https://media.example.org/first.mp4', guid: 'v-1' },
        { title: 'On the platform', link: `https://youtu.be/dQw4w9WgXcQ?list=${PL}&t=5` },
      ],
    })));
    const policy = new OutboundPolicy({ allowed: ['127.0.0.0/8', '::1/128'] });
    gw = await startTestGateway({
      secretBox,
      batchSources: new BatchSources({
        lookupEndpoint: platform.lookupEndpoint, maxEntries: 500, policy,
        mediaInfo: { urlMap: new Map([[`https://www.youtube.com/playlist?list=${PL}`, `${platform.baseUrl}/playlist.rss`]]) },
      }),
    });
  });

  /** Each job's webhook address: its own ciphertext, opened at its row and at no other. */
  async function sealedPerRow(ids: string[], url: string): Promise<void> {
    const r = await gw.pool.query<{ id: string; v: string }>('SELECT id, webhook_url_enc AS v FROM jobs WHERE id = ANY($1::uuid[])', [ids]);
    expect(new Set(r.rows.map((x) => x.v)).size, 'one ciphertext per row').to.equal(ids.length);
    const at = (id: string): SecretContext => sealedAt.jobWebhook(id);
    for (const [i, x] of r.rows.entries()) {
      expect(secretBox.open(x.v, at(x.id))).to.equal(url);
      expect(() => secretBox.open(x.v, at(r.rows[(i + 1) % r.rows.length]!.id))).to.throw(/wrong place or tampered/);
    }
  }

  beforeEach(async () => {
    key = await gw.newKey('batches');
    // What earlier tests accepted is materialized: each test sees its own rows only.
    await materialize(gw.pool);
  });

  after(async () => {
    await gw?.stop();
    await platform?.stop();
  });

  describe('POST /jobs with a show URL', () => {
    it('201 with the batch, every episode a Pending job counted once, and a MediaBatch without episodes or webhook URL', async () => {
      const r = await post({ url: SHOW_URL, folder: 'shows/example', audio_only: true, webhook_url: 'https://hooks.example.com/secret-token' });
      expect(r.status).to.equal(201);
      const body = r.body as Json;
      expect(Object.keys(body)).to.deep.equal(['batch_id', 'total_episodes', 'paused', 'episodes', 'episode_jobs']);
      const ids = body.episode_jobs as string[];
      expect(body).to.deep.include({ total_episodes: 3, paused: false });
      expect(body.batch_id).to.match(UUID);
      expect(r.headers.get('location')).to.equal(`/batch/${body.batch_id as string}`);
      expect(ids).to.have.length(3);
      expect(body.episodes).to.deep.equal(FEED_EPISODES.map((e, i) => ({ job_id: ids[i], ...e })));

      expect(await written(key.id)).to.deep.equal({ jobs: 3, batches: 1, usage: 3 });
      const rows = (await gw.pool.query(
        `SELECT id, status, url, options->>'folder' AS folder, options->>'audioOnly' AS audio, cr_name FROM jobs WHERE batch_id = $1 ORDER BY batch_index`,
        [body.batch_id])).rows;
      expect(rows).to.deep.equal(FEED_EPISODES.map((e, i) => ({ id: ids[i], status: 'Pending', url: e.url, folder: 'shows/example', audio: 'true', cr_name: null })));
      // The batch and each episode hold their own ciphertext of the address, bound to their row.
      const batchHook = (await gw.pool.query('SELECT webhook_url_enc FROM batches WHERE id = $1', [body.batch_id])).rows[0].webhook_url_enc as string;
      expect(secretBox.open(batchHook, sealedAt.batchWebhook(body.batch_id as string))).to.equal('https://hooks.example.com/secret-token');
      await sealedPerRow(ids, 'https://hooks.example.com/secret-token');

      // The rows make one MediaBatch; the episode MediaJobs are the batch controller's.
      const { jobs, batches } = await materialize(gw.pool);
      expect(jobs).to.deep.equal([]);
      expect(batches).to.have.length(1);
      const mb = batches[0]!;
      expect(mb.metadata).to.deep.include({ name: body.batch_id, namespace: 'default' });
      expect(Object.keys(mb.spec).sort()).to.deep.equal(['batchId', 'destination', 'folder', 'kind', 'options', 'owner', 'paused', 'showUrl']);
      expect(mb.spec).to.deep.include({
        batchId: body.batch_id, showUrl: SHOW_URL, kind: 'show', owner: { apiKeyId: key.id }, folder: 'shows/example', paused: false,
        destination: { type: 'managed' },
      });
      expect(mb.spec.options).to.include({ audioOnly: true, format: 'm4a' });
      expect(mb.spec.options).not.to.have.any.keys('url', 'filename', 'folder');
      expect(JSON.stringify(mb)).not.to.include('secret-token').and.not.to.include('ep3.mp3');

      // Episodes are ordinary jobs of the key.
      const job = await gw.request('GET', `/jobs/${ids[0]!}`, { key: key.key });
      expect(job.body).to.deep.include({ id: ids[0], url: FEED_EPISODES[0]!.url, status: 'Pending' });
      expect((await gw.request('GET', '/jobs', { key: key.key })).body).to.deep.include({ total: 3 });
    });

    it('with an Idempotency-Key: a retry, sequential or concurrent, answers the same batch and writes nothing more', async () => {
      const keyed = (body: unknown) => gw.request('POST', '/jobs', { key: key.key, body, headers: { 'idempotency-key': `"show-${key.id}"` } });
      const body = { url: SHOW_URL, folder: 'shows/keyed' };
      const [first, twin] = await Promise.all([keyed(body), keyed(body)]);
      // The one that created the batch: a 201 that is not a replay (the twin's 409, if it got one, carries no replay header either).
      const firstOne = [first, twin].find((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
      expect(firstOne, `${first.status} ${first.headers.get('idempotent-replayed')} / ${twin.status} ${twin.headers.get('idempotent-replayed')}`).to.not.equal(undefined);
      if (!firstOne) return;
      const later = await keyed(body);
      expect(later).to.deep.include({ status: 201, body: firstOne.body });
      expect(later.headers.get('idempotent-replayed')).to.equal('true');
      expect(later.headers.get('location')).to.equal(`/batch/${(firstOne.body as Json).batch_id as string}`);
      // The concurrent twin waited for the first and replayed it, or was told it was still in flight.
      const other = firstOne === first ? twin : first;
      expect([201, 409]).to.include(other.status);
      if (other.status === 201) expect(other.body).to.deep.equal(firstOne.body);
      expect(await written(key.id)).to.deep.equal({ jobs: 3, batches: 1, usage: 3 });
      expect((await materialize(gw.pool)).batches).to.have.length(1);
      expect((await keyed({ ...body, folder: 'elsewhere' })).status).to.equal(422);
    });

    it('a 500-episode show: accepted in one request, fast, every episode a row', async () => {
      platform.routes.set('/500.xml', serve(feedOfSize(500, 'https://media.example.org/500')));
      platform.shows.set('1000000500', lookupResult('1000000500', `${platform.baseUrl}/500.xml`));
      const started = performance.now();
      const r = await post({ url: 'https://podcasts.apple.com/podcast/id1000000500' });
      const ms = performance.now() - started;
      console.log(`      POST /jobs of a 500-episode show: ${ms.toFixed(0)} ms`);
      expect(r.status).to.equal(201);
      expect((r.body as Json).total_episodes).to.equal(500);
      expect(ms).to.be.below(3000);
      expect(await written(key.id)).to.deep.equal({ jobs: 500, batches: 1, usage: 500 });
      expect((await materialize(gw.pool)).batches).to.have.length(1);
    });

    it('GET /batch/{id}: every Batch field, skipped_episodes and progress', async () => {
      const created = (await post({ url: SHOW_URL })).body as Json;
      const r = await gw.request('GET', `/batch/${created.batch_id as string}`, { key: key.key });
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.include({
        id: created.batch_id, kind: 'show', show_url: SHOW_URL, status: 'processing', folder: null,
        total_episodes: 3, completed_episodes: 0, failed_episodes: 0, skipped_episodes: 0, progress: 0,
        episode_jobs: created.episode_jobs, finished_at: null,
      });
      // The kept counts drive progress: (completed + failed) / total.
      await gw.pool.query('UPDATE batches SET completed_episodes = 1, failed_episodes = 1, skipped_episodes = 1 WHERE id = $1', [created.batch_id]);
      expect((await gw.request('GET', `/batch/${created.batch_id as string}`, { key: key.key })).body).to.deep.include({
        completed_episodes: 1, failed_episodes: 1, skipped_episodes: 1, progress: 66,
      });
    });

    it('a show that cannot be resolved: the module\'s status and message, nothing created', async () => {
      const missing = await post({ url: `https://podcasts.apple.com/podcast/id${MISSING_SHOW_ID}` });
      expect([missing.status, missing.body]).to.deep.equal([400, { error: 'Podcast show not found' }]);
      platform.shows.set('1000000502', lookupResult('1000000502', `${platform.baseUrl}/gone.xml`));
      const unreadable = await post({ url: 'https://podcasts.apple.com/podcast/id1000000502' });
      expect([unreadable.status, unreadable.body]).to.deep.equal([502, { error: 'Podcast RSS feed could not be read' }]);
      expect(await written(key.id)).to.deep.equal({ jobs: 0, batches: 0, usage: 0 });
      expect(await materialize(gw.pool)).to.deep.equal({ jobs: [], batches: [] });
    });

    it('501 episodes: 413, and nothing in Postgres (jobs, batches, counters) and no MediaBatch', async () => {
      const r = await post({ url: `https://podcasts.apple.com/us/podcast/big/id${BIG_SHOW_ID}` });
      expect([r.status, r.body]).to.deep.equal([413, {
        error: 'Podcast show has more than 500 episodes; batches are limited to 500 and never truncated',
      }]);
      expect(await written(key.id)).to.deep.equal({ jobs: 0, batches: 0, usage: 0 });
      expect(await materialize(gw.pool)).to.deep.equal({ jobs: [], batches: [] });
    });

    it('destinations as for a single job: a saved one (rule 9) for every episode and the MediaBatch; bad inline storage refused before expanding', async () => {
      await gw.pool.query(
        `INSERT INTO storage_destinations (owner_kind, owner_id, provider, source, config, secret_name)
         VALUES ('api_key', $1, 'gcs', 'keyvault', '{}', 'mj-dest-batch-gcs')`, [key.id]);
      const want = { type: 'saved', provider: 'gcs', secretName: 'mj-dest-batch-gcs' };
      const r = await post({ url: SHOW_URL, storage_provider: 'gcs' });
      expect(r.status).to.equal(201);
      expect((await materialize(gw.pool)).batches.map((b) => b.spec.destination)).to.deep.equal([want]);
      const rows = (await gw.pool.query('SELECT destination FROM jobs WHERE batch_id = $1', [(r.body as Json).batch_id])).rows;
      expect(rows).to.deep.equal(Array(3).fill({ destination: want }));

      const lookups = platform.requests.length;
      const inline = await post({ url: SHOW_URL, storage: { provider: 's3', bucket: 'b' } });
      expect([inline.status, inline.body]).to.deep.equal([400, { error: 'Invalid storage configuration: endpoint_required' }]);
      expect(platform.requests.length).to.equal(lookups);
      expect(await written(key.id)).to.deep.equal({ jobs: 3, batches: 1, usage: 3 });
    });

    it('a named storage_provider with no destination: 400, nothing created', async () => {
      const r = await post({ url: SHOW_URL, storage_provider: 's3' });
      expect([r.status, r.body]).to.deep.equal([400, { error: 'storage_provider_not_configured' }]);
      expect(await written(key.id)).to.deep.equal({ jobs: 0, batches: 0, usage: 0 });
    });
  });

  describe('the paused workflow', () => {
    async function pausedShow(): Promise<{ id: string; jobs: string[]; body: Json }> {
      const r = await post({ url: SHOW_URL, paused: true });
      expect(r.status).to.equal(201);
      const body = r.body as Json;
      return { id: body.batch_id as string, jobs: body.episode_jobs as string[], body };
    }

    it('paused: entries carry job_id, url and title only; the MediaBatch is paused', async () => {
      const { body, jobs } = await pausedShow();
      expect(body).to.deep.include({ paused: true, total_episodes: 3 });
      expect(body.episodes).to.deep.equal(FEED_EPISODES.map((e, i) => ({ job_id: jobs[i], url: e.url, title: e.title })));
      expect((await materialize(gw.pool)).batches.map((b) => [b.metadata.name, b.spec.paused])).to.deep.equal([[body.batch_id, true]]);
      expect((await gw.request('GET', `/batch/${body.batch_id as string}`, { key: key.key })).body).to.deep.include({ status: 'paused', progress: 0 });
    });

    it('rename → start: the renames apply, per-rename errors are reported, the start moves the row only', async () => {
      const { id, jobs } = await pausedShow();
      const other = await pausedShow();
      // Both paused MediaBatches exist (the operator created them from the rows).
      expect((await materialize(gw.pool)).batches.map((b) => [b.metadata.name, b.spec.paused])).to.have.deep.members([[id, true], [other.id, true]]);
      const renamed = await gw.request('PATCH', `/batch/${id}/jobs`, {
        key: key.key,
        body: { renames: [
          { job_id: jobs[0], filename: 'Episode three' },
          { job_id: jobs[1], filename: '../escape' },
          { job_id: other.jobs[0], filename: 'not mine' },
          { job_id: jobs[2], filename: 'Episode one' },
        ] },
      });
      expect(renamed.status).to.equal(200);
      expect(renamed.body).to.deep.equal({
        updated: 2,
        errors: [`Job ${jobs[1]!}: Invalid field 'filename': must not contain '..'`, `Job ${other.jobs[0]!} does not belong to this batch`],
      });
      const names = (await gw.pool.query(`SELECT options->>'filename' AS f FROM jobs WHERE batch_id = $1 ORDER BY batch_index`, [id])).rows.map((x) => x.f);
      expect(names).to.deep.equal(['Episode three', null, 'Episode one']);

      const started = await gw.request('POST', `/batch/${id}/start`, { key: key.key });
      expect([started.status, started.body]).to.deep.equal([200, { batch_id: id, started_jobs: 3, status: 'processing' }]);
      expect((await gw.request('GET', `/batch/${id}`, { key: key.key })).body).to.deep.include({ status: 'processing' });
      // Nothing new to create: the operator unpauses the existing MediaBatch (it hears the row move); the gateway touches no resource.
      expect(await materialize(gw.pool)).to.deep.equal({ jobs: [], batches: [] });

      const again = await gw.request('POST', `/batch/${id}/start`, { key: key.key });
      expect([again.status, again.body]).to.deep.equal([400, { error: 'Batch is not paused (current status: processing)' }]);
      const late = await gw.request('PATCH', `/batch/${id}/jobs`, { key: key.key, body: { renames: [{ job_id: jobs[0], filename: 'x' }] } });
      expect([late.status, late.body]).to.deep.equal([400, { error: 'Batch is not paused. Only paused batches can be renamed.' }]);
    });

    it('a batch started before its MediaBatch exists: the start answers from the row, and the MediaBatch is then built unpaused', async () => {
      const { id } = await pausedShow();
      const started = await gw.request('POST', `/batch/${id}/start`, { key: key.key });
      expect([started.status, started.body]).to.deep.equal([200, { batch_id: id, started_jobs: 3, status: 'processing' }]);
      expect((await gw.request('GET', `/batch/${id}`, { key: key.key })).body).to.deep.include({ status: 'processing' });
      expect((await materialize(gw.pool)).batches.map((b) => [b.metadata.name, b.spec.paused])).to.deep.equal([[id, false]]);
    });

    it('another key\'s batch: 401; unknown or malformed ids: 404; a bad renames body: 400', async () => {
      const { id, jobs } = await pausedShow();
      const stranger = await gw.newKey('stranger');
      const renames = { renames: [{ job_id: jobs[0], filename: 'x' }] };
      const notOwner = [401, { error: 'Batch does not belong to this API key' }];
      expect(await answer('GET', `/batch/${id}`, stranger.key)).to.deep.equal(notOwner);
      expect(await answer('PATCH', `/batch/${id}/jobs`, stranger.key, renames)).to.deep.equal(notOwner);
      expect(await answer('POST', `/batch/${id}/start`, stranger.key)).to.deep.equal(notOwner);
      const notFound = [404, { error: 'Batch not found' }];
      for (const bad of ['0190a0a0-0000-7000-8000-000000000000', 'not-a-uuid', `${id}x`]) {
        expect(await answer('GET', `/batch/${bad}`, key.key), bad).to.deep.equal(notFound);
        expect(await answer('PATCH', `/batch/${bad}/jobs`, key.key, renames), bad).to.deep.equal(notFound);
        expect(await answer('POST', `/batch/${bad}/start`, key.key), bad).to.deep.equal(notFound);
      }
      expect(await answer('PATCH', `/batch/${id}/jobs`, key.key, {})).to.deep.equal([400, { error: "Missing required field 'renames'" }]);
      expect(await answer('PATCH', `/batch/${id}/jobs`, key.key, { renames: [{ job_id: jobs[0] }] }))
        .to.deep.equal([400, { error: "Invalid field 'renames[0].filename': must be a string" }]);
      // Still paused: nothing above changed it.
      expect((await gw.request('GET', `/batch/${id}`, { key: key.key })).body).to.deep.include({ status: 'paused' });
    });

    async function answer(method: string, path: string, k: string, body?: unknown): Promise<[number, unknown]> {
      const r = await gw.request(method, path, { key: k, ...(body !== undefined && { body }) });
      return [r.status, r.body];
    }
  });

  describe('POST /jobs with a playlist URL', () => {
    it('a genuine playlist (the real yt-dlp, flat): 201 {batch_id, total_videos, job_ids}; paused is ignored', async () => {
      const r = await post({ url: PLAYLIST_URL, paused: true });
      expect(r.status).to.equal(201);
      const body = r.body as Json;
      expect(Object.keys(body)).to.deep.equal(['batch_id', 'total_videos', 'job_ids']);
      expect(body.total_videos).to.equal(2);
      const rows = (await gw.pool.query('SELECT id, url FROM jobs WHERE batch_id = $1 ORDER BY batch_index', [body.batch_id])).rows;
      expect(rows).to.deep.equal([
        { id: (body.job_ids as string[])[0], url: 'https://media.example.org/first.mp4' },
        { id: (body.job_ids as string[])[1], url: VIDEO },
      ]);
      expect((await gw.request('GET', `/batch/${body.batch_id as string}`, { key: key.key })).body)
        .to.deep.include({ kind: 'playlist', status: 'processing', show_url: PLAYLIST_URL, total_episodes: 2 });
      expect((await materialize(gw.pool)).batches.map((b) => [b.spec.kind, b.spec.paused])).to.deep.equal([['playlist', false]]);
      expect(await written(key.id)).to.deep.equal({ jobs: 2, batches: 1, usage: 2 });
    });

    it('mixes (RD), Watch later (WL) and Liked (LL): a single job, no batch', async () => {
      for (const list of ['RDdQw4w9WgXcQ', 'WL', 'LL']) {
        const r = await post({ url: `${VIDEO}&list=${list}` });
        expect(r.status, list).to.equal(201);
        expect(Object.keys(r.body as Json), list).to.deep.equal(['job_id']);
      }
      const made = await materialize(gw.pool);
      expect([made.jobs.length, made.batches.length]).to.deep.equal([3, 0]);
      expect(await written(key.id)).to.deep.equal({ jobs: 3, batches: 0, usage: 3 });
    });
  });

  describe('POST /jobs/bulk', () => {
    const urls = (n: number) => Array.from({ length: n }, (_x, i) => `https://example.com/video-${i}.mp4`);
    const bulk = (body: unknown) => gw.request('POST', '/jobs/bulk', { key: key.key, body });

    it('100 URLs: 201 with 100 job ids in the order of urls, shared options, one MediaJob each', async () => {
      const r = await bulk({ urls: urls(100), format: 'mkv', folder: 'bulk', webhook_url: 'https://hooks.example.com/bulk-secret' });
      expect(r.status).to.equal(201);
      const { job_ids: ids, count: n } = r.body as { job_ids: string[]; count: number };
      expect(n).to.equal(100);
      expect(new Set(ids).size).to.equal(100);
      const rows = (await gw.pool.query(`SELECT id, url, options->>'format' AS format, options->>'folder' AS folder, cr_name, webhook_url_enc IS NOT NULL AS hooked
                                           FROM jobs WHERE api_key_id = $1`, [key.id])).rows;
      const byId = new Map(rows.map((x) => [x.id as string, x]));
      expect(ids.map((id) => byId.get(id)?.url)).to.deep.equal(urls(100));
      expect(rows.every((x) => x.format === 'mkv' && x.folder === 'bulk' && x.hooked && x.cr_name === x.id)).to.equal(true);
      await sealedPerRow(ids, 'https://hooks.example.com/bulk-secret');
      expect(await written(key.id)).to.deep.equal({ jobs: 100, batches: 0, usage: 100 });
      const { jobs } = await materialize(gw.pool);
      expect(jobs.map((mj) => mj.metadata.name!).sort()).to.deep.equal([...ids].sort());
      expect(jobs.every((mj) => mj.spec.format === 'mkv' && mj.spec.folder === 'bulk' && !JSON.stringify(mj).includes('bulk-secret'))).to.equal(true);
    });

    it('101 URLs, none, or not a list: 400 and nothing created', async () => {
      const message = { error: "Invalid field 'urls': must be an array of 1 to 100 URLs" };
      for (const body of [{ urls: urls(101) }, { urls: [] }, { urls: 'https://example.com/v.mp4' }]) {
        const r = await bulk(body);
        expect([r.status, r.body]).to.deep.equal([400, message]);
      }
      expect([(await bulk({})).status, (await bulk({})).body]).to.deep.equal([400, { error: "Missing required field 'urls'" }]);
      expect(await written(key.id)).to.deep.equal({ jobs: 0, batches: 0, usage: 0 });
    });

    it('one bad URL: 400 naming its index, and nothing created', async () => {
      const list = urls(10);
      list[3] = 'ftp://example.com/v.mp4';
      const r = await bulk({ urls: list });
      expect(r.status).to.equal(400);
      expect((r.body as Json).error).to.match(/^urls\[3\]: Invalid field 'url': /);
      list[3] = 'http://10.0.0.1/v.mp4';
      expect((await bulk({ urls: list })).body).to.deep.equal({ error: "urls[3]: Invalid field 'url': local and link-local addresses are not allowed" });
      list[3] = 'https://user:pass@example.com/v.mp4';
      expect((await bulk({ urls: list })).body).to.deep.equal({ error: "urls[3]: Invalid field 'url': must not contain user credentials" });
      list[3] = 42 as unknown as string;
      expect((await bulk({ urls: list })).body).to.deep.equal({ error: 'urls[3]: must be a string' });
      // The shared webhook is the request's problem, not an index's.
      expect((await bulk({ urls: urls(3), webhook_url: 'http://169.254.169.254/hook' })).body)
        .to.deep.equal({ error: "Invalid field 'webhook_url': local and link-local addresses are not allowed" });
      expect(await written(key.id)).to.deep.equal({ jobs: 0, batches: 0, usage: 0 });
      expect(await materialize(gw.pool)).to.deep.equal({ jobs: [], batches: [] });
    });

    it('a show or playlist URL: 400 naming its index; a shared option problem is POST /jobs\' own message', async () => {
      for (const [i, url] of [[2, SHOW_URL], [5, PLAYLIST_URL]] as const) {
        const list = urls(8);
        list[i] = url;
        expect((await bulk({ urls: list })).body).to.deep.equal({ error: `urls[${i}]: a show or playlist URL cannot be part of a bulk request` });
      }
      expect((await bulk({ urls: urls(3), folder: '/abs' })).body).to.deep.include({ error: "Invalid field 'folder': must not start with a forward slash or a backslash" });
      expect(await written(key.id)).to.deep.equal({ jobs: 0, batches: 0, usage: 0 });
    });

    it('storage and paused are not bulk options; a storage_provider with no destination creates nothing', async () => {
      const storage = await bulk({ urls: urls(2), storage: { provider: 's3' } });
      expect(storage.status).to.equal(400);
      expect((storage.body as Json).error).to.match(/^Invalid field 'storage'/);
      expect((await bulk({ urls: urls(2), paused: true })).body).to.deep.include({ error: "Invalid field 'paused': not accepted by POST /jobs/bulk (it applies to show batches only)" });
      expect((await bulk({ urls: urls(2), storage_provider: 'gcs' })).body).to.deep.equal({ error: 'storage_provider_not_configured' });
      expect(await written(key.id)).to.deep.equal({ jobs: 0, batches: 0, usage: 0 });
    });
  });

  describe('against an API server with the MediaBatch CRD', () => {
    let tc: TestCluster;
    let kgw: TestGateway;

    before(async () => {
      tc = await startClusterWithCrd({ mediaBatch: true });
      kgw = await startTestGateway({
        batchSources: new BatchSources({
          lookupEndpoint: platform.lookupEndpoint, maxEntries: 500, policy: new OutboundPolicy({ allowed: ['127.0.0.0/8'] }), mediaInfo: {},
        }),
      });
    });

    after(async () => {
      await kgw?.stop();
      await tc?.stop();
    });

    const read = async (name: string) => (await tc.custom.getNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, name,
    })) as MediaBatch;

    it('the MediaBatch built from the rows is accepted by the CRD; start moves the row and leaves the object to the operator', async () => {
      const k = await kgw.newKey('cluster');
      const r = await kgw.request('POST', '/jobs', { key: k.key, body: { url: SHOW_URL, paused: true, folder: 'pods', format: 'mp3', webhook_url: 'https://hooks.example.com/x' } });
      expect(r.status).to.equal(201);
      const id = (r.body as Json).batch_id as string;
      // Created as the operator's materializer creates it.
      const { jobs, batches } = await materialize(kgw.pool);
      expect([jobs, batches.map((b) => b.metadata.name)]).to.deep.equal([[], [id]]);
      await tc.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, body: batches[0]! });
      const stored = await read(id);
      expect(stored.spec).to.deep.include({ batchId: id, showUrl: SHOW_URL, kind: 'show', owner: { apiKeyId: k.id }, folder: 'pods', paused: true });
      expect(stored.spec.options).to.include({ format: 'mp3' });
      expect(stored.spec).not.to.have.any.keys('webhookUrl', 'episodes');
      expect(stored.metadata.labels).to.deep.equal({ 'mediajobs.io/api-key-id': k.id });

      const started = await kgw.request('POST', `/batch/${id}/start`, { key: k.key });
      expect(started.status).to.equal(200);
      expect((await kgw.request('GET', `/batch/${id}`, { key: k.key })).body).to.deep.include({ status: 'processing' });
      // The gateway touched no resource: unpausing is the operator's (it hears the row move).
      expect((await read(id)).spec).to.deep.include({ paused: true, folder: 'pods' });
      expect(await materialize(kgw.pool)).to.deep.equal({ jobs: [], batches: [] });
    });
  });
});
