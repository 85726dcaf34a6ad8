// GET /files/<key>: downloads from managed local storage (local mode). The
// URL is the credential: an HMAC over the key and its expiry, made by
// lib's LocalStorageProvider.presign, so no API key is needed, exactly as
// with a presigned S3 URL in production. The file is read through the
// descriptor lib's openFile checked (runners write that directory: a link
// planted there is never followed), so Range, conditional GETs and HEAD are
// answered here rather than by express's sendFile, which opens a path.
import { extname } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Router, type Request, type Response } from 'express';
import { decodeKeyPath, openFile, verifySignedFileUrl, type OpenedFile } from '@mediajobs/lib/storage/managed-local';
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

/**
 * What a stored file may do when a browser opens it: nothing. Runners write
 * these files, and an HTML one served from the gateway's origin must not run
 * (app.ts's policy for every answer, with `sandbox`).
 */
const FILE_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox";

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

const httpDate = (v: string | undefined): number => (v ? Date.parse(v) : NaN);
/** The entity tags of an If-Match or If-Range list. */
const tagList = (v: string): string[] => v.split(',').map((t) => t.trim()).filter(Boolean);

/** If-Match / If-Unmodified-Since that the file does not meet (RFC 9110 13.1.1, 13.1.4; as express's send answered them). */
function preconditionFails(req: Request, etag: string, lastModified: string): boolean {
  const match = req.headers['if-match'];
  if (match) return match !== '*' && !tagList(match).some((t) => t === etag || `W/${t}` === etag || t === `W/${etag}`);
  const since = httpDate(req.headers['if-unmodified-since']);
  return !Number.isNaN(since) && httpDate(lastModified) > since;
}

/** Whether a Range still applies under If-Range: the tag or the date it names is the file's. */
function rangeFresh(req: Request, etag: string, lastModified: string): boolean {
  const ifRange = req.get('if-range');
  if (!ifRange) return true;
  if (ifRange.includes('"')) return ifRange.includes(etag);
  return httpDate(lastModified) <= httpDate(ifRange);
}

/** The bytes to send: the whole file, or the one range asked (several ranges are answered whole, as send did). */
function byteRange(req: Request, res: Response, size: number, etag: string, lastModified: string): { start: number; end: number } {
  const whole = { start: 0, end: size - 1 };
  if (!/^ *bytes=/.test(req.headers.range ?? '') || !rangeFresh(req, etag, lastModified)) return whole;
  const ranges = req.range(size, { combine: true });
  if (ranges === -1) {
    res.setHeader('Content-Range', `bytes */${size}`);
    throw new HttpError(416, 'Range not satisfiable');
  }
  if (ranges === undefined || ranges === -2 || ranges.length !== 1) return whole;
  const { start, end } = ranges[0]!;
  res.status(206).setHeader('Content-Range', `bytes ${start}-${end}/${size}`);
  return { start, end };
}

/** Answer GET or HEAD from the open file; true when a stream took the descriptor (it closes it). */
function send(req: Request, res: Response, key: string, file: OpenedFile): boolean {
  const etag = `W/"${file.size.toString(16)}-${file.mtime.getTime().toString(16)}"`;
  const lastModified = file.mtime.toUTCString();
  res.setHeader('Content-Security-Policy', FILE_CSP);
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Last-Modified', lastModified);
  res.setHeader('ETag', etag);
  res.type(extname(key));
  if (preconditionFails(req, etag, lastModified)) throw new HttpError(412, 'Precondition failed');
  if (req.fresh) {
    res.status(304).end();
    return false;
  }
  const { start, end } = byteRange(req, res, file.size, etag, lastModified);
  const length = Math.max(0, end - start + 1);
  res.setHeader('Content-Length', length);
  if (req.method === 'HEAD' || length === 0) {
    res.end();
    return false;
  }
  // A client gone mid-download ends the pipeline; the stream then closes the descriptor.
  pipeline(file.handle.createReadStream({ start, end }), res).catch(() => res.destroy());
  return true;
}

export function filesRouter(deps: FilesRouteDeps): Router {
  const router = Router();
  router.get('/files/*key', async (req: Request, res: Response) => {
    const key = signedKey(req, deps.secret);
    const file = await openFile(deps.dir, key).catch((err: unknown) => {
      if (err instanceof StorageError && err.code === 'not_found') throw new HttpError(404, 'File not found');
      throw err;
    });
    let streaming = false;
    try {
      streaming = send(req, res, key, file);
    } finally {
      if (!streaming) await file.handle.close();
    }
  });
  return router;
}
