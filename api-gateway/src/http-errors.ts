// The gateway's one error path. Every error answer is {"error": "..."} (plus
// the spec's extra fields where it has them), sent from one place: handlers
// and validators throw an HttpError (or pass it to next()), and the error
// middleware here turns it, body-parser's errors and anything unexpected
// into the answer. Express 5 hands a rejected handler promise to that
// middleware too, so async handlers need no wrapper. A dependency that cannot
// be reached (Postgres down or restarting) is a 503 with Retry-After, which
// passes by itself; anything else unexpected is a 500 with the route's
// generic message. Details go to the log, through errFields, never to the client.
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { isUnreachable } from '@mediajobs/lib/unreachable';

/** An answer already decided: status, the spec's message, and the spec's extra fields. */
export class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly extra: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(message, options);
    this.name = 'HttpError';
  }
}

declare module 'express-serve-static-core' {
  interface Locals {
    /** The spec's words for an unexpected failure of this route (see failsWith). */
    failureMessage?: string;
  }
}

export const INTERNAL = 'Internal server error';
/** The 503 of a request that needed a dependency it could not reach (Postgres, most of all). */
export const UNAVAILABLE = 'Service temporarily unavailable, please retry';
/** Seconds a client waits before retrying after UNAVAILABLE: a Postgres restart or failover takes a few. */
const UNAVAILABLE_RETRY_AFTER = '2';

/**
 * Route middleware naming what an unexpected failure of the route answers,
 * where the spec words it (GET /jobs: `Database query failed`); without it
 * the answer is `Internal server error`.
 */
export function failsWith(message: string): RequestHandler {
  return (_req, res, next) => {
    res.locals.failureMessage = message;
    next();
  };
}

/** The body of every error answer. */
const errorBody = (message: string, extra: Record<string, unknown> = {}) => ({ error: message, ...extra });

/** Writes an error answer. Prefer throwing HttpError; this is for the error middleware and routes not moved yet. */
export function sendError(res: Response, status: number, message: string, extra: Record<string, unknown> = {}): void {
  res.status(status).json(errorBody(message, extra));
}

/** body-parser's error types (its `type` field), as the gateway answers them. */
export const BODY_ERRORS: Readonly<Record<string, readonly [number, string]>> = {
  'entity.parse.failed': [400, 'Invalid JSON body'],
  'entity.too.large': [413, 'Request body too large'],
  'charset.unsupported': [415, 'Unsupported charset; send UTF-8 JSON'],
  'encoding.unsupported': [415, 'Unsupported Content-Encoding'],
  'request.aborted': [400, 'Request aborted'],
  'request.size.invalid': [400, 'Request body size does not match Content-Length'],
  'stream.encoding.set': [500, INTERNAL],
};

/** A client mistake reported by express or a library (an undecodable path: 400) keeps its 4xx, in fixed words. */
function clientErrorMessage(status: number): string {
  return status === 400 ? 'Bad request' : status === 404 ? 'Not found' : 'Request refused';
}

/** The answer for an error thrown by a handler or middleware, and whether it is to be logged as a failure. */
function answerFor(err: unknown, res: Response): { status: number; message: string; extra?: Record<string, unknown>; log?: unknown; retryAfter?: string } {
  if (err instanceof HttpError) {
    // A cause is a failure the handler turned into this answer: the cause is logged, the answer stays as decided.
    return { status: err.status, message: err.message, extra: err.extra, ...(err.cause !== undefined && { log: err.cause }) };
  }
  const e = err as { type?: unknown; status?: unknown; statusCode?: unknown } | null;
  const body = typeof e?.type === 'string' ? BODY_ERRORS[e.type] : undefined;
  if (body) return { status: body[0], message: body[1], ...(body[0] >= 500 && { log: err }) };
  const status = e?.status ?? e?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) return { status, message: clientErrorMessage(status) };
  // The route's own words where the spec gives them (GET /jobs: `Database query failed`), with the status that says "retry".
  if (isUnreachable(err)) return { status: 503, message: res.locals.failureMessage ?? UNAVAILABLE, log: err, retryAfter: UNAVAILABLE_RETRY_AFTER };
  return { status: 500, message: res.locals.failureMessage ?? INTERNAL, log: err };
}

/** The status and body the error middleware answers an error with: what an Idempotency-Key stores for it (idempotency.ts). */
export function errorAnswer(err: unknown, res: Response): { status: number; body: { error: string } } {
  const answer = answerFor(err, res);
  return { status: answer.status, body: errorBody(answer.message, answer.extra) };
}

/** The error middleware: mounted last, after notFound. */
export function errorResponder(log: Logger): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, next: NextFunction) => {
    // Mid-stream (a file download): express's own handler ends the connection.
    if (res.headersSent) {
      next(err);
      return;
    }
    const answer = answerFor(err, res);
    if (answer.log !== undefined) {
      log.error({ err: errFields(answer.log), method: req.method, path: req.path, status: answer.status }, 'request failed');
    }
    if (answer.retryAfter) res.setHeader('Retry-After', answer.retryAfter);
    sendError(res, answer.status, answer.message, answer.extra);
  };
}

/** Every path and method no route took. */
export const notFound: RequestHandler = () => {
  throw new HttpError(404, 'Not found');
};
