// Accounts and limits end to end (issue 14, "How it is checked"), through
// every component on real Postgres and a real redis-server, the real runner
// on loopback media, s3rver for a marketplace user's own storage and the
// official stripe client against the local fake of Stripe: a limited key's
// jobs complete until the quota is reached, then the spec's 403, with GET
// /usage agreeing byte for byte with what was stored and what was billed;
// reservations held while a job runs and released after, the default for a
// source whose size nobody knows, the source's size once the runner knows
// it (a plain file's Content-Length); the per-key
// resolution and duration limits; the rate limit shared by an
// organization's keys, another organization unaffected, 503 while Redis is
// down; a marketplace user's first job with storage and the next without.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { eventually } from '../../local-cluster/test/support.js';
import { createApiKey, createOrganization, type NewApiKey } from '../../api-gateway/src/db/api-keys.js';
import { FakeStripe } from '../support/fake-stripe.js';
import { generateMedia, MEDIA, startMediaServer, type MediaServer } from '../support/media.js';
import { startRedisServer, type RedisServer } from '../support/redis.js';
import { startS3rver, type RunningS3rver } from '../support/s3rver.js';
import { startService, type Service } from './support.js';

const GIB = 2 ** 30;
const MIB = 2 ** 20;
const RATE = 30;
type Json = Record<string, unknown>;

describe('end to end: usage, quotas, per-key limits, rate limits, marketplace users, billing', function () {
  this.timeout(300_000);
  let svc: Service;
  let media: MediaServer;
  let redis: RedisServer;
  let s3: RunningS3rver;
  const stripe = new FakeStripe();
  let n = 0;

  before(async () => {
    media = await startMediaServer();
    redis = await startRedisServer();
    s3 = await startS3rver({ buckets: ['market'] });
    const stripeUrl = await stripe.start();
    svc = await startService({
      env: {
        REDIS_URL: redis.url, RATE_LIMIT_PER_SECOND: String(RATE),
        STRIPE_SECRET_KEY: stripe.secretKey, STRIPE_API_URL: stripeUrl, BILLING_CACHE_SECONDS: '0',
      },
    });
  });
  after(async () => {
    await svc?.stop();
    await stripe.stop();
    await s3?.stop();
    await redis?.stop();
    await media?.stop();
  });

  async function newKey(k: Partial<NewApiKey> = {}): Promise<string> {
    return (await createApiKey(svc.db.pool, { name: `acct-${++n}`, ...k })).key;
  }
  async function request(method: string, path: string, key: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(`${svc.gateway.url}${path}`, {
      method,
      headers: { 'x-api-key': key, ...(body !== undefined && { 'content-type': 'application/json' }), ...headers },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : {}) as Json };
  }
  const usage = async (key: string, headers?: Record<string, string>) => {
    const r = await request('GET', '/usage', key, undefined, headers);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body;
  };
  const job = async (key: string, id: string, headers?: Record<string, string>) => (await request('GET', `/jobs/${id}`, key, undefined, headers)).body;
  const ended = (key: string, id: string, headers?: Record<string, string>) => eventually(async () => {
    const j = await job(key, id, headers);
    return ['Completed', 'Failed', 'Warning', 'Skipped'].includes(j.status as string) ? j : undefined;
  }, 120_000, 250);
  async function submit(key: string, body: Json, headers?: Record<string, string>): Promise<string> {
    const r = await request('POST', '/jobs', key, body, headers);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.job_id as string;
  }
  /** Bytes of every file managed storage holds under a directory (a key's prefix). */
  function storedBytes(dir: string): number {
    let total = 0;
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const p = join(d, name);
        if (statSync(p).isDirectory()) walk(p);
        else total += statSync(p).size;
      }
    };
    walk(dir);
    return total;
  }

  it('a limited, billed key: jobs complete until the quota is reached, then 403; usage matches what was stored and billed', async () => {
    const customer = 'cus_quota1';
    const now = Math.floor(Date.now() / 1000);
    stripe.subscriptions.push({ customer, periodStart: now - 86400, periodEnd: now + 29 * 86400 });
    const made = await createApiKey(svc.db.pool, { name: 'quota', storageLimitBytes: GIB, billingCustomer: customer });
    const key = made.key;

    // A source that gives no size (no Content-Length, and yt-dlp knows none): its jobs hold the default while they run.
    const unsized = media.unsizedUrl(MEDIA.mp4.path);
    const first = await submit(key, { url: unsized });
    // Reserved while it runs (512 MiB per job, api-gateway/README.md "Usage and storage quota").
    expect(await usage(key)).to.deep.include({ usage_count: 1, storage_reserved_gb: 512 * MIB / GIB });
    expect((await ended(key, first)).status).to.equal('Completed');

    // Two more reserve 1 GiB together, on top of what the first stored: the next is refused.
    const second = await submit(key, { url: unsized, max_resolution: 'lowest' });
    const third = await submit(key, { url: unsized, audio_only: true });
    const refused = await request('POST', '/jobs', key, { url: media.mp4Url });
    expect(refused.status).to.equal(403);
    expect(Object.keys(refused.body).sort()).to.deep.equal(['error', 'limit_gb', 'message', 'used_gb']);
    expect(refused.body).to.include({ error: 'Storage quota exceeded', limit_gb: '1', used_gb: '1' });
    const bulk = await request('POST', '/jobs/bulk', key, { urls: [media.mp4Url] });
    expect(bulk.status).to.equal(403);
    expect(bulk.body.error).to.equal('Storage quota exceeded');

    for (const id of [second, third]) expect((await ended(key, id)).status).to.equal('Completed');
    const u = await usage(key);
    expect(u).to.deep.include({ usage_count: 3, storage_reserved_gb: 0, storage_limit_gb: 1, storage_limit_bytes: GIB });
    const stored = (u.storage_usage_gb as number) * GIB;
    // Byte for byte what managed storage holds for the key, and the jobs' own sizes.
    expect(stored).to.equal(storedBytes(join(svc.env.MANAGED_STORAGE_DIR!, (await job(key, first)).s3_key as string, '..', '..')));
    let sizes = 0;
    for (const id of [first, second, third]) sizes += (await job(key, id)).file_size as number;
    expect(stored).to.equal(sizes);
    expect(u.storage_remaining_gb).to.equal((GIB - stored) / GIB);

    // Billed: the same bytes, one meter event per job, read back through GET /usage.
    await eventually(() => stripe.events.filter((e) => e.customer === customer).length === 3, 30_000, 100);
    expect(stripe.usage(customer)).to.equal(stored);
    const billed = await usage(key);
    expect(billed).to.include({ billing_period_start: new Date((now - 86400) * 1000).toISOString() });
    expect(billed.current_period_usage_gb).to.equal(u.storage_usage_gb);

    // With the reservations released there is room again.
    expect((await request('POST', '/jobs', key, { url: media.mp4Url, audio_only: true })).status).to.equal(201);
    // Stripe down: GET /usage still answers, with billing_error.
    stripe.outage = true;
    try {
      const down = await usage(key);
      expect(down.billing_error).to.be.a('string');
      expect(down).to.include({ storage_usage_gb: u.storage_usage_gb });
    } finally {
      stripe.outage = false;
    }
  });

  // Slow (about 25 s): the source is served at a 20 s pace, so that the reservation is seen while the job runs.
  it('a running job reserves its source\'s size once the runner knows it (here the Content-Length), and releases it when it ends', async () => {
    const key = await newKey();
    const sourceBytes = statSync(join(await generateMedia(), MEDIA.mp4.path)).size;
    // 20 s of download: the runner reports what it expects long before it is done.
    const id = await submit(key, { url: media.slowUrl(20) });
    const expected = await eventually(async () => {
      const r = await svc.cluster.kubectl(['get', 'mediajob', id, '-o', 'jsonpath={.status.expectedBytes}']);
      return r.stdout ? Number(r.stdout) : undefined;
    }, 60_000, 200);
    expect(expected).to.equal(sourceBytes);
    // The reservation follows: no longer 512 MiB but the source's size, at least the documented 1 MiB (a reservation of 0 would mean it ended).
    await eventually(async () => (await usage(key)).storage_reserved_gb === Math.max(MIB, sourceBytes) / GIB, 30_000, 200);
    const done = await ended(key, id);
    expect(done.status).to.equal('Completed');
    const u = await usage(key);
    expect(u).to.deep.include({ storage_reserved_gb: 0, usage_count: 1 });
    expect((u.storage_usage_gb as number) * GIB).to.equal(done.file_size);
  });

  it('a resolution-limited key gets a file no larger than its limit, whatever max_resolution asks', async () => {
    const key = await newKey({ maxResolution: '144' });
    const id = await submit(key, { url: media.mp4Url, max_resolution: 'best' });
    const done = await ended(key, id);
    expect(done.status, JSON.stringify(done)).to.equal('Completed');
    const file = join(svc.env.MANAGED_STORAGE_DIR!, done.s3_key as string);
    const probe = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=width,height', '-of', 'json', file], { encoding: 'utf8' })) as { streams: { width: number; height: number }[] };
    expect(Math.min(probe.streams[0]!.width, probe.streams[0]!.height)).to.be.at.most(144);
    expect(readFileSync(file).length).to.equal(done.file_size);
  });

  it('a duration-limited key: media longer than the limit fails with a clear error, and nothing is stored', async () => {
    const key = await newKey({ maxDurationSeconds: 1 });
    const id = await submit(key, { url: media.mp4Url });
    const done = await ended(key, id);
    expect(done.status).to.equal('Failed');
    expect(done.error).to.match(/duration/i);
    expect(done.s3_key).to.equal(null);
    expect(await usage(key)).to.deep.include({ storage_usage_gb: 0, storage_reserved_gb: 0, max_duration_limit_seconds: 1 });
  });

  it('the rate limit: an organization\'s keys share one budget, another organization is unaffected, 503 while Redis is down', async () => {
    const org = (await createOrganization(svc.db.pool, 'busy')).id;
    const [a1, a2] = [await newKey({ organizationId: org }), await newKey({ organizationId: org })];
    const other = await newKey({ organizationId: (await createOrganization(svc.db.pool, 'quiet')).id });
    // More than two windows' worth at once, from both keys of the organization.
    const burst = await Promise.all(Array.from({ length: 3 * RATE }, (_, i) => request('GET', '/usage', i % 2 ? a1 : a2)));
    const limited = burst.filter((r) => r.status === 429);
    expect(limited.length, 'some refused').to.be.greaterThan(0);
    expect(burst.filter((r) => r.status === 200).length, 'at most two windows served').to.be.at.most(2 * RATE);
    expect(limited[0]!.body).to.deep.equal({ error: 'rate_limit_exceeded' });
    expect(limited[0]!.headers.get('retry-after')).to.equal('1');
    // One key spends the budget, and the other is refused in the same window: the budget is the organization's.
    let shared: boolean | undefined;
    for (let attempt = 0; attempt < 5 && shared === undefined; attempt++) {
      const spent = await Promise.all(Array.from({ length: RATE + 5 }, () => request('GET', '/usage', a1)));
      expect(spent.some((r) => r.status === 429)).to.equal(true);
      const sibling = await request('GET', '/usage', a2);
      const again = await request('GET', '/usage', a1);
      if (sibling.status === 429) shared = true;
      else if (again.status === 429) shared = false; // the sibling was served inside a window its organization had spent
      // else: the window turned between the two; try again.
    }
    expect(shared, 'the sibling key is refused in a window the other key spent').to.equal(true);
    expect((await request('GET', '/usage', other)).status).to.equal(200);

    await redis.stop();
    try {
      const down = await eventually(async () => {
        const r = await request('GET', '/usage', other);
        return r.status === 503 ? r : undefined;
      }, 15_000, 100);
      expect(down.headers.get('retry-after')).to.match(/^\d+$/);
      expect(down.body.error).to.be.a('string');
    } finally {
      await redis.start();
    }
    await eventually(async () => (await request('GET', '/usage', other)).status === 200, 30_000, 200);
  });

  it('a marketplace user: the header is required, storage on the first job is saved for the next, usage is per end user', async () => {
    const key = await newKey({ kind: 'marketplace' });
    const user = { 'x-marketplace-user': 'buyer-42' };
    const missing = await request('POST', '/jobs', key, { url: media.mp4Url });
    expect(missing.status).to.equal(400);
    expect(missing.body.error).to.match(/^Missing x-marketplace-user header/);
    const noStorage = await request('POST', '/jobs', key, { url: media.mp4Url }, user);
    expect(noStorage.status).to.equal(400);
    expect(noStorage.body.error).to.match(/storage/);

    const storage = { provider: 's3', endpoint: s3.endpoint, bucket: 'market', region: 'us-east-1', access_key: s3.accessKeyId, secret_key: s3.secretAccessKey };
    const first = await submit(key, { url: media.mp4Url, storage }, user);
    expect((await ended(key, first, user)).status).to.equal('Completed');
    const second = await submit(key, { url: media.mp4Url, audio_only: true }, user);
    const done = await ended(key, second, user);
    expect(done.status).to.equal('Completed');

    const client = new S3Client({
      endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
    try {
      const keys = ((await client.send(new ListObjectsV2Command({ Bucket: 'market' }))).Contents ?? []).map((o) => o.Key);
      expect(keys).to.include.members([(await job(key, first, user)).s3_key, done.s3_key]);
    } finally {
      client.destroy();
    }
    expect(await usage(key, user)).to.include({ usage_count: 2 });
    expect(await usage(key, { 'x-marketplace-user': 'buyer-43' })).to.include({ usage_count: 0 });
    // Another end user does not see the first one's jobs.
    expect((await request('GET', `/jobs/${first}`, key, undefined, { 'x-marketplace-user': 'buyer-43' })).status).to.equal(404);
  });
});
