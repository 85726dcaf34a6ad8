// GET /drive-files/<job id>/<key>?expires=&sig=: the download URL of a file
// delivered to a saved Drive destination. Drive has no presigned URLs, so
// the operator hands out URLs of this route (lib's DriveStorageProvider
// presign, HMAC under FILE_URL_SECRET, 24 h) and the gateway streams the
// file from Drive with the destination's credentials (lib/src/storage/
// README.md, "Drive download URLs"). Like a presigned URL, the URL itself
// is the credential: no API key. The credentials are those of the saved
// destination the job was resolved to, read at download time, so removing
// the destination also ends its download URLs.
import { Router, type Request, type Response } from 'express';
import type { Logger } from '@mediajobs/lib/logger';
import type { Destination } from '@mediajobs/lib/mediajob/types';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import { DRIVE_DOWNLOAD_PATH, createProvider, decodeKeyPath, isDriveProvider, verifyDriveDownload } from '@mediajobs/lib/storage/index';
import { StorageError } from '@mediajobs/lib/storage/types';
import type pg from 'pg';
import type { ProviderSettings } from '../destinations/probe.js';
import type { DestinationVault } from '../destinations/vault.js';
import { sendError } from '../http-errors.js';
import { isUuid } from '../ids.js';

export interface DriveFilesDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  vault?: DestinationVault;
  /** FILE_URL_SECRET: the operator signs the URLs with it. */
  secret: string;
  providerSettings?: ProviderSettings;
}

const one = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** `attachment; filename*=UTF-8''…` (RFC 6266), so any file name survives. */
function disposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

export function driveFilesRouter(deps: DriveFilesDeps): Router {
  const router = Router();
  const log = deps.logger;

  /** The job's saved Drive destination document, or undefined when it no longer exists. */
  async function destinationOf(jobId: string): Promise<Record<string, unknown> | undefined> {
    const r = await deps.pool.query<{ destination: Destination | null; source: string | null; secret_name: string | null; credentials_enc: string | null }>(
      `SELECT j.destination, d.source, d.secret_name, d.credentials_enc FROM jobs j
         LEFT JOIN storage_destinations d ON d.id = j.destination_id AND d.provider = 'drive'
        WHERE j.id = $1`, [jobId]);
    const row = r.rows[0];
    if (!row || row.destination?.provider !== 'drive' || !row.source) return undefined;
    if (row.source === 'legacy') return JSON.parse(deps.secretBox.open(row.credentials_enc!)) as Record<string, unknown>;
    return deps.vault?.read(row.secret_name!);
  }

  router.get(`${DRIVE_DOWNLOAD_PATH}*path`, async (req: Request, res: Response) => {
    // The still percent-encoded path: the signature covers the key as the provider encoded it.
    const raw = req.path.slice(DRIVE_DOWNLOAD_PATH.length);
    const slash = raw.indexOf('/');
    const expires = one(req.query.expires);
    const sig = one(req.query.sig);
    if (slash <= 0 || expires === undefined || sig === undefined) return sendError(res, 403, 'Invalid download URL signature');
    let ref: string;
    let key: string;
    try {
      ref = decodeURIComponent(raw.slice(0, slash));
      key = decodeKeyPath(raw.slice(slash + 1));
    } catch {
      return sendError(res, 403, 'Invalid download URL signature');
    }
    if (/^\d{1,12}$/.test(expires) && Number(expires) * 1000 <= Date.now()) return sendError(res, 403, 'Download URL has expired');
    if (!verifyDriveDownload(ref, key, expires, sig, deps.secret) || !isUuid(ref)) return sendError(res, 403, 'Invalid download URL signature');

    try {
      const document = await destinationOf(ref.toLowerCase());
      if (!document) return sendError(res, 404, 'File not found');
      const provider = await createProvider(document, deps.providerSettings);
      if (!isDriveProvider(provider)) return sendError(res, 404, 'File not found');
      const range = one(req.headers.range);
      const file = await provider.openDownload(key, range ? { range } : {});
      res.status(file.status);
      res.setHeader('Content-Type', file.contentType);
      res.setHeader('Content-Disposition', disposition(file.fileName));
      res.setHeader('Accept-Ranges', 'bytes');
      if (file.contentLength !== undefined) res.setHeader('Content-Length', String(file.contentLength));
      if (file.contentRange !== undefined) res.setHeader('Content-Range', file.contentRange);
      file.body.on('error', () => res.destroy());
      file.body.pipe(res);
    } catch (err) {
      if (err instanceof StorageError && err.code === 'not_found') return sendError(res, 404, 'File not found');
      // The reason token only: the destination's folder ids and the account stay out of the log.
      log.warn({ jobId: ref, reason: err instanceof StorageError ? err.reason : (err as Error).name }, 'drive download failed');
      if (err instanceof StorageError && (err.code === 'unreachable' || err.code === 'auth')) return sendError(res, 502, 'Storage destination unavailable');
      return sendError(res, 500, 'Internal server error');
    }
  });
  return router;
}
