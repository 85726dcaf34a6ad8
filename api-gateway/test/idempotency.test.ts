// Idempotency keys on POST /jobs and POST /jobs/bulk (issue 15), through the
// real gateway on real Postgres: a retry gets the first answer and creates
// nothing, concurrent duplicates create one job, a different request or one
// still running under the same key is refused, failures without a final
// answer release the key, and answers expire after 24 hours.
import { expect } from 'chai';
import type pg from 'pg';
import { SWEEP_EVERY } from '@mediajobs/lib/db/idempotency';
import { KEY_IN_FLIGHT, KEY_REUSED, MALFORMED_KEY } from '../src/idempotency.js';
import { materialize, startTestGateway, type TestGateway } from './support.js';

const SRC = 'https://media.example/watch?v=idem';
const BODY = { url: SRC, format: 'mp4', max_resolution: '1080' };

/** Resolves once `check` holds, polling every 20 ms (up to 10 s). */
async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in 10 s');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A POST /jobs insert statement (lib/src/db/jobs.ts jobInserter's named statements). */
const isJobInsert = (q: unknown): boolean =>
  typeof q === 'object' && q !== null && 'name' in q && typeof q.name === 'string' && q.name.startsWith('mj-insert-job-');

/**
 * While closed, holds a POST /jobs after its insert statement has returned
 * (the job and its key row are committed) and before the route goes on to
 * answer: the request stays in flight past its commit for as long as a test
 * needs, as if its gateway stalled or died there.
 */
class AfterCommitGate {
  private closed = false;
  private waiting: (() => void)[] = [];
  private arrivals: (() => void)[] = [];

  constructor(pool: pg.Pool) {
    type Query = (...args: unknown[]) => Promise<unknown>;
    const query = (pool.query as unknown as Query).bind(pool);
    (pool as unknown as { query: Query }).query = async (...args) => {
      const result = await query(...args);
      if (this.closed && isJobInsert(args[0])) {
        const released = new Promise<void>((r) => this.waiting.push(r));
        for (const arrived of this.arrivals.splice(0)) arrived();
        await released;
      }
      return result;
    };
  }

  close(): void {
    this.closed = true;
  }

  open(): void {
    this.closed = false;
    for (const release of this.waiting.splice(0)) release();
  }

  /** Resolves when the next insert has committed and reached the closed gate. */
  nextArrival(): Promise<void> {
    return new Promise((r) => this.arrivals.push(r));
  }
}

describe('api-gateway: Idempotency-Key on POST /jobs and POST /jobs/bulk', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let gate: AfterCommitGate | undefined;
  let key: { id: string; key: string };
  let n = 0;
  /** A new idempotency key in the draft's syntax (an sf-string). */
  const fresh = () => `"retry-${process.pid}-${++n}"`;

  before(async () => {
    gw = await startTestGateway();
    gate = new AfterCommitGate(gw.pool);
    key = await gw.newKey('idem');
  });
  after(async () => {
    gate?.open();
    await gw?.stop();
  });
  beforeEach(async () => {
    // What earlier tests accepted is materialized: each test sees the MediaJobs of its own rows only.
    await materialize(gw.pool);
  });
  /** The MediaJobs the operator would create for the rows accepted since the last call. */
  const mediaJobs = async () => (await materialize(gw.pool)).jobs;

  const post = (body: unknown, idem: string | undefined, opts: { path?: string; apiKey?: string } = {}) =>
    gw.request('POST', opts.path ?? '/jobs', { key: opts.apiKey ?? key.key, body, ...(idem !== undefined && { headers: { 'idempotency-key': idem } }) });
  const jobCount = async (url = SRC) => Number((await gw.pool.query('SELECT count(*) AS n FROM jobs WHERE url = $1', [url])).rows[0].n);
  const keyRows = async () => Number((await gw.pool.query('SELECT count(*) AS n FROM idempotency_keys')).rows[0].n);
  const uniqueBody = () => ({ ...BODY, url: `${SRC}-${++n}` });

  it('without the header: a job per request, nothing remembered', async () => {
    const before = await keyRows();
    const body = uniqueBody();
    const [a, b] = [await post(body, undefined), await post(body, undefined)];
    expect([a.status, b.status]).to.deep.equal([201, 201]);
    expect(a.body).to.not.deep.equal(b.body);
    expect(a.headers.get('idempotent-replayed')).to.equal(null);
    expect(await jobCount(body.url)).to.equal(2);
    expect(await keyRows()).to.equal(before);
  });

  it('a sequential retry answers the first response again (status, body, Location) and creates nothing', async () => {
    const body = uniqueBody();
    const idem = fresh();
    const first = await post(body, idem);
    expect(first.status).to.equal(201);
    expect(first.headers.get('idempotent-replayed')).to.equal(null);
    const again = await post(body, idem);
    expect(again.status).to.equal(201);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('location')).to.equal(first.headers.get('location'));
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(await jobCount(body.url)).to.equal(1);
    expect((await mediaJobs()).map((mj) => mj.metadata.name)).to.deep.equal([(first.body as { job_id: string }).job_id]);
  });

  it('the same body with its keys in another order is the same request; the bare-token form is the same key', async () => {
    const body = uniqueBody();
    const first = await post(body, '"order-test-1"');
    const reordered = await post({ max_resolution: body.max_resolution, url: body.url, format: body.format }, 'order-test-1');
    expect(reordered.status).to.equal(201);
    expect(reordered.body).to.deep.equal(first.body);
    expect(reordered.headers.get('idempotent-replayed')).to.equal('true');
    expect(await jobCount(body.url)).to.equal(1);
  });

  it('10 concurrent identical requests create exactly one job; the others get its replay or 409', async () => {
    const body = uniqueBody();
    const idem = fresh();
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(body, idem)));
    const created = answers.filter((a) => a.status === 201);
    expect(created.length).to.be.at.least(1);
    for (const a of answers) {
      if (a.status === 201) expect(a.body).to.deep.equal(created[0]!.body);
      else expect(a).to.deep.include({ status: 409, body: { error: KEY_IN_FLIGHT } });
    }
    expect(created.filter((a) => a.headers.get('idempotent-replayed') === null)).to.have.length(1);
    expect(await jobCount(body.url)).to.equal(1);
    expect(await mediaJobs()).to.have.length(1);
  });

  it('the same key with a different body: 422, nothing created', async () => {
    const idem = fresh();
    const first = await post(uniqueBody(), idem);
    expect(first.status).to.equal(201);
    const other = uniqueBody();
    const reused = await post(other, idem);
    expect(reused).to.deep.include({ status: 422, body: { error: KEY_REUSED } });
    expect(await jobCount(other.url)).to.equal(0);
  });

  it('the same key on the other route is a different request: 422', async () => {
    const idem = fresh();
    expect((await post({ urls: [`${SRC}-bulk-a`] }, idem, { path: '/jobs/bulk' })).status).to.equal(201);
    expect(await post({ urls: [`${SRC}-bulk-a`] }, idem)).to.deep.include({ status: 422, body: { error: KEY_REUSED } });
  });

  it('while the first request has not committed: 409 with Retry-After; once it answers, the replay', async () => {
    const body = uniqueBody();
    const idem = fresh();
    // A real slow insert, for this URL only: the first request's transaction stays open for 2 s.
    await gw.pool.query(`CREATE FUNCTION idem_slow() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.url = '${body.url}' THEN PERFORM pg_sleep(2); END IF; RETURN NEW; END $$`);
    await gw.pool.query('CREATE TRIGGER idem_slow BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION idem_slow()');
    try {
      const first = post(body, idem);
      await until(async () => (await gw.pool.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted")).rowCount === 1);
      const during = await post(body, idem);
      expect(during).to.deep.include({ status: 409, body: { error: KEY_IN_FLIGHT } });
      expect(during.headers.get('retry-after')).to.equal('1');
      const done = await first;
      expect(done.status).to.equal(201);
      const after = await post(body, idem);
      expect(after).to.deep.include({ status: 201, body: done.body });
      expect(after.headers.get('idempotent-replayed')).to.equal('true');
    } finally {
      await gw.pool.query('DROP TRIGGER idem_slow ON jobs; DROP FUNCTION idem_slow()');
    }
    expect(await jobCount(body.url)).to.equal(1);
  });

  it('once the job is committed, a retry gets its answer even before the first request answered (its gateway stalled or died)', async () => {
    const body = uniqueBody();
    const idem = fresh();
    gate!.close();
    const arrived = gate!.nextArrival();
    const first = post(body, idem);
    await arrived; // the job and its key are committed; the first answer is held at the gate
    const retry = await post(body, idem);
    gate!.open();
    const late = await first;
    expect(late.status).to.equal(201);
    expect(retry).to.deep.include({ status: 201, body: late.body });
    expect(retry.headers.get('idempotent-replayed')).to.equal('true');
    expect(retry.headers.get('location')).to.equal(`/jobs/${(late.body as { job_id: string }).job_id}`);
    expect(await jobCount(body.url)).to.equal(1);
    expect(await mediaJobs()).to.have.length(1);
  });


  it('keys are per API key: another key with the same idempotency key gets its own job', async () => {
    const other = await gw.newKey('idem-other');
    const body = uniqueBody();
    const idem = fresh();
    const mine = await post(body, idem);
    const theirs = await post(body, idem, { apiKey: other.key });
    expect([mine.status, theirs.status]).to.deep.equal([201, 201]);
    expect(theirs.headers.get('idempotent-replayed')).to.equal(null);
    expect(theirs.body).to.not.deep.equal(mine.body);
    expect(await jobCount(body.url)).to.equal(2);
  });

  it('a malformed header: 400 naming the header, nothing created or remembered', async () => {
    const before = await keyRows();
    const body = uniqueBody();
    const long = 'k'.repeat(256);
    for (const bad of ['""', '"unterminated', 'two words', '"a", "b"', '"x";param=1', `"${long}"`, long, '"tab\there"', '"bad\\escape"']) {
      const r = await post(body, bad);
      expect(r, bad).to.deep.include({ status: 400, body: { error: MALFORMED_KEY } });
    }
    expect(await jobCount(body.url)).to.equal(0);
    expect(await keyRows()).to.equal(before);
    // The longest key allowed, with escapes counted as the characters they stand for.
    expect((await post(body, `"${'k'.repeat(253)}\\"\\\\"`)).status).to.equal(201);
  });

  it('POST /jobs/bulk: the replay has the same job_ids, and no rows or MediaJobs are added', async () => {
    const idem = fresh();
    const urls = [`${SRC}-b1`, `${SRC}-b2`, `${SRC}-b3`];
    const first = await post({ urls, format: 'mp4' }, idem, { path: '/jobs/bulk' });
    expect(first.status).to.equal(201);
    const again = await post({ format: 'mp4', urls }, idem, { path: '/jobs/bulk' });
    expect(again.status).to.equal(201);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    for (const u of urls) expect(await jobCount(u)).to.equal(1);
    expect((await mediaJobs()).map((mj) => mj.spec.url).sort()).to.deep.equal(urls);
  });

  it('a 4xx answer is final: the retry replays it', async () => {
    const idem = fresh();
    const bad = { url: SRC, max_resolution: 'huge' };
    const first = await post(bad, idem);
    expect(first.status).to.equal(400);
    const again = await post(bad, idem);
    expect(again).to.deep.include({ status: 400, body: first.body });
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
  });

  it('a 5xx answer keeps nothing: the retry runs again and creates the job', async () => {
    const body = uniqueBody();
    const idem = fresh();
    // A real database failure of the insert, for this URL only.
    await gw.pool.query(`CREATE FUNCTION idem_fail() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.url = '${body.url}' THEN RAISE EXCEPTION 'disk full'; END IF; RETURN NEW; END $$`);
    await gw.pool.query('CREATE TRIGGER idem_fail BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION idem_fail()');
    try {
      expect(await post(body, idem)).to.deep.include({ status: 500, body: { error: 'Failed to create job' } });
    } finally {
      await gw.pool.query('DROP TRIGGER idem_fail ON jobs; DROP FUNCTION idem_fail()');
    }
    const retry = await post(body, idem);
    expect(retry.status).to.equal(201);
    expect(retry.headers.get('idempotent-replayed')).to.equal(null);
    expect(await jobCount(body.url)).to.equal(1);
  });

  it('after 24 hours the answer is forgotten: the same key creates a new job, and expired rows are swept', async () => {
    const body = uniqueBody();
    const idem = fresh();
    const first = await post(body, idem);
    const stale = fresh();
    expect((await post(uniqueBody(), stale)).status).to.equal(201);
    await gw.pool.query("UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key IN ($1, $2)", [idem.slice(1, -1), stale.slice(1, -1)]);
    const later = await post(body, idem);
    expect(later.status).to.equal(201);
    expect(later.headers.get('idempotent-replayed')).to.equal(null);
    expect(later.body).to.not.deep.equal(first.body);
    expect(await jobCount(body.url)).to.equal(2);
    // One keyed request in SWEEP_EVERY sweeps, after its answer.
    for (let i = 0; i < SWEEP_EVERY; i++) expect((await post({ urls: [`${SRC}-sweep-${i}`] }, fresh(), { path: '/jobs/bulk' })).status).to.equal(201);
    await until(async () => (await gw.pool.query('SELECT key FROM idempotency_keys WHERE key = $1', [stale.slice(1, -1)])).rowCount === 0);
  });




  it('a storage_provider that is not configured: the 400 is replayed and no job or MediaJob exists', async () => {
    const idem = fresh();
    const body = { ...uniqueBody(), storage_provider: 'gcs' };
    const first = await post(body, idem);
    expect(first).to.deep.include({ status: 400, body: { error: 'storage_provider_not_configured' } });
    const again = await post(body, idem);
    expect(again).to.deep.include({ status: 400, body: first.body });
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(await jobCount(body.url)).to.equal(0);
    expect(await mediaJobs()).to.deep.equal([]);
  });

});
