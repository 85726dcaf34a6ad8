// One log line per request, through lib's logger (so its redaction applies).
// Deliberately logs the path without the query string and no headers or
// body: query strings carry download signatures, headers the API key, and
// bodies webhook URLs and storage credentials. At REQUEST_LOG_LEVEL (info
// in production, debug in local mode, where a client polling its job made
// most of a terminal's lines); a 5xx is an error at any setting.
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '@mediajobs/lib/logger';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** REQUEST_LOG_LEVEL's values: the level of a request's line when it did not fail on the server's side. */
export const REQUEST_LOG_LEVELS = ['info', 'debug'] as const;
export type RequestLogLevel = (typeof REQUEST_LOG_LEVELS)[number];

export function requestLogger(logger: Logger, level: RequestLogLevel = 'info') {
  return (req: Request, res: Response, next: NextFunction): void => {
    const start = process.hrtime.bigint();
    // Read now: mounted routers rewrite req.url while they run.
    const path = req.path;
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    res.setHeader('x-request-id', id);
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      const status = res.statusCode;
      logger[status >= 500 ? 'error' : level]({ reqId: id, method: req.method, path, status, ms: Math.round(ms * 10) / 10 }, 'request');
    });
    next();
  };
}
