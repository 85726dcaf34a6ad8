// Idempotency keys on POST /jobs and POST /jobs/bulk (issue 15), after the
// IETF draft "The Idempotency-Key HTTP Header Field"
// (draft-ietf-httpapi-idempotency-key-header). Owns what the header means:
// its syntax, the request fingerprint, which answers are final and so
// replayed, and the 409/422 answers of the draft. The rows are
// ./db/idempotency.ts's. Mounted after authentication and body parsing, in
// front of the route's handler; a request without the header passes
// straight through, with no database round trip.
import { createHash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type pg from 'pg';
import { claimKey, completeKey, releaseKey, type IdempotencyScope, type StoredAnswer } from './db/idempotency.js';
import { HttpError } from './http-errors.js';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** Set to "true" on an answer that is a replay of the first one. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';
export const MAX_KEY_LENGTH = 255;

export const MALFORMED_KEY = `Invalid Idempotency-Key header: must be a quoted string ("...") or a token of 1 to ${MAX_KEY_LENGTH} printable ASCII characters`;
export const KEY_IN_FLIGHT = 'A request with this Idempotency-Key is still being processed; retry later';
export const KEY_REUSED = 'Idempotency-Key was already used with a different request';

/** 4xx answers a retry may well change (timeout, too early, rate limit): released like a 5xx rather than replayed. */
const TRANSIENT_4XX = new Set([408, 425, 429]);

// RFC 8941 sf-string: printable ASCII between double quotes, `"` and `\` escaped by `\`.
const SF_STRING = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/;
// The bare form many clients send (a UUID): printable ASCII without quotes, separators or backslashes.
const BARE_KEY = /^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+$/;

/**
 * The key of a header value: an sf-string (the draft's syntax) or, leniently,
 * a bare token; the same text either way is the same key. Anything else (two
 * header fields, parameters, an empty or over-long key) is undefined.
 */
export function parseIdempotencyKey(raw: string): string | undefined {
  const value = raw.trim();
  const quoted = SF_STRING.exec(value);
  const key = quoted ? quoted[1]!.replace(/\\(["\\])/g, '$1') : BARE_KEY.test(value) ? value : undefined;
  return key !== undefined && key.length >= 1 && key.length <= MAX_KEY_LENGTH ? key : undefined;
}

/** JSON with object keys sorted at every level, so key order never changes a fingerprint. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** sha256 of the method, the path and the canonical body: what "the same request" means. */
export function requestFingerprint(req: Request): Buffer {
  return createHash('sha256').update(`${req.method}\n${req.baseUrl}${req.path}\n${canonicalJson(req.body)}`).digest();
}

/** Whether an answer is the request's outcome (replayed) or a failure a retry should run again. */
export function isFinal(status: number): boolean {
  return status < 500 && !TRANSIENT_4XX.has(status);
}

export interface IdempotencyDeps {
  pool: pg.Pool;
  logger: Logger;
}

/**
 * The middleware: claim the key, or replay its answer, or refuse (409 while
 * the first request runs, 422 for a different request under the same key).
 */
export function idempotent(deps: IdempotencyDeps): RequestHandler {
  return async (req, res, next) => {
    const raw = req.headers[IDEMPOTENCY_HEADER];
    if (raw === undefined) {
      next();
      return;
    }
    const key = typeof raw === 'string' ? parseIdempotencyKey(raw) : undefined;
    if (key === undefined) throw new HttpError(400, MALFORMED_KEY);
    const scope: IdempotencyScope = { apiKeyId: res.locals.principal!.apiKeyId, key };
    const fingerprint = requestFingerprint(req);
    const found = await claimKey(deps.pool, scope, fingerprint);
    if (found.outcome === 'claimed') {
      recordAnswer(deps, res, scope, found.claim);
      next();
      return;
    }
    if (!found.fingerprint.equals(fingerprint)) throw new HttpError(422, KEY_REUSED);
    if (found.outcome === 'in_flight') {
      res.setHeader('Retry-After', '1');
      throw new HttpError(409, KEY_IN_FLIGHT);
    }
    replay(res, found.answer);
  };
}

function replay(res: Response, answer: StoredAnswer): void {
  if (answer.location !== null) res.setHeader('Location', answer.location);
  res.setHeader(REPLAYED_HEADER, 'true');
  res.status(answer.status).json(answer.body);
}

/**
 * Every answer of these routes, the error middleware's included, is sent by
 * res.json. This one is held back until the row says what happened: the
 * answer stored when final, the key released otherwise. Stored first, so a
 * client retrying the moment it has the answer gets the replay, not a 409.
 * A request that never answers (its gateway died) leaves the row in flight
 * until the in-flight timeout lets a retry take it over.
 */
function recordAnswer(deps: IdempotencyDeps, res: Response, scope: IdempotencyScope, claim: string): void {
  const send = res.json.bind(res);
  res.json = ((body: unknown) => {
    const status = res.statusCode;
    const location = res.getHeader('location');
    const settle = isFinal(status)
      ? completeKey(deps.pool, scope, claim, { status, body, location: typeof location === 'string' ? location : null }).then((own) => {
        if (!own) deps.logger.warn({ status }, 'idempotency key was taken over before its request answered; answer not stored');
      })
      : releaseKey(deps.pool, scope, claim);
    // The client gets its answer either way; a row that could not be written is left to the in-flight timeout.
    void settle.then(
      () => send(body),
      (err: unknown) => {
        deps.logger.error({ err: errFields(err), status }, 'recording an idempotency key failed');
        send(body);
      },
    );
    return res;
  }) as Response['json'];
}
