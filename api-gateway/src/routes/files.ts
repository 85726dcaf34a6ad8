// GET /files/<key>: downloads from managed local storage (local mode). The
// URL is the credential: an HMAC over the key and its expiry, made by
// lib's LocalStorageProvider.presign, so no API key is needed, exactly as
// with a presigned S3 URL in production.
import { Router, type Request, type Response } from 'express';
import type { Logger } from '@mediajobs/lib/logger';
import { decodeKeyPath, resolveFile, verifySignedFileUrl } from '@mediajobs/lib/storage/managed-local';
import { StorageError } from '@mediajobs/lib/storage/types';
import { sendError } from '../http-errors.js';

export interface FilesRouteDeps {
  /** MANAGED_STORAGE_DIR */
  dir: string;
  /** FILE_URL_SECRET */
  secret: string;
  logger: Logger;
}

const PREFIX = '/files/';

function one(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

export function filesRouter(deps: FilesRouteDeps): Router {
  const router = Router();
  router.get('/files/*key', async (req: Request, res: Response) => {
    // The raw (still percent-encoded) path, because the signature covers the
    // key exactly as lib's encodeKeyPath wrote it, segment by segment.
    const encoded = req.path.slice(PREFIX.length);
    const expires = one(req.query.expires);
    const sig = one(req.query.sig);
    if (expires === undefined || sig === undefined) return sendError(res, 403, 'Missing download URL signature');
    if (/^\d{1,12}$/.test(expires) && Number(expires) * 1000 <= Date.now()) return sendError(res, 403, 'Download URL has expired');
    let key: string;
    try {
      key = decodeKeyPath(encoded);
    } catch {
      return sendError(res, 403, 'Invalid download URL signature');
    }
    if (!verifySignedFileUrl(key, expires, sig, deps.secret)) return sendError(res, 403, 'Invalid download URL signature');

    let path: string;
    try {
      path = (await resolveFile(deps.dir, key)).path;
    } catch (err) {
      if (err instanceof StorageError && err.code === 'not_found') return sendError(res, 404, 'File not found');
      deps.logger.error({ error: (err as Error).message }, 'resolving a managed file failed');
      return sendError(res, 500, 'Internal server error');
    }
    // send (behind sendFile) answers Range, If-Range, conditional GETs and HEAD.
    res.sendFile(path, { dotfiles: 'allow', acceptRanges: true, cacheControl: false, lastModified: true, etag: true }, (err?: Error) => {
      if (!err) return;
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') sendError(res, 404, 'File not found');
      else if ((err as { status?: number }).status === 416) sendError(res, 416, 'Range not satisfiable');
      else {
        deps.logger.error({ error: err.message }, 'streaming a managed file failed');
        sendError(res, 500, 'Internal server error');
      }
    });
  });
  return router;
}
