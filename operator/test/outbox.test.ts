// Webhook delivery from the outbox on Postgres, against a local receiver
// that fails, hangs or answers: how many POSTs an event gets and when the
// dispatcher gives up.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { OutboxDispatcher } from '../src/outbox.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.js';
import { eventually } from '../../local-cluster/test/support.js';

describe('operator: webhook outbox', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let server: Server;
  let url: string;
  const box = new SecretBox(SecretBox.generateSpec('t1'));
  /** What the receiver does with each POST. */
  let answer: 'ok' | 'fail' | 'hang' = 'fail';
  const posts: { eventId: string; at: number }[] = [];
  const dispatchers: OutboxDispatcher[] = [];

  before(async () => {
    db = await createTestDatabase('mediajobs_outbox');
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        posts.push({ eventId: String(req.headers['x-mediajobs-event-id']), at: Date.now() });
        if (answer === 'fail') res.writeHead(500).end();
        if (answer === 'ok') res.writeHead(200).end();
        // 'hang': never answer; the dispatcher's timeout must end the attempt.
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });

  afterEach(async () => {
    for (const d of dispatchers.splice(0)) await d.stop();
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await db.drop();
  });

  async function event(attempts = 0): Promise<string> {
    const eventId = randomUUID();
    // An event of no job or batch: its target is bound to its own row, known once inserted.
    const id = (await db.pool.query<{ id: string }>(
      `INSERT INTO outbox (event_id, job_id, type, target_enc, payload, attempts) VALUES ($1, NULL, 'job_failed', '', $2, $3) RETURNING id`,
      [eventId, { type: 'job_failed', event_id: eventId }, attempts])).rows[0]!.id;
    await db.pool.query('UPDATE outbox SET target_enc = $2 WHERE id = $1', [id, box.seal(url, sealedAt.ownOutboxTarget(id))]);
    return eventId;
  }

  const row = async (eventId: string) =>
    (await db.pool.query<{ attempts: number; failed_at: Date | null; delivered_at: Date | null; last_error: string | null }>(
      'SELECT attempts, failed_at, delivered_at, last_error FROM outbox WHERE event_id = $1', [eventId])).rows[0]!;

  const start = async (opts: { timeoutMs: number; backoffMs: number }) => {
    const d = new OutboxDispatcher(db.pool, box, pino({ level: 'silent' }), {
      ...opts, attempts: 3, pollMs: 20, outbound: { allowed: ['127.0.0.0/8'] },
    });
    dispatchers.push(d);
    await d.start();
  };

  it('gives up after 3 attempts with a growing delay between them, and marks the event failed', async () => {
    answer = 'fail';
    const id = await event();
    await start({ timeoutMs: 2000, backoffMs: 200 });
    await eventually(async () => (await row(id)).failed_at !== null, 10_000);
    await new Promise((r) => setTimeout(r, 1000));
    const mine = posts.filter((p) => p.eventId === id);
    expect(mine).to.have.length(3, 'three POSTs, none after giving up');
    // Backoff doubles from 200 ms; a retry can come late, never early.
    expect(mine[1]!.at - mine[0]!.at).to.be.at.least(190);
    expect(mine[2]!.at - mine[1]!.at).to.be.at.least(390);
    expect(await row(id)).to.include({ attempts: 3, last_error: 'HTTP 500', delivered_at: null });
  });

  it('gives up at once on a target moved from another row, and still delivers the event claimed with it', async () => {
    answer = 'ok';
    const moved = await event();
    const fine = await event();
    // A database writer copies the second row's sealed address onto the first: bound to its own row, it opens only there.
    await db.pool.query(`UPDATE outbox SET target_enc = (SELECT target_enc FROM outbox WHERE event_id = $2) WHERE event_id = $1`, [moved, fine]);
    await start({ timeoutMs: 2000, backoffMs: 200 });
    await eventually(async () => (await row(fine)).delivered_at !== null, 10_000);
    expect(await row(moved)).to.include({ attempts: 1, last_error: 'target_unreadable', delivered_at: null });
    expect((await row(moved)).failed_at).to.not.equal(null);
    expect(posts.filter((p) => p.eventId === moved)).to.have.length(0);
  });

  it('ends an attempt the receiver does not answer at the timeout', async () => {
    answer = 'hang';
    const id = await event();
    await start({ timeoutMs: 300, backoffMs: 50 });
    await eventually(async () => (await row(id)).failed_at !== null, 10_000);
    expect(posts.filter((p) => p.eventId === id)).to.have.length(3);
    expect(await row(id)).to.include({ attempts: 3, last_error: 'timeout' });
  });

  it('survives Postgres dropping its LISTEN connection after the dispatcher stopped (as on a shutdown)', async () => {
    await start({ timeoutMs: 2000, backoffMs: 50 });
    await dispatchers.pop()!.stop();
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    // Mocha's own handler would fail some later test; catch what this one causes.
    const mochaHandlers = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', onUncaught);
    try {
      const admin = await db.pool.connect();
      try {
        await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      } finally {
        admin.release();
      }
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      process.off('uncaughtException', onUncaught);
      for (const h of mochaHandlers) process.on('uncaughtException', h);
    }
    expect(uncaught.map(String)).to.deep.equal([]);
  });

  it('counts an attempt a crash cut short: an event claimed for its last attempt is not sent again', async () => {
    answer = 'fail';
    // As the outbox stands after a dispatcher claimed the third attempt and died before recording it.
    const id = await event(3);
    await start({ timeoutMs: 2000, backoffMs: 50 });
    await eventually(async () => (await row(id)).failed_at !== null, 10_000);
    expect(posts.filter((p) => p.eventId === id)).to.deep.equal([]);
  });
});
