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
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { resolvedDestination } from '@mediajobs/lib/db/jobs';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import {
  DRIVE_DOWNLOAD_PATH, createProvider, decodeKeyPath, isDriveProvider, verifyDriveDownload, type DriveDownload,
} from '@mediajobs/lib/storage/index';
import { StorageError } from '@mediajobs/lib/storage/types';
import type pg from 'pg';
import type { ProviderSettings } from '../destinations/probe.js';
import type { DestinationVault } from '../destinations/vault.js';
import { HttpError } from '../http-errors.js';
import { isUuid } from '../ids.js';
import { signedUrlQuery } from '../query.js';

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

/** The job id and key a signed URL names; 403 for a URL whose signature is missing, expired or forged. */
function signedFile(req: Request, secret: string): { ref: string; key: string } {
  // The still percent-encoded path: the signature covers the key as the provider encoded it.
  const raw = req.path.slice(DRIVE_DOWNLOAD_PATH.length);
  const slash = raw.indexOf('/');
  const query = signedUrlQuery.safeParse(req.query);
  const forged = new HttpError(403, 'Invalid download URL signature');
  if (slash <= 0 || !query.success) throw forged;
  const { expires, sig } = query.data;
  let ref: string;
  let key: string;
  try {
    ref = decodeURIComponent(raw.slice(0, slash));
    key = decodeKeyPath(raw.slice(slash + 1));
  } catch {
    throw forged;
  }
  if (/^\d{1,12}$/.test(expires) && Number(expires) * 1000 <= Date.now()) throw new HttpError(403, 'Download URL has expired');
  if (!verifyDriveDownload(ref, key, expires, sig, secret) || !isUuid(ref)) throw forged;
  return { ref, key };
}

/** What a failed Drive read answers: the file is gone (404), Drive refuses or is unreachable (502), else a 500. */
function downloadError(err: unknown): HttpError {
  if (err instanceof StorageError && err.code === 'not_found') return new HttpError(404, 'File not found');
  if (err instanceof StorageError && (err.code === 'unreachable' || err.code === 'auth')) return new HttpError(502, 'Storage destination unavailable');
  return new HttpError(500, 'Internal server error');
}

export function driveFilesRouter(deps: DriveFilesDeps): Router {
  const router = Router();
  const log = deps.logger;

  /** The job's saved Drive destination document, or undefined when it no longer exists. */
  async function destinationOf(jobId: string): Promise<Record<string, unknown> | undefined> {
    const row = await resolvedDestination(deps.pool, jobId, 'drive');
    if (!row || row.destination?.provider !== 'drive' || !row.source) return undefined;
    if (row.source === 'legacy') {
      const at = sealedAt.destinationCredentials({ owner_kind: row.owner_kind!, owner_id: row.owner_id!, provider: 'drive' });
      return JSON.parse(deps.secretBox.open(row.credentials_enc!, at)) as Record<string, unknown>;
    }
    return deps.vault?.read(row.secret_name!);
  }

  /** The file, opened on Drive with the destination's credentials; 404 when the destination is gone. */
  async function openFile(ref: string, key: string, range: string | undefined): Promise<DriveDownload> {
    const document = await destinationOf(ref.toLowerCase());
    if (!document) throw new HttpError(404, 'File not found');
    const provider = await createProvider(document, deps.providerSettings);
    if (!isDriveProvider(provider)) throw new HttpError(404, 'File not found');
    return provider.openDownload(key, range ? { range } : {});
  }

  router.get(`${DRIVE_DOWNLOAD_PATH}*path`, async (req: Request, res: Response) => {
    const { ref, key } = signedFile(req, deps.secret);
    let file: DriveDownload;
    try {
      file = await openFile(ref, key, one(req.headers.range));
    } catch (err) {
      if (err instanceof HttpError) throw err;
      const answer = downloadError(err);
      // Logged here, as a warning: Drive's refusals are the destination's trouble, not the gateway's.
      if (answer.status !== 404) log.warn({ jobId: ref, err: errFields(err) }, 'drive download failed');
      throw answer;
    }
    res.status(file.status);
    res.setHeader('Content-Type', file.contentType);
    res.setHeader('Content-Disposition', disposition(file.fileName));
    res.setHeader('Accept-Ranges', 'bytes');
    if (file.contentLength !== undefined) res.setHeader('Content-Length', String(file.contentLength));
    if (file.contentRange !== undefined) res.setHeader('Content-Range', file.contentRange);
    file.body.on('error', () => res.destroy());
    file.body.pipe(res);
  });
  return router;
}
