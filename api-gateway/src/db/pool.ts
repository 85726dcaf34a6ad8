// One pg pool per process.
import pg from 'pg';

export function createPool(connectionString: string, max = 20): pg.Pool {
  return new pg.Pool({
    connectionString,
    max,
    // Fail a request quickly instead of queueing forever when Postgres is gone.
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    application_name: 'mediajobs-api-gateway',
  });
}
