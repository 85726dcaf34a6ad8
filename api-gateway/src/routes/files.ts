// GET /files/<key>: downloads from managed local storage (local mode). The
// URL is the credential: an HMAC over the key and its expiry, made by
// lib's LocalStorageProvider.presign, so no API key is needed, exactly as
// with a presigned S3 URL in production.
import { Router, type NextFunction, type Request, type Response } from 'express';
import { decodeKeyPath, resolveFile, verifySignedFileUrl } from '@mediajobs/lib/storage/managed-local';
import { StorageError } from '@mediajobs/lib/storage/types';
import { HttpError } from '../http-errors.js';
import { signedUrlQuery } from '../query.js';

export interface FilesRouteDeps {
  /** MANAGED_STORAGE_DIR */
  dir: string;
  /** FILE_URL_SECRET */
  secret: string;
}

const PREFIX = '/files/';

/** The key a signed URL names; 403 for a URL whose signature is missing, expired or forged. */
function signedKey(req: Request, secret: string): string {
  // The raw (still percent-encoded) path, because the signature covers the
  // key exactly as lib's encodeKeyPath wrote it, segment by segment.
  const encoded = req.path.slice(PREFIX.length);
  const query = signedUrlQuery.safeParse(req.query);
  if (!query.success) throw new HttpError(403, 'Missing download URL signature');
  const { expires, sig } = query.data;
  if (/^\d{1,12}$/.test(expires) && Number(expires) * 1000 <= Date.now()) throw new HttpError(403, 'Download URL has expired');
  let key: string;
  try {
    key = decodeKeyPath(encoded);
  } catch {
    throw new HttpError(403, 'Invalid download URL signature');
  }
  if (!verifySignedFileUrl(key, expires, sig, secret)) throw new HttpError(403, 'Invalid download URL signature');
  return key;
}

/** What a failed sendFile answers: the file vanished, a range past its end, else a logged 500. */
function sendFileError(err: Error): HttpError {
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new HttpError(404, 'File not found');
  if ((err as { status?: number }).status === 416) return new HttpError(416, 'Range not satisfiable');
  return new HttpError(500, 'Internal server error', {}, { cause: err });
}

export function filesRouter(deps: FilesRouteDeps): Router {
  const router = Router();
  router.get('/files/*key', async (req: Request, res: Response, next: NextFunction) => {
    const key = signedKey(req, deps.secret);
    let path: string;
    try {
      path = (await resolveFile(deps.dir, key)).path;
    } catch (err) {
      if (err instanceof StorageError && err.code === 'not_found') throw new HttpError(404, 'File not found');
      throw err;
    }
    // send (behind sendFile) answers Range, If-Range, conditional GETs and HEAD.
    res.sendFile(path, { dotfiles: 'allow', acceptRanges: true, cacheControl: false, lastModified: true, etag: true }, (err?: Error) => {
      if (!err) return;
      if (res.headersSent) res.destroy();
      else next(sendFileError(err));
    });
  });
  return router;
}
