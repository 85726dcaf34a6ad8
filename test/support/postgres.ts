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
export async function createTestDatabase(
  prefix = 'mediajobs_test', opts: { migrate?: boolean; /** Another server's admin URL (postgres-server.ts); default PG_ADMIN_URL. */ adminUrl?: string } = {},
): Promise<TestDatabase> {
  const adminUrl = opts.adminUrl ?? PG_ADMIN_URL;
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  // Identifiers cannot be parameters; the name is made here from hex only.
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 10 });
  pool.on('error', () => undefined);
  if (opts.migrate ?? true) await migrate(pool);
  return {
    name,
    url: url.toString(),
    pool,
    async drop() {
      await pool.end();
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      try {
        // Everything the suite started should have closed its connections by now;
        // one still open is a leak worth seeing, though FORCE ends it either way.
        const left = await openConnections(a, name);
        if (left.length) console.error(`test database ${name} still has connections at drop: ${JSON.stringify(left)}`);
        await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}

/** Connections to `db` other than `admin`'s own, waiting up to 2 s for closing ones to go. */
async function openConnections(admin: pg.Client, db: string): Promise<{ pid: number; state: string; query: string }[]> {
  for (let i = 0; ; i++) {
    const r = await admin.query<{ pid: number; state: string; query: string }>(
      'SELECT pid, state, query FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db]);
    if (!r.rows.length || i >= 20) return r.rows;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** An API key row for tests (the key itself is irrelevant here: its hash is random). */
export async function insertApiKey(pool: pg.Pool, name = 'test'): Promise<string> {
  const r = await pool.query<{ id: string }>(
    `INSERT INTO api_keys (name, key_hash, key_prefix) VALUES ($1, $2, 'mj_test') RETURNING id`,
    [name, randomBytes(32).toString('hex')]);
  return r.rows[0]!.id;
}
