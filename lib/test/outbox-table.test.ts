// The outbox table on real Postgres: event ids receivers already hold never
// change, an event is queued once, and the dispatcher's claims keep a job's
// events in order and off other dispatchers while an attempt is under way.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type pg from 'pg';
import {
  claimDueEvents, eventId, markDelivered, markFailed, queueBatchEvents, queueEvents, scheduleRetry, type OutboxEvent,
} from '../src/db/outbox.js';
import { withTransaction } from '../src/pg-client.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.js';

describe('lib: the outbox table (real PostgreSQL)', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let pool: pg.Pool;

  before(async () => {
    db = await createTestDatabase('mediajobs_outbox_table');
    pool = db.pool;
  });
  after(async () => db?.drop());
  beforeEach(async () => pool.query('TRUNCATE outbox'));

  const queue = (jobId: string, events: OutboxEvent[]) => withTransaction(pool, (c) => queueEvents(c, jobId, 'sealed-target', events));
  const row = async (eventIdValue: string) => (await pool.query<{ attempts: number; last_error: string | null; failed_at: Date | null }>(
    'SELECT attempts, last_error, failed_at FROM outbox WHERE event_id = $1', [eventIdValue])).rows[0]!;

  it('derives the same event ids as every release before (receivers drop duplicates by them)', () => {
    const job = '3f1c2a9e-0000-7000-8000-000000000001';
    expect(eventId(job, 'job_completed')).to.equal('9422a232-92f2-5cfc-a290-371bb3729044');
    expect(eventId(job, 'progress:muxing')).to.equal('36211964-6d30-5b82-a40e-8ecf41481218');
  });

  it('queues an event once, with its id in the body, however often the transition is replayed', async () => {
    const job = randomUUID();
    const events = [{ type: 'job_processing', payload: { job_id: job } }, { type: 'progress', key: 'progress:downloading', payload: { stage: 'downloading' } }];
    await queue(job, events);
    await queue(job, events);
    const r = await pool.query('SELECT event_id, type, target_enc, payload, attempts FROM outbox ORDER BY id');
    expect(r.rows).to.deep.equal([
      { event_id: eventId(job, 'job_processing'), type: 'job_processing', target_enc: 'sealed-target', attempts: 0,
        payload: { job_id: job, event_id: eventId(job, 'job_processing') } },
      { event_id: eventId(job, 'progress:downloading'), type: 'progress', target_enc: 'sealed-target', attempts: 0,
        payload: { stage: 'downloading', event_id: eventId(job, 'progress:downloading') } },
    ]);
  });

  it('claims only the oldest open event of each job, counts the attempt, and leases it', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await queue(a, [{ type: 'job_processing', payload: {} }, { type: 'job_completed', payload: {} }]);
    await queue(b, [{ type: 'job_failed', payload: {} }]);
    const first = await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 });
    // UPDATE … RETURNING gives no order; the claim's own order is by id.
    expect(first.map((e) => [e.event_id, e.attempts])).to.have.deep.members([[eventId(a, 'job_processing'), 1], [eventId(b, 'job_failed'), 1]]);
    expect(await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 }), 'leased').to.deep.equal([]);
    await markDelivered(pool, first.find((e) => e.event_id === eventId(a, 'job_processing'))!.id);
    const next = await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 });
    expect(next.map((e) => e.event_id)).to.deep.equal([eventId(a, 'job_completed')]);
  });

  it('holds back a job\'s later events while an earlier one waits for its retry', async () => {
    const a = randomUUID();
    await queue(a, [{ type: 'job_processing', payload: {} }, { type: 'job_completed', payload: {} }]);
    const [claimed] = await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 });
    await scheduleRetry(pool, claimed!.id, 'HTTP 500', 300);
    expect(await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 })).to.deep.equal([]);
    await new Promise((r) => setTimeout(r, 350));
    const again = await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 });
    expect(again.map((e) => [e.event_id, e.attempts])).to.deep.equal([[eventId(a, 'job_processing'), 2]]);
    expect(await row(eventId(a, 'job_processing'))).to.include({ last_error: 'HTTP 500' });
  });

  it('records why an event was given up: the last error, else that an attempt was interrupted', async () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    for (const job of [a, b, c]) await queue(job, [{ type: 'job_failed', payload: {} }]);
    const claimed = await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 });
    const idOf = (job: string) => claimed.find((e) => e.event_id === eventId(job, 'job_failed'))!.id;
    await markFailed(pool, idOf(a), 'timeout');
    await scheduleRetry(pool, idOf(b), 'HTTP 502', 0);
    await markFailed(pool, idOf(b));
    await markFailed(pool, idOf(c));
    expect(await row(eventId(a, 'job_failed'))).to.include({ last_error: 'timeout' });
    expect(await row(eventId(b, 'job_failed'))).to.include({ last_error: 'HTTP 502' });
    expect(await row(eventId(c, 'job_failed'))).to.include({ last_error: 'interrupted' });
    expect(await claimDueEvents(pool, { batch: 16, leaseSeconds: 0 })).to.deep.equal([]);
  });

  it('holds a batch\'s event back until every older event of its episodes is delivered or given up, episodes still in parallel', async () => {
    const [batch, e1, e2, lone] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const claim = async () => (await claimDueEvents(pool, { batch: 16, leaseSeconds: 60 })).map((e) => [e.event_id, e.id] as const);
    await withTransaction(pool, (c) => queueEvents(c, e1, 'sealed-target', [{ type: 'job_completed', payload: {} }], batch));
    await withTransaction(pool, async (c) => {
      await queueEvents(c, e2, 'sealed-target', [{ type: 'job_failed', payload: {} }], batch);
      await queueBatchEvents(c, batch, 'sealed-target', [{ type: 'batch_completed', payload: { batch_id: batch } }]);
    });
    await queue(lone, [{ type: 'job_failed', payload: {} }]);
    const first = new Map(await claim());
    expect([...first.keys()]).to.have.members([eventId(e1, 'job_completed'), eventId(e2, 'job_failed'), eventId(lone, 'job_failed')]);
    await markDelivered(pool, first.get(eventId(e1, 'job_completed'))!);
    expect(await claim()).to.deep.equal([]);
    await markFailed(pool, first.get(eventId(e2, 'job_failed'))!, 'HTTP 500');
    expect((await claim()).map(([id]) => id)).to.deep.equal([eventId(batch, 'batch_completed')]);
    // Queued once, whatever replays the batch's end.
    await withTransaction(pool, (c) => queueBatchEvents(c, batch, 'sealed-target', [{ type: 'batch_completed', payload: {} }]));
    const stored = await pool.query('SELECT job_id, batch_id, payload FROM outbox WHERE event_id = $1', [eventId(batch, 'batch_completed')]);
    expect(stored.rows).to.deep.equal([{ job_id: null, batch_id: batch, payload: { batch_id: batch, event_id: eventId(batch, 'batch_completed') } }]);
  });
});
