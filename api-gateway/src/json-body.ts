// Request bodies: JSON only, of a bounded size, and an object where the
// routes expect one. Parse errors reach the error middleware (http-errors.ts)
// as body-parser's typed errors and are answered there.
import { json, type Request, type RequestHandler } from 'express';
import { HttpError } from './http-errors.js';

export const NOT_JSON = 'Content-Type must be application/json';
export const NOT_AN_OBJECT = 'Request body must be a JSON object';

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
  ];
}

/**
 * For POSTs that need no body (start, cancel, rotate, redeliver): a body
 * sent as JSON is still read, so a malformed one is the usual 400; a body of
 * another type is left unread.
 */
export const optionalJsonBody = (): RequestHandler => json({ limit: '16kb' });

/** The parsed body as an object; 400 for an array or anything else. */
export function bodyObject(req: Request): Record<string, unknown> {
  const b: unknown = req.body;
  if (typeof b !== 'object' || b === null || Array.isArray(b)) throw new HttpError(400, NOT_AN_OBJECT);
  return b as Record<string, unknown>;
}
