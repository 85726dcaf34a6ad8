// Tenant isolation (issue 16, item 4): for every route that takes an id,
// key B's requests against key A's resources. Jobs (read, cancel, webhook
// log, redelivery) answer exactly what an id that does not exist answers,
// status and body, so B cannot tell A's ids from random ones; batches answer
// the spec's 401 `Batch does not belong to this API key` (spec, Errors: the
// spec makes another key's batch distinguishable from an unknown one; batch
// ids are UUIDv7, 74 random bits, so the distinction does not make them
// enumerable). Whatever B sends, A's resources read the same afterwards,
// and nothing of A's shows in B's lists, settings or idempotent answers.
import { expect } from 'chai';
import { BatchSources } from '@mediajobs/lib/batches/index';
import { queueEvents } from '@mediajobs/lib/db/outbox';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { Express } from 'express';
import { EXAMPLE_FEED } from '../../lib/test/batches-fixtures.js';
import { lookupResult, serve, startFakePlatform, type FakePlatform } from '../../lib/test/batches-support.js';
import { uuidv7 } from '../src/ids.js';
import { appRoutes, startTestGateway, type TestGateway } from './support.js';

type Json = Record<string, unknown>;

const SHOW_ID = '1000000001';
const SHOW_URL = `https://podcasts.apple.com/us/podcast/the-example-show/id${SHOW_ID}`;
const JOB_NOT_FOUND = [404, { error: 'Job not found' }] as const;
const BATCH_NOT_FOUND = [404, { error: 'Batch not found' }] as const;
const BATCH_NOT_OWNER = [401, { error: 'Batch does not belong to this API key' }] as const;

describe('api-gateway: tenant isolation, every route that takes an id', function () {
  this.timeout(60_000);
  let platform: FakePlatform;
  let gw: TestGateway;
  let a: { id: string; key: string };
  let b: { id: string; key: string };
  /** A's resources. */
  let job: string;
  let event: string;
  let batch: string;
  let episodes: string[];
  /** B's own job and batch, for the routes whose second id is A's. */
  let bJob: string;
  let bBatch: string;

  const answer = async (method: string, path: string, key: string, body?: unknown, headers?: Record<string, string>): Promise<[number, unknown]> => {
    const r = await gw.request(method, path, { key, ...(body !== undefined && { body }), ...(headers && { headers }) });
    return [r.status, r.body];
  };

  /** Everything A can read of its resources, to compare before and after B's attempts. */
  const aView = async () => ({
    job: await answer('GET', `/jobs/${job}`, a.key),
    webhooks: await answer('GET', `/jobs/${job}/webhooks`, a.key),
    batch: await answer('GET', `/batch/${batch}`, a.key),
    episode: await answer('GET', `/jobs/${episodes[0]!}`, a.key),
    list: await answer('GET', '/jobs?limit=100', a.key),
    chat: await answer('GET', '/user/chat', a.key),
    secret: await answer('GET', '/user/webhook-secret', a.key),
    s3: await answer('GET', '/user/s3', a.key),
    usage: await answer('GET', '/usage', a.key),
  });

  before(async () => {
    platform = await startFakePlatform();
    platform.routes.set('/feed.xml', serve(EXAMPLE_FEED));
    platform.shows.set(SHOW_ID, lookupResult(SHOW_ID, `${platform.baseUrl}/feed.xml`));
    const policy = new OutboundPolicy({ allowed: ['127.0.0.0/8', '::1/128'] });
    gw = await startTestGateway({
      batchSources: new BatchSources({ lookupEndpoint: platform.lookupEndpoint, maxEntries: 500, policy, mediaInfo: {} }),
    });
    a = await gw.newKey('tenant-a');
    b = await gw.newKey('tenant-b');

    const created = await answer('POST', '/jobs', a.key, { url: 'https://media.example/v.mp4', webhook_url: 'http://127.0.0.1:1/hook' });
    expect(created[0]).to.equal(201);
    job = (created[1] as Json).job_id as string;
    const { webhook_url_enc: enc } = (await gw.pool.query<{ webhook_url_enc: string }>('SELECT webhook_url_enc FROM jobs WHERE id = $1', [job])).rows[0]!;
    const client = await gw.pool.connect();
    try {
      await queueEvents(client, job, enc, [{ type: 'job_failed', payload: { type: 'job_failed', job_id: job, status: 'failed', error: 'boom' } }]);
    } finally {
      client.release();
    }
    event = (await gw.pool.query<{ event_id: string }>('SELECT event_id FROM outbox WHERE job_id = $1', [job])).rows[0]!.event_id;
    // Delivered and failed, so that a redelivery would be accepted for its owner.
    await gw.pool.query("UPDATE outbox SET failed_at = now(), last_error = 'boom' WHERE job_id = $1", [job]);

    const show = await answer('POST', '/jobs', a.key, { url: SHOW_URL, paused: true });
    expect(show[0]).to.equal(201);
    batch = (show[1] as Json).batch_id as string;
    episodes = (show[1] as Json).episode_jobs as string[];
    expect((await answer('POST', '/user/chat', a.key, { webhook_url: 'https://hooks.slack.com/services/T0/B0/a', notify_level: 'errors_only' }))[0]).to.equal(200);
    expect((await answer('POST', '/user/webhook-secret', a.key))[0]).to.equal(201);

    bJob = ((await answer('POST', '/jobs', b.key, { url: 'https://media.example/b.mp4' }))[1] as Json).job_id as string;
    bBatch = ((await answer('POST', '/jobs', b.key, { url: SHOW_URL, paused: true }))[1] as Json).batch_id as string;
  });

  after(async () => {
    await gw?.stop();
    await platform?.stop();
  });

  /** Every route with an id in its path, and what B gets for A's id; the table below must cover each. */
  const TABLE: { route: string; path: (id: string) => string; body?: () => unknown; aIs: () => string; spec: readonly [number, unknown]; unknown: readonly [number, unknown] }[] = [
    { route: 'GET /jobs/:id', path: (id) => `/jobs/${id}`, aIs: () => job, spec: JOB_NOT_FOUND, unknown: JOB_NOT_FOUND },
    { route: 'POST /jobs/:id/cancel', path: (id) => `/jobs/${id}/cancel`, aIs: () => job, spec: JOB_NOT_FOUND, unknown: JOB_NOT_FOUND },
    { route: 'GET /jobs/:id/webhooks', path: (id) => `/jobs/${id}/webhooks`, aIs: () => job, spec: JOB_NOT_FOUND, unknown: JOB_NOT_FOUND },
    {
      route: 'POST /jobs/:id/webhooks/:eventId/redeliver', path: (id) => `/jobs/${id}/webhooks/${event}/redeliver`, aIs: () => job,
      spec: JOB_NOT_FOUND, unknown: JOB_NOT_FOUND,
    },
    { route: 'GET /batch/:id', path: (id) => `/batch/${id}`, aIs: () => batch, spec: BATCH_NOT_OWNER, unknown: BATCH_NOT_FOUND },
    {
      route: 'PATCH /batch/:id/jobs', path: (id) => `/batch/${id}/jobs`, body: () => ({ renames: [{ job_id: episodes[0], filename: 'taken' }] }), aIs: () => batch,
      spec: BATCH_NOT_OWNER, unknown: BATCH_NOT_FOUND,
    },
    { route: 'POST /batch/:id/start', path: (id) => `/batch/${id}/start`, aIs: () => batch, spec: BATCH_NOT_OWNER, unknown: BATCH_NOT_FOUND },
    { route: 'POST /batch/:id/cancel', path: (id) => `/batch/${id}/cancel`, aIs: () => batch, spec: BATCH_NOT_OWNER, unknown: BATCH_NOT_FOUND },
  ];

  it('the table covers every authenticated route with an id in its path', () => {
    const withId = appRoutes(gw.server.listeners('request')[0] as Express)
      .filter(([, path]) => /\/:id\b/.test(path)).map(([m, p]) => `${m} ${p}`).sort();
    expect(withId).to.deep.equal(TABLE.map((r) => r.route).sort());
  });

  for (const row of [
    'GET /jobs/:id', 'POST /jobs/:id/cancel', 'GET /jobs/:id/webhooks', 'POST /jobs/:id/webhooks/:eventId/redeliver',
    'GET /batch/:id', 'PATCH /batch/:id/jobs', 'POST /batch/:id/start', 'POST /batch/:id/cancel',
  ]) {
    it(`${row}: B gets the spec's answer for A's id, and A's resources are unchanged`, async () => {
      const r = TABLE.find((t) => t.route === row)!;
      const method = row.split(' ')[0]!;
      const before = await aView();
      const aId = r.aIs();
      const body = r.body?.();
      const got = await answer(method, r.path(aId), b.key, body);
      expect(got, 'A\'s id').to.deep.equal(r.spec);
      // The id as A's own client might write it: the same answer.
      expect(await answer(method, r.path(aId.toUpperCase()), b.key, body), 'A\'s id, upper case').to.deep.equal(r.spec);
      expect(await answer(method, r.path(uuidv7()), b.key, body), 'an unknown id').to.deep.equal(r.unknown);
      if (r.spec[0] === 404) expect(got, 'indistinguishable from an unknown id').to.deep.equal(r.unknown);
      expect(await aView()).to.deep.equal(before);
    });
  }

  it('B\'s own job with A\'s event id: the same 404 as an unknown event; nothing queued for A', async () => {
    const unknownEvent = await answer('POST', `/jobs/${bJob}/webhooks/${uuidv7()}/redeliver`, b.key);
    expect(unknownEvent).to.deep.equal([404, { error: 'Webhook event not found for this job' }]);
    expect(await answer('POST', `/jobs/${bJob}/webhooks/${event}/redeliver`, b.key)).to.deep.equal(unknownEvent);
    const { rows } = await gw.pool.query<{ redeliveries: number }>('SELECT redeliveries FROM outbox WHERE job_id = $1', [job]);
    expect(rows.map((r) => r.redeliveries)).to.deep.equal([0]);
  });

  it('B\'s own paused batch renaming A\'s episode: the error of a job not in the batch, A\'s episode untouched', async () => {
    const stranger = uuidv7();
    const [status, body] = await answer('PATCH', `/batch/${bBatch}/jobs`, b.key, { renames: [{ job_id: episodes[0], filename: 'stolen' }, { job_id: stranger, filename: 'x' }] });
    expect(status).to.equal(200);
    const { updated, errors } = body as { updated: number; errors: string[] };
    expect(updated).to.equal(0);
    expect(errors.map((e) => e.replace(episodes[0]!, '<id>').replace(stranger, '<id>'))).to.deep.equal([
      'Job <id> does not belong to this batch', 'Job <id> does not belong to this batch',
    ]);
    const { rows } = await gw.pool.query<{ filename: string | null }>("SELECT options->>'filename' AS filename FROM jobs WHERE id = $1", [episodes[0]]);
    expect(rows[0]!.filename).to.not.equal('stolen');
  });

  it('lists, settings and usage: B sees none of A\'s', async () => {
    const [status, list] = await answer('GET', '/jobs?limit=100', b.key);
    expect(status).to.equal(200);
    const ids = (list as { jobs: { id?: string; job_id?: string }[] }).jobs.map((j) => j.id ?? j.job_id);
    expect(ids).to.not.include(job);
    for (const e of episodes) expect(ids).to.not.include(e);
    expect((list as { total: number }).total).to.equal(ids.length);
    expect(await answer('GET', '/user/chat', b.key)).to.deep.equal([200, { configured: false }]);
    expect((await answer('GET', '/user/webhook-secret', b.key))[1]).to.deep.include({ configured: false });
    // B removing its settings removes nothing of A's.
    const before = await aView();
    await answer('DELETE', '/user/chat', b.key);
    await answer('DELETE', '/user/s3', b.key);
    await answer('DELETE', '/user/bucket', b.key);
    expect(await aView()).to.deep.equal(before);
  });

  // Last: it changes A's resources. What B was refused is what A itself may do, so the refusals above were real ones.
  it('A\'s own requests do what B\'s could not', async () => {
    expect((await answer('GET', '/user/chat', a.key))[1]).to.deep.include({ configured: true });
    expect((await answer('POST', `/jobs/${job}/webhooks/${event}/redeliver`, a.key))[0]).to.equal(202);
    expect((await answer('PATCH', `/batch/${batch}/jobs`, a.key, { renames: [{ job_id: episodes[0], filename: 'mine' }] }))[1]).to.deep.equal({ updated: 1, errors: [] });
    expect((await answer('POST', `/batch/${batch}/start`, a.key))[0]).to.equal(200);
    expect((await answer('POST', `/batch/${batch}/cancel`, a.key))[0]).to.equal(200);
    expect(await answer('POST', `/jobs/${job}/cancel`, a.key)).to.have.nested.property('[1].status', 'Cancelled');
  });

  it('an Idempotency-Key A used: B gets its own new job, never A\'s answer or a conflict', async () => {
    const idem = { 'idempotency-key': `shared-${uuidv7()}` };
    const first = await answer('POST', '/jobs', a.key, { url: 'https://media.example/idem.mp4' }, idem);
    expect(first[0]).to.equal(201);
    const other = await answer('POST', '/jobs', b.key, { url: 'https://media.example/other.mp4' }, idem);
    expect(other[0]).to.equal(201);
    expect((other[1] as Json).job_id).to.not.equal((first[1] as Json).job_id);
    expect(await answer('GET', `/jobs/${(first[1] as Json).job_id as string}`, b.key)).to.deep.equal(JOB_NOT_FOUND);
  });
});
