// One pg pool per process.
import pg from 'pg';
import { errFields, type Logger } from '@mediajobs/lib/logger';

export function createPool(connectionString: string, max = 20, log?: Logger): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    // Fail a request quickly instead of queueing forever when Postgres is gone.
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    application_name: 'mediajobs-api-gateway',
  });
  // An idle client that fails (Postgres restarting) is an 'error' event, which
  // without a listener would crash the process; the pool replaces the client.
  pool.on('error', (err) => log?.warn({ err: errFields(err) }, 'idle Postgres connection failed'));
  return pool;
}
