import { expect } from 'chai';
import pg from 'pg';
import { withClient, withTransaction } from '../src/pg-client.js';
import { createTestDatabase, PG_ADMIN_URL, type TestDatabase } from '../../test/support/postgres.js';

describe('checked-out Postgres clients (real PostgreSQL)', () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase('mediajobs_pgclient', { migrate: false });
    await db.pool.query('CREATE TABLE t (v int)');
  });
  after(async () => db?.drop());

  it('survives its connection being terminated while checked out, and the pool replaces it', async () => {
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    try {
      // Without a listener the 'error' event would be an uncaught exception (mocha fails the test on one).
      await withClient(db.pool, async (client) => {
        const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        await new Promise((r) => setTimeout(r, 200));
      });
    } finally {
      await admin.end();
    }
    const r = await db.pool.query<{ one: number }>('SELECT 1 AS one');
    expect(r.rows[0]!.one).to.equal(1);
  });

  it('commits what the function wrote, and rolls back when it throws', async () => {
    await withTransaction(db.pool, (c) => c.query('INSERT INTO t VALUES (1)'));
    const failed = await withTransaction(db.pool, async (c) => {
      await c.query('INSERT INTO t VALUES (2)');
      throw new Error('boom');
    }).catch((err: Error) => err.message);
    expect(failed).to.equal('boom');
    const rows = (await db.pool.query<{ v: number }>('SELECT v FROM t ORDER BY v')).rows.map((r) => r.v);
    expect(rows).to.deep.equal([1]);
  });
});
