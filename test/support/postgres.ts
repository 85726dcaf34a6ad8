// A throw-away database on the machine's PostgreSQL per test suite, with
// the gateway's migrations applied, dropped again afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../api-gateway/src/db/migrate.js';

/** The server tests run against; the CI machine's PostgreSQL trusts local connections. */
export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  name: string;
  url: string;
  /** A pool on the database (connects lazily). */
  pool: pg.Pool;
  drop(): Promise<void>;
}

/** A fresh database; with `migrate` (default) the gateway's migrations are applied. */
export async function createTestDatabase(prefix = 'mediajobs_test', opts: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  // Identifiers cannot be parameters; the name is made here from hex only.
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 10 });
  if (opts.migrate ?? true) await migrate(pool);
  return {
    name,
    url: url.toString(),
    pool,
    async drop() {
      await pool.end();
      const a = new pg.Client({ connectionString: PG_ADMIN_URL });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}

/** An API key row for tests (the key itself is irrelevant here: its hash is random). */
export async function insertApiKey(pool: pg.Pool, name = 'test'): Promise<string> {
  const r = await pool.query<{ id: string }>(
    `INSERT INTO api_keys (name, key_hash, key_prefix) VALUES ($1, $2, 'mj_test') RETURNING id`,
    [name, randomBytes(32).toString('hex')]);
  return r.rows[0]!.id;
}
