// GET /usage's storage_reserved_gb for shows: the contract reserves for
// jobs in progress, so a paused show reserves nothing until it is started,
// then each episode waiting its run holds a job's reservation until it ends.
// The real gateway on real Postgres, the show from a fake of the podcast
// platform's lookup API and its RSS feed on loopback.
import { expect } from 'chai';
import { BatchSources } from '@mediajobs/lib/batches/index';
import { syncStatus } from '@mediajobs/lib/db/jobs';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { EXAMPLE_FEED } from '../../lib/test/batches-fixtures.js';
import { lookupResult, serve, startFakePlatform, type FakePlatform } from '../../lib/test/batches-support.js';
import { createApiKey, type NewApiKey } from '../src/db/api-keys.js';
import { startTestGateway, type TestGateway } from './support.js';

const GIB = 2 ** 30;
/** The documented reservation of a job whose size is not known yet (migration 0010). */
const RESERVATION = 512 * 2 ** 20;
const SHOW_ID = '1000000001';
const SHOW_URL = `https://podcasts.apple.com/us/podcast/the-example-show/id${SHOW_ID}`;
/** EXAMPLE_FEED's episodes. */
const EPISODES = 3;

type Json = Record<string, unknown>;

describe('api-gateway: storage reserved by shows (GET /usage)', function () {
  this.timeout(60_000);
  let platform: FakePlatform;
  let gw: TestGateway;
  let n = 0;

  before(async () => {
    platform = await startFakePlatform();
    platform.routes.set('/feed.xml', serve(EXAMPLE_FEED));
    platform.shows.set(SHOW_ID, lookupResult(SHOW_ID, `${platform.baseUrl}/feed.xml`));
    gw = await startTestGateway({
      batchSources: new BatchSources({ lookupEndpoint: platform.lookupEndpoint, maxEntries: 500, policy: new OutboundPolicy({ allowed: ['127.0.0.0/8', '::1/128'] }), mediaInfo: {} }),
    });
  });
  after(async () => {
    await gw?.stop();
    await platform?.stop();
  });

  const newKey = async (k: Partial<NewApiKey> = {}) => {
    const made = await createApiKey(gw.pool, { name: `reserved-${++n}`, ...k });
    return made.key;
  };
  const usage = async (key: string) => {
    const r = await gw.request('GET', '/usage', { key });
    expect(r.status).to.equal(200);
    return r.body as Json;
  };
  const reserved = async (key: string) => {
    const u = await usage(key);
    return { usage_count: u.usage_count, storage_reserved_gb: u.storage_reserved_gb, storage_effective_usage_gb: u.storage_effective_usage_gb };
  };
  const postShow = async (key: string, paused: boolean) => {
    const r = await gw.request('POST', '/jobs', { key, body: { url: SHOW_URL, paused } });
    expect(r.status).to.equal(201);
    return r.body as { batch_id: string; episode_jobs: string[] };
  };
  const gb = (jobs: number) => (jobs * RESERVATION) / GIB;

  it('a paused show reserves nothing while paused and renamed; started, each episode reserves until it ends', async () => {
    const key = await newKey();
    const show = await postShow(key, true);
    expect(await reserved(key)).to.deep.equal({ usage_count: EPISODES, storage_reserved_gb: 0, storage_effective_usage_gb: 0 });

    const renamed = await gw.request('PATCH', `/batch/${show.batch_id}/jobs`, { key, body: { renames: [{ job_id: show.episode_jobs[0], filename: 'First' }] } });
    expect(renamed.status).to.equal(200);
    expect((await usage(key)).storage_reserved_gb).to.equal(0);

    expect((await gw.request('POST', `/batch/${show.batch_id}/start`, { key })).status).to.equal(200);
    expect(await reserved(key)).to.deep.equal({ usage_count: EPISODES, storage_reserved_gb: gb(EPISODES), storage_effective_usage_gb: gb(EPISODES) });
    // A second start is refused and takes nothing more.
    expect((await gw.request('POST', `/batch/${show.batch_id}/start`, { key })).status).to.equal(400);
    expect((await usage(key)).storage_reserved_gb).to.equal(gb(EPISODES));

    await syncStatus(gw.pool, show.episode_jobs[0]!, { status: 'Failed', step: 'Downloading', error: 'Download failed', errorType: 'error' }, () => []);
    expect((await usage(key)).storage_reserved_gb).to.equal(gb(EPISODES - 1));
  });

  it('a show that is not paused reserves for every episode at once, as single jobs do', async () => {
    const key = await newKey();
    await postShow(key, false);
    expect(await reserved(key)).to.deep.equal({ usage_count: EPISODES, storage_reserved_gb: gb(EPISODES), storage_effective_usage_gb: gb(EPISODES) });
  });

  it("a paused show does not use a limited key's quota: a job after it is still accepted", async () => {
    const key = await newKey({ storageLimitBytes: RESERVATION + 1 });
    await postShow(key, true);
    const job = await gw.request('POST', '/jobs', { key, body: { url: 'https://media.example/watch?v=after-paused-show' } });
    expect(job.status).to.equal(201);
    expect((await usage(key)).storage_reserved_gb).to.equal(gb(1));
  });
});
