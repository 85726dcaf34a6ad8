// GET /usage and the storage quota (issue 14, items 1-3), through the real
// gateway on real Postgres: the spec's fields, counted jobs (batch episodes
// one each), reservations taken with each job and released exactly once
// when it ends whatever the outcome, what a completed job stored counted
// once, and a limited key refused with the spec's 403 on every
// job-creating route once stored + reserved reaches its limit.
import { expect } from 'chai';
import { KEY_USAGE, cancelJob, syncStatus } from '@mediajobs/lib/db/jobs';
import type { MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { createApiKey, type NewApiKey } from '../src/db/api-keys.js';
import { QUOTA_EXCEEDED } from '../src/routes/usage.js';
import { startTestGateway, type TestGateway } from './support.js';

const GIB = 2 ** 30;
const MIB = 2 ** 20;
/** The documented reservation of a job whose size is not known yet (migration 0010). */
const RESERVATION = 512 * MIB;

type Json = Record<string, unknown>;

describe('api-gateway: GET /usage and the storage quota', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let n = 0;

  before(async () => {
    gw = await startTestGateway();
  });
  after(async () => {
    await gw?.stop();
  });

  const newKey = async (k: Partial<NewApiKey> = {}) => {
    const made = await createApiKey(gw.pool, { name: `usage-${++n}`, ...k });
    return { id: made.id, key: made.key, name: `usage-${n}` };
  };
  const usage = async (key: string) => {
    const r = await gw.request('GET', '/usage', { key });
    expect(r.status).to.equal(200);
    return r.body as Json;
  };
  const postJob = (key: string, extra: Json = {}, headers?: Record<string, string>) =>
    gw.request('POST', '/jobs', { key, body: { url: `https://media.example/watch?v=usage-${++n}`, ...extra }, ...(headers && { headers }) });
  const end = (jobId: string, s: MediaJobStatus) => syncStatus(gw.pool, jobId, s, () => []);
  const completed = (bytes: number, extra: Partial<NonNullable<MediaJobStatus['result']>> = {}): MediaJobStatus => ({
    status: 'Completed', step: 'Finished', progress: 100,
    result: { storageKey: `videos/${++n}.mp4`, fileSize: bytes, uploadedBytes: bytes, ...extra },
  });

  it('a new key: the totals at zero, and no limit fields', async () => {
    const k = await newKey();
    expect(await usage(k.key)).to.deep.equal({
      client_name: k.name, usage_count: 0, storage_usage_gb: 0, storage_reserved_gb: 0, storage_effective_usage_gb: 0,
    });
  });

  it('each job counts and reserves until it ends; what a completed job stored counts once, byte for byte', async () => {
    const k = await newKey();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(((await postJob(k.key)).body as { job_id: string }).job_id);
    expect(await usage(k.key)).to.deep.include({ usage_count: 3, storage_usage_gb: 0, storage_reserved_gb: (3 * RESERVATION) / GIB });

    // Completed: media 1,234,567 bytes and sidecars 8,765 bytes (uploadedBytes counts both).
    await end(ids[0]!, completed(1_243_332, { fileSize: 1_234_567 }));
    // The same terminal status again (an operator restarted mid-way): counted once.
    await end(ids[0]!, completed(1_243_332, { fileSize: 1_234_567 }));
    await end(ids[1]!, { status: 'Failed', step: 'Downloading', error: 'Download failed', errorType: 'error' });
    const u = await usage(k.key);
    expect(u).to.deep.include({ usage_count: 3, storage_reserved_gb: RESERVATION / GIB });
    expect((u.storage_usage_gb as number) * GIB).to.equal(1_243_332);
    expect(u.storage_effective_usage_gb).to.equal((1_243_332 + RESERVATION) / GIB);

    // Cancelled: the reservation goes, nothing is stored.
    expect((await cancelJob(gw.pool, ids[2]!, 'Cancelled', k.id)).outcome).to.equal('cancelled');
    expect(await usage(k.key)).to.deep.include({ storage_reserved_gb: 0, storage_effective_usage_gb: 1_243_332 / GIB });
  });

  it('a runner that reports no uploadedBytes (older image): its fileSize counts', async () => {
    const k = await newKey();
    const id = ((await postJob(k.key)).body as { job_id: string }).job_id;
    await end(id, { status: 'Completed', step: 'Finished', progress: 100, result: { storageKey: 'videos/old.mp4', fileSize: 4096 } });
    expect(((await usage(k.key)).storage_usage_gb as number) * GIB).to.equal(4096);
  });

  it('the per-key limits appear only when set, in the spec\'s units', async () => {
    const k = await newKey({ storageLimitBytes: 1024 * GIB, maxResolution: '720', maxDurationSeconds: 3600, maxFilesizeBytes: 50 * MIB });
    expect(await usage(k.key)).to.deep.equal({
      client_name: k.name, usage_count: 0, storage_usage_gb: 0, storage_reserved_gb: 0, storage_effective_usage_gb: 0,
      storage_limit_gb: 1024, storage_limit_bytes: 1024 * GIB, storage_remaining_gb: 1024,
      max_resolution_limit: '720', max_duration_limit_seconds: 3600, max_filesize_limit_bytes: 50 * MIB, max_filesize_limit_mb: 50,
    });
  });

  it('a limited key: jobs until stored + reserved reaches the limit, then 403 on POST /jobs, bulk and shows alike, nothing created', async () => {
    const k = await newKey({ storageLimitBytes: 2 * RESERVATION + 1 });
    const keyed = () => gw.request('POST', '/jobs', { key: k.key, body: { url: 'https://media.example/keyed' }, headers: { 'idempotency-key': '"quota-retry"' } });
    const first = await keyed();
    expect(first.status).to.equal(201);
    expect((await postJob(k.key)).status).to.equal(201);
    expect((await postJob(k.key)).status).to.equal(201); // 1 GiB reserved of 1 GiB + 1 byte: not reached yet
    const before = await usage(k.key);
    expect(before).to.deep.include({ usage_count: 3, storage_remaining_gb: 0 });

    const single = await postJob(k.key);
    expect(single.status).to.equal(403);
    const body = single.body as Json;
    expect(body).to.deep.include({ error: QUOTA_EXCEEDED, limit_gb: '1', used_gb: '1.5' });
    expect(body.message).to.be.a('string').and.to.include('1 GB');
    expect((await gw.request('POST', '/jobs/bulk', { key: k.key, body: { urls: ['https://media.example/a', 'https://media.example/b'] } })).body)
      .to.deep.include({ error: QUOTA_EXCEEDED });
    // A show is refused before its feed is read (nothing on the network is asked).
    expect((await gw.request('POST', '/jobs', { key: k.key, body: { url: 'https://podcasts.apple.com/us/podcast/x/id1000000001' } })).status)
      .to.equal(403);
    expect((await usage(k.key)).usage_count).to.equal(3);

    // A retry of a request accepted before the quota was reached still gets its first answer.
    const replay = await keyed();
    expect(replay).to.deep.include({ status: 201, body: first.body });
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    // Jobs ending free their reservations: accepted again.
    const ids = (await gw.pool.query<{ id: string }>('SELECT id FROM jobs WHERE api_key_id = $1', [k.id])).rows.map((r) => r.id);
    await end(ids[0]!, { status: 'Failed', step: 'Downloading', error: 'Download failed', errorType: 'error' });
    expect((await postJob(k.key)).status).to.equal(201);
  });

  it('reads the kept totals only: with 100,000 jobs of the key, the plan reads job_counters by its key and never jobs', async () => {
    const k = await newKey();
    await gw.pool.query(`INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, cr_namespace, cr_name)
      SELECT gen_random_uuid(), $1, 'https://media.example/bulk', 'Completed', 'Finished', 100, '{}'::jsonb, 'default', 'x' || g
        FROM generate_series(1, 100000) g`, [k.id]);
    await gw.pool.query('ANALYZE jobs');
    const plan = JSON.stringify((await gw.pool.query(`EXPLAIN (FORMAT JSON) ${KEY_USAGE}`, [k.id])).rows[0]);
    expect(plan).to.include('"Relation Name":"job_counters"');
    expect(plan).to.not.include('"Relation Name":"jobs"');
    expect(plan).to.include('job_counters_pkey');
  });

  it('without a key: 401 as every route', async () => {
    expect(await gw.request('GET', '/usage', { key: null })).to.deep.include({ status: 401, body: { error: 'Missing x-api-key header' } });
  });
});
