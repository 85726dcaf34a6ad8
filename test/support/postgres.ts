// A throw-away database on the machine's PostgreSQL per test suite, with
// the gateway's migrations applied, dropped again afterwards. A migrated
// database is a copy of a template (CREATE DATABASE … TEMPLATE), itself
// migrated once per server and set of migrations and kept for later runs:
// a copy costs a third of creating and migrating one.
import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadMigrations, migrate } from '../../api-gateway/src/db/migrate.js';

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
  const template = (opts.migrate ?? true) ? await migratedTemplate(adminUrl) : undefined;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    // Identifiers cannot be parameters; the names are made here from hex only.
    await admin.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`);
  } finally {
    await admin.end();
  }
  const url = databaseUrl(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on('error', () => undefined);
  return {
    name,
    url,
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

function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Template name per server, made at most once per process. */
const templates = new Map<string, Promise<string>>();

/**
 * The name of a database on `adminUrl`'s server with every migration of this
 * checkout applied, named by their hash, made the first time it is asked for
 * (one process makes it while the others wait on an advisory lock). Nobody
 * stays connected to it: CREATE DATABASE … TEMPLATE refuses a template in use.
 */
function migratedTemplate(adminUrl: string): Promise<string> {
  let t = templates.get(adminUrl);
  if (!t) {
    t = makeTemplate(adminUrl).catch((err: unknown) => {
      templates.delete(adminUrl);
      throw err;
    });
    templates.set(adminUrl, t);
  }
  return t;
}

/** Arbitrary but fixed: the advisory lock id of "a test template is being made". */
const TEMPLATE_LOCK_ID = 0x6d6a7470; // "mjtp"

async function makeTemplate(adminUrl: string): Promise<string> {
  const hash = createHash('sha256').update(JSON.stringify(loadMigrations())).digest('hex').slice(0, 16);
  const name = `mediajobs_template_${hash}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query('SELECT pg_advisory_lock($1)', [TEMPLATE_LOCK_ID]);
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount) return name;
    // Made under another name and renamed when whole, so a run killed mid-way leaves no half-migrated template.
    const making = `${name}_making`;
    await admin.query(`DROP DATABASE IF EXISTS ${making} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${making}`);
    const pool = new pg.Pool({ connectionString: databaseUrl(adminUrl, making), max: 1 });
    try {
      await migrate(pool);
    } finally {
      await pool.end();
    }
    await admin.query(`ALTER DATABASE ${making} RENAME TO ${name}`);
    // Templates of older migration sets are of no more use (one a run still copies from stays until next time).
    const old = await admin.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE datname LIKE 'mediajobs\_template\_%' AND datname <> $1", [name]);
    for (const { datname } of old.rows) await admin.query(`DROP DATABASE IF EXISTS "${datname.replace(/"/g, '""')}"`).catch(() => undefined);
    return name;
  } finally {
    await admin.query('SELECT pg_advisory_unlock($1)', [TEMPLATE_LOCK_ID]).catch(() => undefined);
    await admin.end();
  }
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
