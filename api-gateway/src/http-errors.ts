// The gateway's one error path. Every error answer is {"error": "..."} (plus
// the spec's extra fields where it has them), sent from one place: handlers
// and validators throw an HttpError (or pass it to next()), and the error
// middleware here turns it, body-parser's errors and anything unexpected
// into the answer. Express 5 hands a rejected handler promise to that
// middleware too, so async handlers need no wrapper. A dependency that cannot
// be reached (Postgres down or restarting) is a 503 with Retry-After, which
// passes by itself; anything else unexpected is a 500 with the route's
// generic message. Details go to the log, through errFields, never to the client.
//
// Each answer also has a stable `code` (error-codes.ts), the `param` at
// fault where there is one, and for a request body every problem found
// (`errors`: [{code, param, message}], the first being `error`'s). The
// contract's body, `{"error": ...}` with the spec's extra fields, is what a
// client gets by default: existing clients compare it whole. A client that
// lists `application/problem+json` in Accept gets the whole description as
// RFC 9457 problem details, which keep `error` beside them (docs/errors.md,
// ADR 0030).
import { STATUS_CODES } from 'node:http';
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type { FieldProblem } from '@mediajobs/lib/request-body';
import { isUnreachable } from '@mediajobs/lib/unreachable';
import { describeError, type ErrorCode } from './error-codes.js';

/** One problem of a request: a code of error-codes.ts, the field or parameter at fault, the words. */
export interface Problem {
  code: ErrorCode | FieldProblem['code'];
  param?: string;
  message: string;
}

/** What a throw site may add to its answer's description; the rest is read from the answer (error-codes.ts). */
export interface Described extends ErrorOptions {
  /** The code, where the answer's words do not say it. */
  code?: ErrorCode;
  /** The field or parameter at fault, where the words do not name it. */
  param?: string;
  /** Every problem of the request body, the answer's own first. */
  errors?: readonly Problem[];
}

/** An answer already decided: status, the spec's message, and the spec's extra fields. */
export class HttpError extends Error {
  readonly described: Omit<Described, 'cause'>;

  constructor(readonly status: number, message: string, readonly extra: Record<string, unknown> = {}, options?: Described) {
    super(message, options);
    this.name = 'HttpError';
    const { cause: _cause, ...described } = options ?? {};
    this.described = described;
  }
}

/** The 400 of a body a validator refused (parseJobRequest, parseRequestBody): its first problem, and all of them. */
export function invalidBody(refused: { error: string; problems: readonly FieldProblem[] }): HttpError {
  return new HttpError(400, refused.error, {}, refused.problems.length ? { errors: refused.problems } : undefined);
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

/**
 * An error answer described whole: the contract's `error` and extra fields,
 * then `code`, `param` and `errors`. What an Idempotency-Key stores for an
 * error, and what either form of the answer is written from.
 */
export interface ErrorBody {
  error: string;
  code: ErrorCode;
  param?: string;
  errors?: readonly Problem[];
  [extra: string]: unknown;
}

/** The answer's description: the throw site's where it gave one, else read from its status and words. */
function describedBody(status: number, message: string, extra: Record<string, unknown> = {}, given: Omit<Described, 'cause'> = {}): ErrorBody {
  const read = describeError(status, message, extra);
  const param = given.param ?? read.param;
  const errors = given.errors ?? (param !== undefined && status === 400 ? [{ code: given.code ?? read.code, param, message }] : undefined);
  return { ...extra, error: message, code: given.code ?? read.code, ...(param !== undefined && { param }), ...(errors && { errors }) };
}

/** A stored error answer (an Idempotency-Key's) as a description; one stored before codes existed is described now. */
export function storedErrorBody(status: number, stored: unknown): ErrorBody {
  const body = (typeof stored === 'object' && stored !== null ? stored : {}) as Record<string, unknown>;
  if (typeof body.error === 'string' && typeof body.code === 'string') return body as ErrorBody;
  const { error, ...extra } = body;
  return describedBody(status, typeof error === 'string' ? error : INTERNAL, extra);
}

/** Whether the client asked for problem details: `application/problem+json` in Accept, with a quality above 0. */
export function wantsProblemDetails(req: Request): boolean {
  const accept = req.headers.accept;
  if (accept === undefined || !accept.includes('problem+json')) return false;
  return accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    if (type !== 'application/problem+json') return false;
    const q = params.find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/**
 * Writes an error answer from its description: the contract's body (the
 * extra fields the throw site gave, `error` first), or, for a client that
 * asked, RFC 9457 problem details (`title` the status's phrase, `detail` the
 * message; `type` left out, that is `about:blank`) with every field of the
 * description.
 */
export function sendErrorBody(req: Request, res: Response, status: number, body: ErrorBody): void {
  if (wantsProblemDetails(req)) {
    res.status(status).type('application/problem+json')
      .send(JSON.stringify({ title: STATUS_CODES[status] ?? 'Error', status, detail: body.error, ...body }));
    return;
  }
  const { error, code: _code, param: _param, errors: _errors, ...extra } = body;
  res.status(status).json({ error, ...extra });
}

/**
 * Writes the contract's body alone, `{"error": ..., ...extra}`: for the
 * upload grants' protocol with the runner (routes/upload-grants.ts), whose
 * `code` and `reason` are its own. Every API answer goes through HttpError.
 */
export function sendError(res: Response, status: number, message: string, extra: Record<string, unknown> = {}): void {
  res.status(status).json({ error: message, ...extra });
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
function answerFor(err: unknown, res: Response): {
  status: number; message: string; extra?: Record<string, unknown>; described?: Omit<Described, 'cause'>; log?: unknown; retryAfter?: string;
} {
  if (err instanceof HttpError) {
    // A cause is a failure the handler turned into this answer: the cause is logged, the answer stays as decided.
    return { status: err.status, message: err.message, extra: err.extra, described: err.described, ...(err.cause !== undefined && { log: err.cause }) };
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

/** The status and described body the error middleware answers an error with: what an Idempotency-Key stores for it (idempotency.ts). */
export function errorAnswer(err: unknown, res: Response): { status: number; body: ErrorBody } {
  const answer = answerFor(err, res);
  return { status: answer.status, body: describedBody(answer.status, answer.message, answer.extra, answer.described) };
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
    sendErrorBody(req, res, answer.status, describedBody(answer.status, answer.message, answer.extra, answer.described));
  };
}

/** Every path and method no route took. */
export const notFound: RequestHandler = () => {
  throw new HttpError(404, 'Not found');
};
