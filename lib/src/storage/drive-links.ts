// What of the Drive provider the gateway and the operator use without
// talking to Drive: the saved-only rule, the wording of Drive's reasons, and
// the gateway's signed download URLs (README.md, "Drive download URLs").
// Apart from drive.ts so that using them never loads the Drive client
// (index.ts loads a provider's SDK only when a destination needs it).
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { DriveStorageProvider } from './drive.js';
import type { StorageProvider } from './types.js';

/** Providers accepted as saved destinations only, never as inline `storage` on POST /jobs (spec: POST /user/drive, rule 4). */
export const SAVED_ONLY_PROVIDERS: readonly string[] = ['drive'];

export interface DriveDownloadUrlOptions {
  /** The gateway's public base URL (PUBLIC_BASE_URL); may carry a path. */
  baseUrl: string;
  /** HMAC key of the URLs (FILE_URL_SECRET). */
  secret: string;
  /** Opaque reference the gateway resolves back to this destination's credentials, e.g. the job id. */
  ref: string;
}

/**
 * Wording for `Credential validation failed: <text>` (spec: POST /user/drive)
 * by reason; reasons not listed read as themselves.
 */
export const DRIVE_REASON_TEXT: Readonly<Record<string, string>> = {
  insufficient_permissions: 'insufficient permissions on folder',
  storageQuotaExceeded: 'service accounts have no storage quota; use a folder in a shared drive',
  not_a_folder: 'folder_id is not a folder',
  folder_trashed: 'the folder is in the trash',
  invalid_grant: 'the service account or its key was refused',
  accessNotConfigured: 'the Drive API is not enabled for the service account project',
};

/* ------------------------------------------------------------------ */
/* Download URLs                                                        */
/* ------------------------------------------------------------------ */

/**
 * Hex HMAC-SHA256 of a Drive download URL. The `drive` tag and the
 * reference are signed with the key and expiry, so neither a managed-storage
 * URL's signature nor one made for another destination verifies here.
 */
export function signDriveDownload(ref: string, key: string, expires: number, secret: string): string {
  return createHmac('sha256', secret).update(`drive\n${ref}\n${key}\n${expires}`).digest('hex');
}

/** Check a Drive download URL's signature and expiry (valid while now < expires); constant-time. */
export function verifyDriveDownload(ref: string, key: string, expires: string, sig: string, secret: string, nowMs = Date.now()): boolean {
  if (!/^\d{1,12}$/.test(expires) || !/^[0-9a-f]{64}$/.test(sig)) return false;
  if (Number(expires) * 1000 <= nowMs) return false;
  const expected = Buffer.from(signDriveDownload(ref, key, Number(expires), secret), 'hex');
  return timingSafeEqual(expected, Buffer.from(sig, 'hex'));
}

/** The gateway route that serves presign()'s URLs: `/drive-files/<ref>/<key>`. */
export const DRIVE_DOWNLOAD_PATH = '/drive-files/';

/** Whether `provider` is a Drive provider, whose openDownload() the gateway's route serves; asked without loading the Drive client. */
export function isDriveProvider(provider: StorageProvider): provider is DriveStorageProvider {
  return typeof (provider as Partial<DriveStorageProvider>).openDownload === 'function';
}
