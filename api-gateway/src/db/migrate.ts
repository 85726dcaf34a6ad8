// Schema migrations: the .sql files beside this module, applied in name
// order at start. Several gateway replicas may start at once, so the whole
// run holds a Postgres advisory lock; each file runs in its own transaction
// together with its schema_migrations row, so a failed file leaves nothing
// half-applied and is retried on the next start.
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { withClient } from '@mediajobs/lib/pg-client';

/** Arbitrary but fixed: the advisory lock id of "mediajobs migrations". */
export const MIGRATION_LOCK_ID = 0x6d6a6d67; // "mjmg"

export const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

export interface Migration {
  version: string;
  sql: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => ({ version: f.replace(/\.sql$/, ''), sql: readFileSync(`${dir}/${f}`, 'utf8') }));
}

/** Apply what is missing; returns the versions applied by this call. */
export async function migrate(pool: pg.Pool, migrations = loadMigrations()): Promise<string[]> {
  const applied: string[] = [];
  await withClient(pool, async (client) => {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version text PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
      const done = new Set((await client.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
      for (const m of migrations) {
        if (done.has(m.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw new Error(`migration ${m.version} failed: ${(err as Error).message}`, { cause: err });
        }
        applied.push(m.version);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]);
    }
  });
  return applied;
}

/** True when every migration this build knows is recorded (for /readyz). */
export async function migrationsApplied(pool: pg.Pool, migrations = loadMigrations()): Promise<boolean> {
  const latest = migrations.at(-1)?.version;
  if (!latest) return true;
  const r = await pool.query({
    name: 'mj-migrations-applied',
    text: "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1) AS ok",
    values: [latest],
  });
  return (r.rows[0] as { ok: boolean }).ok;
}
