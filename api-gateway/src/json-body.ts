// Request bodies: JSON only, of a bounded size, and an object where the
// routes expect one. Parse errors reach the error middleware (http-errors.ts)
// as body-parser's typed errors and are answered there.
import { NOT_AN_OBJECT } from '@mediajobs/lib/request-body';
import { json, type Request, type RequestHandler } from 'express';
import { BODY_ERRORS, HttpError } from './http-errors.js';

export const NOT_JSON = 'Content-Type must be application/json';

/**
 * `Content-Type: application/json` (415 otherwise, checked before anything is
 * read), then express.json: strict (an object or array), at most `limitBytes`.
 */
export function acceptJson(limitBytes: number): RequestHandler[] {
  return [
    (req, _res, next) => {
      if (req.is('application/json')) next();
      else next(new HttpError(415, NOT_JSON));
    },
    json({ limit: limitBytes, strict: true }),
    wellFormedText,
  ];
}

/** A lone surrogate; a paired one is a single code point to a `u` pattern, never matched. */
const LONE_SURROGATE = /\p{Cs}/u;
/** The answer of any unreadable body (body-parser's parse error). */
const INVALID_JSON = BODY_ERRORS['entity.parse.failed']!;

/**
 * JSON may escape half a surrogate pair (`"\ud800"`), which JSON.parse
 * accepts and no text column stores: Postgres refuses it, and the request
 * would end in a 500. Such a body is as invalid as a malformed one (RFC 8259
 * §8.2: its behaviour is unpredictable). Walked without recursion, as a body
 * may nest as deep as its size allows.
 */
export const wellFormedText: RequestHandler = (req, _res, next) => {
  const pending: unknown[] = [req.body];
  while (pending.length) {
    const v = pending.pop();
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) return next(new HttpError(...INVALID_JSON));
    } else if (v !== null && typeof v === 'object') {
      // Keys are text too.
      for (const entry of Object.entries(v)) pending.push(...entry);
    }
  }
  next();
};

/**
 * For POSTs that need no body (start, cancel, rotate, redeliver): a body
 * sent as JSON is still read, so a malformed one is the usual 400; a body of
 * another type is left unread.
 */
export const optionalJsonBody = (): RequestHandler[] => [json({ limit: '16kb' }), wellFormedText];

/** The parsed body as an object; 400 for an array or anything else. */
export function bodyObject(req: Request): Record<string, unknown> {
  const b: unknown = req.body;
  if (typeof b !== 'object' || b === null || Array.isArray(b)) throw new HttpError(400, NOT_AN_OBJECT);
  return b as Record<string, unknown>;
}
