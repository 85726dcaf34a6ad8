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

/** A pool connection that LISTENs on one channel until it is ended or lost. */
export interface Listening {
  /** UNLISTEN and give the connection back to the pool; nothing more after a loss. */
  end(): Promise<void>;
}

/**
 * LISTEN on `channel` with a connection of its own from `pool`. A lost
 * connection is given back to be destroyed and reported to `onLost`. The
 * connection is given back once, with the listeners taken off it: a second
 * release throws, and once back in the pool its notifications and errors are
 * someone else's. Rejects (with nothing held) when the LISTEN fails.
 */
export async function listenOn(
  pool: pg.Pool, channel: string, onNotification: (payload: string | undefined) => void, onLost: (err: Error) => void,
): Promise<Listening> {
  const client = await pool.connect();
  let given = false;
  const notified = (msg: pg.Notification) => {
    if (msg.channel === channel) onNotification(msg.payload);
  };
  const lost = (err: Error) => {
    if (given) return;
    giveBack(err);
    onLost(err);
  };
  const giveBack = (err?: Error) => {
    if (given) return;
    given = true;
    client.off('notification', notified);
    client.off('error', lost);
    client.release(err);
  };
  client.on('notification', notified);
  client.on('error', lost);
  try {
    // Identifiers cannot be parameters; channels are the project's constants.
    await client.query(`LISTEN ${channel}`);
  } catch (err) {
    giveBack(err as Error);
    throw err;
  }
  return {
    async end() {
      if (given) return;
      await client.query(`UNLISTEN ${channel}`).catch(() => undefined);
      giveBack();
    },
  };
}
