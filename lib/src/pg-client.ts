// Checked-out Postgres clients. pg-pool removes its own error listener from
// a client while it is checked out, so a connection that dies then (Postgres
// restarting, an admin terminating backends) would emit an 'error' event with
// no listener: an uncaught exception that takes the whole process down. Every
// checkout goes through here, listens for that, and hands a broken client
// back to the pool to be destroyed instead of reused.
import type pg from 'pg';

/** Run `fn` with a dedicated client (session state such as LISTEN or advisory locks). */
export async function withClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (err: Error) => { broken = err; };
  client.on('error', onError);
  try {
    return await fn(client);
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

/** Run `fn` inside BEGIN … COMMIT, rolling back when it throws. */
export function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withClient(pool, async (client) => {
    await client.query('BEGIN');
    try {
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
}
