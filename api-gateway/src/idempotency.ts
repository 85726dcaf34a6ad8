// Idempotency keys on POST /jobs and POST /jobs/bulk (issue 15), after the
// IETF draft "The Idempotency-Key HTTP Header Field"
// (draft-ietf-httpapi-idempotency-key-header). Owns what the header means:
// its syntax, the request fingerprint, which answers are final and so
// replayed, and the 409/422 answers of the draft. The rows are
// @mediajobs/lib/db/idempotency's: a route that creates something writes the
// key row with it, in the same commit (keyRowFor), so a keyed request costs
// what an unkeyed one does. Mounted after authentication and body parsing,
// in front of the route's handler, with `settle` after it; a request
// without the header passes straight through.
import { createHash } from 'node:crypto';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { canonicalJson } from '@mediajobs/lib/canonical-json';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type pg from 'pg';
import {
  IdempotencyKeyBusy, IdempotencyKeyTaken, SWEEP_EVERY, readKey, storeAnswer, sweepExpiredKeys,
  type IdempotencyScope, type NewKeyRow, type StoredAnswer,
} from '@mediajobs/lib/db/idempotency';
import { HttpError, errorAnswer, sendErrorBody, storedErrorBody } from './http-errors.js';

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

/** sha256 of the method, the path and the canonical body: what "the same request" means. */
export function requestFingerprint(req: Request): Buffer {
  return createHash('sha256').update(`${req.method}\n${req.baseUrl}${req.path}\n${canonicalJson(req.body)}`).digest();
}

/** Whether an answer is the request's outcome (replayed) or a failure a retry should run again. */
export function isFinal(status: number): boolean {
  return status < 500 && !TRANSIENT_4XX.has(status);
}

/** A keyed request as it runs: its key and what it asked. */
interface KeyedRequest {
  scope: IdempotencyScope;
  fingerprint: Buffer;
}

declare module 'express-serve-static-core' {
  interface Locals {
    idempotency?: KeyedRequest;
  }
}

/**
 * The key row a route writes with what it creates, holding the answer it
 * gives once that committed; undefined for a request without the header.
 */
export function keyRowFor(res: Response, answer: StoredAnswer): NewKeyRow | undefined {
  const k = res.locals.idempotency;
  return k && { ...k.scope, fingerprint: k.fingerprint, answer };
}

/**
 * The middleware pair of the keyed routes. A keyed answer goes out only once
 * the key's row agrees with it: a success is written with what it created
 * (keyRowFor), and every other answer of these routes is an error, so
 * `settle` stores a final one before the error middleware sends it. A retry
 * sent the moment an answer arrives gets its replay.
 */
export class IdempotencyKeys {
  private keyedRequests = 0;

  constructor(private readonly pool: pg.Pool, private readonly logger: Logger) {}

  /** In front of the handler: reads the header (400 when malformed). */
  readonly middleware: RequestHandler = (req, res, next) => {
    const raw = req.headers[IDEMPOTENCY_HEADER];
    if (raw === undefined) {
      next();
      return;
    }
    const key = typeof raw === 'string' ? parseIdempotencyKey(raw) : undefined;
    if (key === undefined) throw new HttpError(400, MALFORMED_KEY);
    res.locals.idempotency = { scope: { apiKeyId: res.locals.principal!.apiKeyId, key }, fingerprint: requestFingerprint(req) };
    this.sweepNow();
    next();
  };

  /**
   * After the handler, for its errors: a key another request holds answers
   * from its row or lock, and nothing was created; a final error answer is
   * stored under the key before it is sent (or, when another request holds
   * the key by then, the answer its row gives is sent instead); anything
   * else (a 5xx, a 429) leaves no row, so a retry runs again.
   */
  readonly settle: ErrorRequestHandler = async (err, req, res, next) => {
    const k = res.locals.idempotency;
    if (!k) {
      next(err);
      return;
    }
    if (err instanceof IdempotencyKeyBusy) inFlight(res);
    if (err instanceof IdempotencyKeyTaken) {
      await this.answerFromRow(req, res, k);
      return;
    }
    const answer = errorAnswer(err, res);
    if (!isFinal(answer.status) || await this.answerStands(k, answer)) next(err);
    else await this.answerFromRow(req, res, k);
  };

  /** The replay of the key's answer, or 422 for another request, or 409 while the holder has not committed. */
  private async answerFromRow(req: Request, res: Response, k: KeyedRequest): Promise<void> {
    const held = await readKey(this.pool, k.scope);
    if (!held) inFlight(res);
    if (!held.fingerprint.equals(k.fingerprint)) throw new HttpError(422, KEY_REUSED);
    if (held.answer.location !== null) res.setHeader('Location', held.answer.location);
    res.setHeader(REPLAYED_HEADER, 'true');
    // An error is written as the error middleware writes it, in the form this request asked for.
    if (held.answer.status >= 400) sendErrorBody(req, res, held.answer.status, storedErrorBody(held.answer.status, held.answer.body));
    else res.status(held.answer.status).json(held.answer.body);
  }

  /**
   * Whether a final error answer goes out as it is: stored under the key, or
   * (a store that failed, logged) sent unstored, so a retry runs again as
   * after a 5xx. False when another request holds the key.
   */
  private async answerStands(k: KeyedRequest, answer: { status: number; body: unknown }): Promise<boolean> {
    try {
      return await storeAnswer(this.pool, { ...k.scope, fingerprint: k.fingerprint, answer: { ...answer, location: null } });
    } catch (err) {
      this.logger.error({ err: errFields(err), status: answer.status }, 'recording an idempotency key failed');
      return true;
    }
  }

  /** One keyed request in SWEEP_EVERY (the first included) deletes expired rows, off its answer's path. */
  private sweepNow(): void {
    if (this.keyedRequests++ % SWEEP_EVERY !== 0) return;
    sweepExpiredKeys(this.pool).catch((err: unknown) => this.logger.warn({ err: errFields(err) }, 'sweeping expired idempotency keys failed'));
  }
}

/** The draft's 409: the key's first request has not committed yet. */
function inFlight(res: Response): never {
  res.setHeader('Retry-After', '1');
  throw new HttpError(409, KEY_IN_FLIGHT);
}
