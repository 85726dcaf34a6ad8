// The SDK's errors: an error answer of the API (its `{error}` body, status
// and the problem details the SDK asks for: `code`, `param` and, for a
// refused body, every problem), a request that never got an answer, and a
// webhook delivery that fails verification.
import type { ErrorBody, ErrorCode, Problem } from './types.js';

/** The service answered with an error status. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  /** The HTTP status. */
  readonly status: number;
  /** The body's `error`: the contract's message (`Invalid API Key`, `rate_limit_exceeded`, ...). */
  readonly error: string;
  /** The stable code (docs/errors.md): `invalid_field`, `job_not_found`, `rate_limit_exceeded`, ...; undefined from a server too old to send one. */
  readonly code: ErrorCode | undefined;
  /** The request field, query parameter or header at fault, when the API names one (`url`, `urls[3]`, `limit`). */
  readonly param: string | undefined;
  /** For a refused request body: every problem found, the first being `error`'s; empty otherwise. */
  readonly errors: readonly Problem[];
  /** The whole error body (some carry more: QuotaExceeded's `limit_gb`, MetadataError's `details`). */
  readonly body: ErrorBody;
  readonly method: string;
  readonly path: string;
  /** The answer's Retry-After, in seconds, when it had one. */
  readonly retryAfterSeconds: number | undefined;

  constructor(init: { status: number; body: ErrorBody; method: string; path: string; retryAfterSeconds?: number }) {
    super(`${init.method} ${init.path}: ${init.status} ${init.body.error}`);
    this.status = init.status;
    this.body = init.body;
    this.error = init.body.error;
    this.code = typeof init.body.code === 'string' ? init.body.code : undefined;
    this.param = typeof init.body.param === 'string' ? init.body.param : undefined;
    this.errors = Array.isArray(init.body.errors) ? init.body.errors : [];
    this.method = init.method;
    this.path = init.path;
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}

/** No answer: the connection failed or timed out on every attempt. */
export class ConnectionError extends Error {
  override readonly name = 'ConnectionError';
  constructor(readonly method: string, readonly path: string, readonly attempts: number, options: { cause: unknown }) {
    super(`${method} ${path}: no answer after ${attempts} attempt${attempts === 1 ? '' : 's'} (${describeCause(options.cause)})`, options);
  }
}

/** A webhook delivery that is not provably ours: bad or missing headers, a stale timestamp, no matching signature. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

function describeCause(cause: unknown): string {
  if (!(cause instanceof Error)) return String(cause);
  // undici's "fetch failed" hides what happened in its own cause (ECONNREFUSED, a reset socket).
  const inner = cause.cause instanceof Error ? `: ${(cause.cause as NodeJS.ErrnoException).code ?? cause.cause.message}` : '';
  return `${cause.message}${inner}`;
}

/** The client cannot be made as configured (no API key, a base URL that is not http(s)). */
export class ConfigurationError extends Error {
  override readonly name = 'ConfigurationError';
}
