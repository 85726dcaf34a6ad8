// One log line per request, through lib's logger (so its redaction applies).
// Deliberately logs the path without the query string and no headers or
// body: query strings carry download signatures, headers the API key, and
// bodies webhook URLs and storage credentials.
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '@mediajobs/lib/logger';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

export function requestLogger(logger: Logger) {
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
      const level = status >= 500 ? 'error' : 'info';
      logger[level]({ reqId: id, method: req.method, path, status, ms: Math.round(ms * 10) / 10 }, 'request');
    });
    next();
  };
}
