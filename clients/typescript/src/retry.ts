// When a request is sent again and after how long: a pure policy, so each
// rule is table-tested. The client (./client.ts) owns the attempts.
//
// - 429 and a 503 that carries Retry-After: the request was refused before it
//   ran (the gateway counts the rate before routing), so any request is
//   sent again, after the Retry-After the answer gave.
// - Another 5xx, a 408 or no answer at all: only requests whose repetition
//   does no harm: GET/HEAD/PUT/DELETE, and a POST carrying an
//   Idempotency-Key (the gateway answers a repeat with the first answer, and
//   a 5xx leaves the key free for the retry).
// - 409 to a keyed POST: the first request with that key is still running;
//   the retry gets its answer once it ends.
export interface RetryOptions {
  /** Attempts after the first; 0 turns retries off. Default 3. */
  retries?: number;
  /** First backoff when the answer gave no Retry-After; doubled each attempt, jittered between half and all of it. Default 500 ms. */
  minDelayMs?: number;
  /** Cap of one backoff. Default 10 s. */
  maxDelayMs?: number;
  /** A Retry-After longer than this is not waited for: the error is thrown. Default 60 s. */
  maxRetryAfterMs?: number;
}

export const RETRY_DEFAULTS: Required<RetryOptions> = { retries: 3, minDelayMs: 500, maxDelayMs: 10_000, maxRetryAfterMs: 60_000 };

const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

/** What one attempt ended with: an answer's status and Retry-After header, or no answer. */
export type Outcome = { status: number; retryAfter: string | null } | { status: undefined };

/** Whether the request may be sent again after `outcome` (the attempt count is checked by the caller). */
export function retryable(method: string, keyed: boolean, outcome: Outcome): boolean {
  const safe = IDEMPOTENT_METHODS.has(method) || (method === 'POST' && keyed);
  if (outcome.status === undefined) return safe;
  const { status } = outcome;
  if (status === 429 || (status === 503 && outcome.retryAfter !== null)) return true;
  if (status === 409) return method === 'POST' && keyed;
  return safe && (status === 408 || status >= 500);
}

/** Retry-After as milliseconds: delta-seconds or an HTTP-date (RFC 9110 10.2.3); undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The wait before retry number `retry` (1 for the first): the answer's
 * Retry-After when it has one, else exponential backoff with jitter in its upper half;
 * undefined when the server asks for longer than maxRetryAfterMs.
 */
export function retryDelay(retry: number, outcome: Outcome, opts: Required<RetryOptions>, random = Math.random, now = Date.now()): number | undefined {
  const asked = outcome.status === undefined ? undefined : retryAfterMs(outcome.retryAfter, now);
  if (asked !== undefined) return asked <= opts.maxRetryAfterMs ? asked : undefined;
  const ceiling = Math.min(opts.maxDelayMs, opts.minDelayMs * 2 ** (retry - 1));
  return Math.round(ceiling / 2 + (ceiling / 2) * random());
}
