// Per-key limits (issue 14, "Per-key limits") as the gateway applies them,
// on real Postgres and a local API server with the generated CRDs: a
// limited key's max_resolution is capped and its resolution (as a number of
// lines, the runner's hard cap), duration and file-size limits ride in each
// job row, from which the operator's materializer and batch controller
// build the MediaJobs (so in the MediaJob's spec, and in a batch's shared
// options); a request already longer than the duration limit is a 400
// naming the field and the limit, with nothing written.
import { expect } from 'chai';
import { BatchSources } from '@mediajobs/lib/batches/index';
import { GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type MediaBatch, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { EXAMPLE_FEED } from '../../lib/test/batches-fixtures.js';
import { lookupResult, serve, startFakePlatform, type FakePlatform } from '../../lib/test/batches-support.js';
import { createApiKey, type NewApiKey } from '../src/db/api-keys.js';
import { cappedResolution, runnerLimits } from '../src/key-limits.js';
import { materialize, startClusterWithCrd, startTestGateway, type TestCluster, type TestGateway } from './support.js';

type Json = Record<string, unknown>;

const SRC = 'https://media.example/watch?v=limits';
const SHOW_ID = '1000000001';
const SHOW_URL = `https://podcasts.apple.com/us/podcast/the-example-show/id${SHOW_ID}`;
const LIMITED: Omit<NewApiKey, 'name'> = { maxResolution: '720', maxDurationSeconds: 600, maxFilesizeBytes: 50_000_000 };
const RUNNER_LIMITS = { maxResolution: 720, maxDurationSeconds: 600, maxFilesizeBytes: 50_000_000 };

describe('api-gateway: per-key limits on accepted jobs', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let platform: FakePlatform;
  let gw: TestGateway;

  before(async () => {
    platform = await startFakePlatform();
    platform.routes.set('/feed.xml', serve(EXAMPLE_FEED));
    platform.shows.set(SHOW_ID, lookupResult(SHOW_ID, `${platform.baseUrl}/feed.xml`));
    tc = await startClusterWithCrd({ mediaBatch: true });
    gw = await startTestGateway({
      batchSources: new BatchSources({
        lookupEndpoint: platform.lookupEndpoint, maxEntries: 500, policy: new OutboundPolicy({ allowed: ['127.0.0.0/8'] }), mediaInfo: {},
      }),
    });
  });

  after(async () => {
    await gw?.stop();
    await tc?.stop();
    await platform?.stop();
  });

  const newKey = (limits: Omit<NewApiKey, 'name'>) => createApiKey(gw.pool, { name: 'limited', ...limits });
  /** Create on the API server, as the operator's materializer does, what it builds from the rows accepted since the last call. */
  const materializeOnCluster = async () => {
    const { jobs, batches } = await materialize(gw.pool);
    for (const [plural, body] of [...batches.map((b) => [MEDIABATCH_PLURAL, b] as const), ...jobs.map((j) => [MEDIAJOB_PLURAL, j] as const)]) {
      await tc.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: body.metadata.namespace!, plural, body });
    }
  };
  /** The MediaJob as the API server stored it (validated by the generated CRD). */
  const mediaJob = async (name: string) => {
    await materializeOnCluster();
    return (await tc.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  };
  const mediaBatch = async (name: string) => {
    await materializeOnCluster();
    return (await tc.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIABATCH_PLURAL, name })) as MediaBatch;
  };
  const rowOptions = async (id: string) => (await gw.pool.query<{ options: Json }>('SELECT options FROM jobs WHERE id = $1', [id])).rows[0]!.options;
  const jobsOf = async (apiKeyId: string) => Number((await gw.pool.query('SELECT count(*) AS n FROM jobs WHERE api_key_id = $1', [apiKeyId])).rows[0].n);

  async function created(key: string, body: Json): Promise<MediaJob> {
    const r = await gw.request('POST', '/jobs', { key, body });
    expect(r.status, r.text).to.equal(201);
    return mediaJob((r.body as Json).job_id as string);
  }

  describe('max_resolution_limit', () => {
    it('caps best (the default) and higher values at the limit; keeps lowest and lower values', async () => {
      const { key } = await newKey(LIMITED);
      const delivered = async (asked?: string) =>
        (await created(key, { url: SRC, ...(asked !== undefined && { max_resolution: asked }) })).spec.maxResolution;
      expect(await delivered()).to.equal('720');
      expect(await delivered('best')).to.equal('720');
      expect(await delivered('2160')).to.equal('720');
      expect(await delivered('720')).to.equal('720');
      expect(await delivered('480')).to.equal('480');
      expect(await delivered('lowest')).to.equal('lowest');
    });

    it('orders rule 3\'s values: lowest below every number, best above', () => {
      expect(cappedResolution('144', 'lowest')).to.equal('lowest');
      expect(cappedResolution('best', 'best')).to.equal('best');
      expect(cappedResolution('1440', '1080')).to.equal('1080');
      expect(cappedResolution('360', '1080')).to.equal('360');
      expect(cappedResolution('best', null)).to.equal('best');
    });

    it('travels to the runner as a number of lines, a hard cap whatever max_resolution asks; best and lowest have none', () => {
      const key = { maxDurationSeconds: null, maxFilesizeBytes: null };
      expect(runnerLimits({ ...key, maxResolution: '144' })).to.deep.equal({ maxResolution: 144 });
      expect(runnerLimits({ ...key, maxResolution: '2160' })).to.deep.equal({ maxResolution: 2160 });
      expect(runnerLimits({ ...key, maxResolution: 'best' })).to.equal(undefined);
      expect(runnerLimits({ ...key, maxResolution: 'lowest' })).to.equal(undefined);
      expect(runnerLimits({ ...key, maxResolution: null })).to.equal(undefined);
    });

    it('a key without limits: the request as asked, and no limits in the spec', async () => {
      const { key } = await newKey({});
      const mj = await created(key, { url: SRC, max_resolution: '2160' });
      expect(mj.spec.maxResolution).to.equal('2160');
      expect(mj.spec).not.to.have.property('limits');
    });
  });

  describe('the duration and file-size limits', () => {
    it('travel in the job row and the MediaJob spec built from it, only the ones the key has', async () => {
      const { key } = await newKey(LIMITED);
      const mj = await created(key, { url: SRC });
      expect(mj.spec.limits).to.deep.equal(RUNNER_LIMITS);
      expect((await rowOptions(mj.metadata.name!)).limits).to.deep.equal(RUNNER_LIMITS);
      const { key: sizeOnly } = await newKey({ maxFilesizeBytes: 1_000 });
      expect((await created(sizeOnly, { url: SRC })).spec.limits).to.deep.equal({ maxFilesizeBytes: 1_000 });
    });

    it('are not a request field: a body\'s `limits` neither sets nor widens them', async () => {
      const { key } = await newKey(LIMITED);
      const widen = { url: SRC, limits: { maxDurationSeconds: 99_999, maxFilesizeBytes: 10 ** 12 } };
      expect((await created(key, widen)).spec.limits).to.deep.equal(RUNNER_LIMITS);
      const { key: free } = await newKey({});
      expect((await created(free, { ...widen, max_resolution: 'best' })).spec).not.to.have.property('limits');
    });

    it('a clip or a max_duration already longer than the limit: 400 naming the field and the limit, nothing written', async () => {
      const { id, key } = await newKey(LIMITED);
      const refused = async (body: Json) => {
        const r = await gw.request('POST', '/jobs', { key, body: { url: SRC, ...body } });
        return [r.status, r.body];
      };
      expect(await refused({ clip_start: '00:01:00', clip_end: '00:11:01' })).to.deep.equal([400, {
        error: "Invalid field 'clip_end': the clip is 601 seconds long, more than this API key allows (max_duration_limit_seconds: 600)",
      }]);
      expect(await refused({ clip_end: '700' })).to.deep.equal([400, {
        error: "Invalid field 'clip_end': the clip is 700 seconds long, more than this API key allows (max_duration_limit_seconds: 600)",
      }]);
      expect(await refused({ live_recording: true, max_duration: 3600 })).to.deep.equal([400, {
        error: "Invalid field 'max_duration': 3600 seconds, more than this API key allows (max_duration_limit_seconds: 600)",
      }]);
      expect((await refused({ clip_end: '60', max_duration: 601 }))[0]).to.equal(400);
      expect(await jobsOf(id)).to.equal(0);
      // At the limit, or a clip whose length only the media can tell (no end): accepted, for the runner to judge.
      expect((await created(key, { url: SRC, clip_start: '60', clip_end: '660' })).spec).to.include({ clipStart: '60', clipEnd: '660' });
      expect((await created(key, { url: SRC, clip_start: '01:00:00' })).spec.limits).to.deep.equal(RUNNER_LIMITS);
      expect((await created(key, { url: SRC, max_duration: 600 })).spec.maxDuration).to.equal(600);
    });
  });

  describe('POST /jobs/bulk', () => {
    it('every job of the request is capped and carries the limits', async () => {
      const { id, key } = await newKey(LIMITED);
      const r = await gw.request('POST', '/jobs/bulk', { key, body: { urls: [`${SRC}&n=1`, `${SRC}&n=2`], max_resolution: '1080' } });
      expect(r.status, r.text).to.equal(201);
      for (const jobId of (r.body as { job_ids: string[] }).job_ids) {
        const mj = await mediaJob(jobId);
        expect(mj.spec).to.deep.include({ maxResolution: '720', limits: RUNNER_LIMITS });
      }
      expect(await jobsOf(id)).to.equal(2);
    });

    it('shared options over the duration limit: 400 as POST /jobs words it, nothing written', async () => {
      const { id, key } = await newKey(LIMITED);
      const r = await gw.request('POST', '/jobs/bulk', { key, body: { urls: [SRC, `${SRC}&n=2`], clip_end: '3600' } });
      expect([r.status, r.body]).to.deep.equal([400, {
        error: "Invalid field 'clip_end': the clip is 3600 seconds long, more than this API key allows (max_duration_limit_seconds: 600)",
      }]);
      expect(await jobsOf(id)).to.equal(0);
    });
  });

  describe('a show batch', () => {
    it('the MediaBatch\'s shared options and every episode row are capped and carry the limits', async () => {
      const { key } = await newKey(LIMITED);
      const r = await gw.request('POST', '/jobs', { key, body: { url: SHOW_URL, max_resolution: 'best' } });
      expect(r.status, r.text).to.equal(201);
      const body = r.body as { batch_id: string; episode_jobs: string[] };
      expect((await mediaBatch(body.batch_id)).spec.options).to.deep.include({ maxResolution: '720', limits: RUNNER_LIMITS });
      expect(body.episode_jobs).to.have.length(3);
      for (const jobId of body.episode_jobs) expect(await rowOptions(jobId)).to.deep.include({ maxResolution: '720', limits: RUNNER_LIMITS });
    });

    it('a clip over the duration limit: 400, no batch', async () => {
      const { id, key } = await newKey(LIMITED);
      const r = await gw.request('POST', '/jobs', { key, body: { url: SHOW_URL, clip_end: '601' } });
      expect(r.status).to.equal(400);
      expect(await jobsOf(id)).to.equal(0);
      expect(Number((await gw.pool.query('SELECT count(*) AS n FROM batches WHERE api_key_id = $1', [id])).rows[0].n)).to.equal(0);
    });
  });
});
