// POST /internal/upload-grants/<op>: runners uploading to managed storage on
// S3 through a grant instead of the bucket's credentials (docs/adr/0012).
// The grant's rules (token, job, key, ownership) are lib's UploadGrantBroker;
// this is its HTTP: the token from `Authorization: Bearer`, a small JSON
// body, the answer or `{error, code, reason}`. No API key: the token is the
// credential. Nothing of a request is logged but its operation and the
// failure's fields (requestLogger logs the path): the token, the part URLs
// and the upload ids are secrets.
import { json, Router, type NextFunction, type Request, type Response } from 'express';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { UPLOAD_GRANT_PATH, grantErrorOf, type UploadGrantBroker } from '@mediajobs/lib/storage/upload-grants';
import { sendError } from '../http-errors.js';

export interface UploadGrantsRouteDeps {
  /** The grant's rules (lib); only `handle` is used. */
  broker: Pick<UploadGrantBroker, 'handle'>;
  logger: Logger;
}

/** A complete request lists at most 10,000 parts of ~60 bytes. */
const MAX_BODY_BYTES = 1024 * 1024;

function bearer(req: Request): string | undefined {
  const m = /^Bearer ([^\s]+)$/.exec(req.headers.authorization ?? '');
  return m?.[1];
}

export function uploadGrantsRouter(deps: UploadGrantsRouteDeps): Router {
  const router = Router();
  router.post(`${UPLOAD_GRANT_PATH}/:op`, json({ limit: MAX_BODY_BYTES, strict: true }), async (req: Request, res: Response) => {
    const op = String(req.params.op);
    try {
      const answer = await deps.broker.handle(op, bearer(req), req.body);
      if (answer === undefined) res.status(204).end();
      else res.json(answer);
    } catch (err) {
      const answer = grantErrorOf(err);
      if (answer.status >= 500) deps.logger.warn({ op, status: answer.status, err: errFields(err) }, 'upload grant request failed');
      sendError(res, answer.status, answer.message, { code: answer.code, reason: answer.reason });
    }
  });
  // A body that is not JSON, or too large: answered here, so the route's answers are JSON whatever app mounts it.
  router.use(UPLOAD_GRANT_PATH, (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    const status = (err as { status?: unknown }).status === 413 ? 413 : 400;
    sendError(res, status, status === 413 ? 'Request body too large' : 'Invalid JSON body', { code: 'invalid_config', reason: 'invalid_request' });
  });
  return router;
}
