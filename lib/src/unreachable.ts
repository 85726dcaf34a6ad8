// Whether an error means a dependency could not be reached right now (above
// all Postgres: stopped, restarting, out of connections, the network
// between) rather than that a statement or a call failed. The first passes
// by itself, so the gateway answers it 503 with Retry-After and clients
// retry (issue 16: never a 500 while the database is down); the second is a
// defect and stays a 500.

/** Socket errors of a connection that could not be made or was lost. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
]);

/**
 * SQLSTATEs of a server that is going or not yet there: class 08
 * (connection exception), 57P01 admin_shutdown, 57P02 crash_shutdown,
 * 57P03 cannot_connect_now (starting up, in recovery), 53300 too_many_connections.
 */
const SQLSTATE = /^(?:08[0-9A-Z]{3}|57P0[123]|53300)$/;

/** node-postgres' own errors, which carry no code: a connection lost mid-query, the pool's connect timeout. */
const DRIVER_MESSAGE = /^(?:Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable)/;

/** The error, its causes and (for a connect that tried several addresses) its AggregateError members. */
function* chain(err: unknown, depth = 0): Generator<{ code?: unknown; message?: unknown }> {
  if (err === null || typeof err !== 'object' || depth > 5) return;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  yield e;
  yield* chain(e.cause, depth + 1);
  if (Array.isArray(e.errors)) for (const member of e.errors) yield* chain(member, depth + 1);
}

export function isUnreachable(err: unknown): boolean {
  for (const e of chain(err)) {
    if (typeof e.code === 'string' && (SOCKET_CODES.has(e.code) || SQLSTATE.test(e.code))) return true;
    if (typeof e.message === 'string' && DRIVER_MESSAGE.test(e.message)) return true;
  }
  return false;
}
