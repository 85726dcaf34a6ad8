// Google Drive (API v3) through the official client (@googleapis/drive,
// the Drive part of `googleapis`) with a service account: a user's `drive`
// destination (spec: POST /user/drive). Saved destinations only: see
// SAVED_ONLY_PROVIDERS (drive-links.ts).
//
// Keys become folders: `a/videos/x.mp4` is the file `x.mp4` in the folder
// `videos` in the folder `a` under the destination's folder_id, created on
// demand. Drive allows several items with one name in a folder; when that
// happens (two jobs creating the same folder at once), the oldest one is the
// folder every job uses, so concurrent writers converge. Files are never
// written twice under one key: an upload to a name its folder already holds
// fails with `conflict`, checked by a lookup since Drive cannot refuse a
// duplicate name itself (see #refuseExisting).
//
// Uploads use Drive's resumable protocol. googleapis-common turns every
// media upload into a single multipart request, so the session is driven
// here through the service account's authenticated client (JWT → OAuth
// token): one session per file, chunks of chunkSize, and after a failed
// chunk the service is asked how much it kept and the rest is sent again.
//
// Rule 3 of POST /user/drive: a service account has no storage quota, so
// creating a file in a My Drive folder fails (403 storageQuotaExceeded),
// while a shared drive, with the account as content manager, works. The
// probe creates a file, so saving such a destination already fails with
// that reason; an upload that meets it fails with the same clear error.
//
// Download URLs: a Drive file has no presigned URL. presign() returns a URL
// of the gateway (`<baseUrl>/drive-files/<ref>/<key>?expires=&sig=`),
// HMAC-signed like managed local storage's; the gateway checks it, finds the
// destination's credentials through `ref` and streams the file from Drive
// with openDownload(). See lib/src/storage/README.md, "Drive download URLs".
import { drive as driveApi, auth as googleAuth, type drive_v3 } from '@googleapis/drive';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { DRIVE_DOWNLOAD_PATH, DRIVE_REASON_TEXT, signDriveDownload, type DriveDownloadUrlOptions } from './drive-links.js';
import { encodeKeyPath } from './managed-local.js';
import { parseServiceAccountJson, type ServiceAccountKey } from './service-account.js';
import {
  JOB_METADATA,
  PROBE_OBJECT_NAME,
  StorageError,
  assertExpiry,
  assertValidKey,
  countingSource,
  safeReason,
  sanitizeKeyPrefix,
  streamUpload,
  type CountedSource,
  type ObjectInfo,
  type StorageErrorCode,
  type StorageProvider,
  type UploadOptions,
  type UploadResult,
} from './types.js';

export interface DriveStorageOptions {
  /** Reported in errors; `drive` by default. */
  name?: string;
  /** From parseServiceAccountJson(), or the raw `service_account_json` (escaped JSON or Base64). */
  credentials: ServiceAccountKey | string;
  /** The destination's folder_id: a folder or a shared drive id; empty means the service account's own root. */
  folderId?: string;
  /** The destination's folder_prefix, as folders under folder_id. */
  folderPrefix?: string;
  /** Bytes per resumable-upload request; a multiple of 256 KiB, default 8 MiB. Memory is bounded by about one chunk. */
  chunkSize?: number;
  /** Retries of a failed request or chunk after the first try; default 3. */
  maxRetries?: number;
  /** Limit for one request in ms; default 120 s. */
  timeoutMs?: number;
  /** Where presign() points; without it presign() fails with `presign_unavailable`. */
  download?: DriveDownloadUrlOptions;
  /** Deployment setting, never a user's: API root instead of https://www.googleapis.com/ (tests, emulators). */
  rootUrl?: string;
  /**
   * Deployment setting, never a user's: where the JWT is exchanged for a
   * token. The key file's own `token_uri` is ignored on purpose (see
   * service-account.ts): honouring it would let whoever writes the file make
   * the service POST to any address.
   */
  tokenUri?: string;
}

export interface DriveDownload {
  /** 200, or 206 for a satisfied Range. */
  status: number;
  body: Readable;
  contentType: string;
  /** Bytes in `body`, when Drive said. */
  contentLength?: number;
  /** `bytes a-b/total` for a 206. */
  contentRange?: string;
  /** The file's name in Drive, for Content-Disposition. */
  fileName: string;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const CHUNK_UNIT = 256 * KiB; // resumable chunks other than the last must be multiples of this
const DEFAULT_CHUNK = 8 * MiB;
const DEFAULT_ROOT = 'https://www.googleapis.com/';
const MAX_DOWNLOAD_URL_SECONDS = 604_800;
// Full Drive scope: drive.file only reaches files the app created, not a
// folder a user shared with the account.
const SCOPE = 'https://www.googleapis.com/auth/drive';
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const FOLDER_MIME = 'application/vnd.google-apps.folder';
const FILE_FIELDS = 'id,name,mimeType,size,createdTime,appProperties';

// Drive's error reasons (error.errors[0].reason) → our codes and reasons.
const DRIVE_REASONS: Record<string, [StorageErrorCode, string]> = {
  notFound: ['not_found', 'notFound'],
  insufficientFilePermissions: ['auth', 'insufficient_permissions'],
  insufficientPermissions: ['auth', 'insufficient_permissions'],
  forbidden: ['auth', 'insufficient_permissions'],
  storageQuotaExceeded: ['auth', 'storageQuotaExceeded'],
  quotaExceeded: ['auth', 'storageQuotaExceeded'],
  accessNotConfigured: ['auth', 'accessNotConfigured'],
  authError: ['auth', 'invalid_credentials'],
  teamDriveFileLimitExceeded: ['failed', 'teamDriveFileLimitExceeded'],
  numChildrenInNonRootLimitExceeded: ['failed', 'numChildrenInNonRootLimitExceeded'],
  userRateLimitExceeded: ['unreachable', 'rate_limited'],
  rateLimitExceeded: ['unreachable', 'rate_limited'],
  dailyLimitExceeded: ['unreachable', 'rate_limited'],
  sharingRateLimitExceeded: ['unreachable', 'rate_limited'],
  backendError: ['unreachable', 'backendError'],
  internalError: ['unreachable', 'internalError'],
};

// Errors of the OAuth token endpoint (RFC 6749 §5.2): the account, its key or the signed JWT refused.
const OAUTH_ERRORS = new Set(['invalid_grant', 'invalid_client', 'unauthorized_client', 'access_denied', 'invalid_scope']);

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ECONNABORTED',
  'EPROTO',
  'UND_ERR_SOCKET',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
]);

const HUMAN: Record<StorageErrorCode, string> = {
  not_found: 'file or folder not found',
  auth: 'access refused',
  invalid_config: 'configuration rejected by the service',
  unreachable: 'service unreachable',
  conflict: 'file already exists',
  failed: 'request failed',
};

interface GaxiosLike {
  code?: unknown;
  status?: unknown;
  name?: unknown;
  cause?: unknown;
  errors?: unknown;
  response?: { status?: number; data?: unknown };
}

function driveError(code: StorageErrorCode, reason: string, provider: string, httpStatus?: number): StorageError {
  const text = DRIVE_REASON_TEXT[reason];
  const message = text ? `${provider}: ${text} (${reason})` : `${provider}: ${HUMAN[code]} (${reason})`;
  return new StorageError(code, reason, message, { provider, ...(httpStatus !== undefined ? { httpStatus } : {}) });
}

function networkCode(e: GaxiosLike | undefined, depth = 0): string | undefined {
  if (!e || depth > 3) return undefined;
  if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) return e.code;
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors as GaxiosLike[]) {
      const found = networkCode(inner, depth + 1);
      if (found) return found;
    }
  }
  return networkCode(e.cause as GaxiosLike | undefined, depth + 1);
}

/**
 * Map a googleapis/gaxios, OAuth or socket error to a StorageError. Only the
 * API's reason token and the status are read: gaxios errors carry the
 * request (with its bearer token) and Drive messages name file ids.
 */
export function mapDriveError(err: unknown, provider = 'drive'): StorageError {
  if (err instanceof StorageError) return err;
  const e = (err ?? {}) as GaxiosLike;
  const status = e.response?.status ?? (typeof e.status === 'number' ? e.status : undefined);
  const data = e.response?.data as { error?: unknown } | undefined;
  const net = networkCode(e);
  if (net) return driveError('unreachable', net, provider);
  if (typeof data?.error === 'string') {
    // The token endpoint: {"error":"invalid_grant","error_description":"..."}.
    return OAUTH_ERRORS.has(data.error)
      ? driveError('auth', 'invalid_grant', provider, status)
      : driveError('auth', safeReason(data.error), provider, status);
  }
  const apiError = data?.error as { errors?: Array<{ reason?: unknown }> } | undefined;
  const reason = apiError?.errors?.[0]?.reason;
  if (typeof reason === 'string' && DRIVE_REASONS[reason]) {
    const [code, ours] = DRIVE_REASONS[reason];
    return driveError(code, ours, provider, status);
  }
  if (e.name === 'AbortError' || e.name === 'TimeoutError' || /timeout/i.test(String(e.code ?? ''))) {
    return driveError('unreachable', 'timeout', provider);
  }
  if (status !== undefined) {
    const code: StorageErrorCode =
      status === 404 ? 'not_found' : status === 401 || status === 403 ? 'auth' : status === 429 || status >= 500 ? 'unreachable' : 'failed';
    const token = typeof reason === 'string' && safeReason(reason) === reason ? reason : `HTTP${status}`;
    return driveError(code, code === 'auth' && status === 401 ? 'invalid_credentials' : token, provider, status);
  }
  return driveError('failed', 'unknown', provider);
}

/* ------------------------------------------------------------------ */
/* Provider                                                             */
/* ------------------------------------------------------------------ */

/** Drive's query language quotes strings with `'`; backslash escapes. */
function quote(s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

function checkUrl(value: string, field: string, provider: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.username || url.password) {
    throw new StorageError('invalid_config', `invalid_${field}`, `${provider}: ${field} must be an http(s) URL without credentials`, { provider });
  }
  return url.toString();
}

interface RawResponse {
  status: number;
  headers: { get(name: string): string | null };
  data: unknown;
}

/** The slice of google-auth-library's JWT client used for the resumable protocol. */
interface AuthedClient {
  request(opts: Record<string, unknown>): Promise<RawResponse>;
}

interface FolderInfo {
  id: string;
  driveId: string | undefined;
}

export class DriveStorageProvider implements StorageProvider {
  readonly name: string;
  /** `root` (the account's own My Drive) when folder_id is empty. */
  readonly folderId: string;
  private readonly folderPrefix: string;
  private readonly chunkSize: number;
  private readonly maxRetries: number;
  private readonly timeoutMs: number;
  private readonly rootUrl: string;
  // Private fields: the clients hold the private key and tokens, the
  // download options the URL secret; keep them out of JSON and inspect.
  readonly #drive: drive_v3.Drive;
  readonly #auth: AuthedClient;
  readonly #download: DriveDownloadUrlOptions | undefined;
  /** folder path under folder_id ('' for folder_id itself) → id, for this provider's lifetime. */
  readonly #folders = new Map<string, Promise<string>>();
  #root: Promise<FolderInfo> | undefined;

  constructor(opts: DriveStorageOptions) {
    this.name = opts.name ?? 'drive';
    const fail = (reason: string, msg: string): never => {
      throw new StorageError('invalid_config', reason, `${this.name}: ${msg}`, { provider: this.name });
    };
    let credentials: ServiceAccountKey;
    if (typeof opts.credentials === 'string') {
      try {
        credentials = parseServiceAccountJson(opts.credentials, this.name);
      } catch (err) {
        // The spec's wording for this endpoint; the parser's reason token says which check failed.
        const reason = err instanceof StorageError ? err.reason : 'invalid_service_account_json';
        throw new StorageError('invalid_config', reason, 'Invalid configuration: invalid service account JSON', { provider: this.name });
      }
    } else if (opts.credentials) {
      credentials = opts.credentials;
    } else {
      credentials = fail('missing_credentials', 'service_account_json is required');
    }
    const folderId = (opts.folderId ?? '').trim();
    // Drive ids are URL-safe tokens; anything else would be pasted into queries and paths.
    if (folderId && !/^[A-Za-z0-9_-]{1,200}$/.test(folderId)) fail('invalid_folder_id', 'folder_id is not a Drive id');
    const chunkSize = opts.chunkSize ?? DEFAULT_CHUNK;
    if (!Number.isInteger(chunkSize) || chunkSize < CHUNK_UNIT || chunkSize % CHUNK_UNIT !== 0) {
      fail('invalid_chunk_size', 'chunk size must be a positive multiple of 256 KiB');
    }
    const rootUrl = checkUrl(opts.rootUrl ?? DEFAULT_ROOT, 'root_url', this.name).replace(/\/*$/, '/');
    const tokenUri = opts.tokenUri ? checkUrl(opts.tokenUri, 'token_uri', this.name) : undefined;
    if (opts.download) {
      checkUrl(opts.download.baseUrl, 'download_base_url', this.name);
      if (!opts.download.secret) fail('missing_download_secret', 'download URLs need a secret');
      if (!opts.download.ref) fail('missing_download_ref', 'download URLs need a reference');
    }

    this.folderId = folderId || 'root';
    this.folderPrefix = sanitizeKeyPrefix(opts.folderPrefix);
    this.chunkSize = chunkSize;
    this.maxRetries = Math.max(0, opts.maxRetries ?? 3);
    this.timeoutMs = opts.timeoutMs ?? 120_000;
    this.rootUrl = rootUrl;
    this.#download = opts.download;

    // Built from the vetted fields only (see service-account.ts), never from the user's file.
    const jwt = new googleAuth.JWT({
      email: credentials.clientEmail,
      key: credentials.privateKey,
      ...(credentials.privateKeyId ? { keyId: credentials.privateKeyId } : {}),
      scopes: [SCOPE],
    });
    if (tokenUri) {
      // Matched on the grant rather than on gtoken's token URL, an internal constant that has changed between releases.
      jwt.transporter.interceptors.request.add({
        resolved: async (config) => {
          const body = (config as { body?: unknown }).body;
          if (body instanceof URLSearchParams && body.get('grant_type') === JWT_BEARER_GRANT) config.url = new URL(tokenUri);
          return config;
        },
      });
    }
    this.#auth = jwt as unknown as AuthedClient;
    this.#drive = driveApi({
      version: 'v3',
      auth: jwt,
      rootUrl,
      timeout: this.timeoutMs,
      retryConfig: { retry: this.maxRetries, noResponseRetries: this.maxRetries, retryDelay: 200 },
    });
  }

  /* ---------------------------- folders ---------------------------- */

  /** folder_id, checked once: it must be a folder (or shared drive) the account can read. */
  #rootFolder(): Promise<FolderInfo> {
    this.#root ??= (async () => {
      try {
        const { data } = await this.#drive.files.get({
          fileId: this.folderId,
          supportsAllDrives: true,
          fields: 'id,mimeType,driveId,trashed,capabilities(canAddChildren)',
        });
        if (data.mimeType !== FOLDER_MIME) throw driveError('invalid_config', 'not_a_folder', this.name);
        if (data.trashed) throw driveError('not_found', 'folder_trashed', this.name);
        if (!data.capabilities?.canAddChildren) throw driveError('auth', 'insufficient_permissions', this.name, 403);
        return { id: data.id ?? this.folderId, driveId: data.driveId ?? undefined };
      } catch (err) {
        // A folder not shared with the account is, to it, a folder that does not exist: Drive answers 404 for both.
        const mapped = mapDriveError(err, this.name);
        throw mapped.code === 'not_found' && mapped.reason === 'notFound'
          ? driveError('auth', 'insufficient_permissions', this.name, mapped.httpStatus)
          : mapped;
      }
    })();
    // A failed check is not cached: the folder may be shared a moment later.
    this.#root.catch(() => (this.#root = undefined));
    return this.#root;
  }

  /** files.list scoped to the drive folder_id lives in, so a shared drive is searched without scanning every drive. */
  async #children(parentId: string, name: string, folders: boolean): Promise<drive_v3.Schema$File[]> {
    const root = await this.#rootFolder();
    const q = [`${quote(parentId)} in parents`, `name = ${quote(name)}`, 'trashed = false', `mimeType ${folders ? '=' : '!='} ${quote(FOLDER_MIME)}`];
    const { data } = await this.#drive.files.list({
      q: q.join(' and '),
      fields: `files(${FILE_FIELDS})`,
      orderBy: 'createdTime',
      pageSize: 100,
      supportsAllDrives: true,
      includeItemsFromAllDrives: true,
      ...(root.driveId ? { corpora: 'drive', driveId: root.driveId } : { corpora: 'user' }),
    });
    // Oldest first, the id breaking ties: every writer picks the same one.
    return (data.files ?? []).sort(
      (a, b) => String(a.createdTime).localeCompare(String(b.createdTime)) || String(a.id).localeCompare(String(b.id)),
    );
  }

  /** The folder at `segments` under folder_id, created when `create` and missing; undefined when absent. */
  async #folder(segments: string[], create: boolean): Promise<string | undefined> {
    let parent = (await this.#rootFolder()).id;
    for (let i = 0; i < segments.length; i++) {
      const path = segments.slice(0, i + 1).join('/');
      let pending = this.#folders.get(path);
      if (!pending) {
        const parentId = parent;
        const name = segments[i] as string;
        pending = create ? this.#ensureFolder(parentId, name) : this.#findFolder(parentId, name);
        this.#folders.set(path, pending);
        // Only found folders are remembered; a miss or a failure is looked up again next time.
        pending.then(
          (id) => id || this.#folders.delete(path),
          () => this.#folders.delete(path),
        );
      }
      const id = await pending;
      if (!id) return undefined;
      parent = id;
    }
    return parent;
  }

  async #findFolder(parentId: string, name: string): Promise<string> {
    return (await this.#children(parentId, name, true))[0]?.id ?? '';
  }

  async #ensureFolder(parentId: string, name: string): Promise<string> {
    const existing = await this.#findFolder(parentId, name);
    if (existing) return existing;
    const { data } = await this.#drive.files.create({
      requestBody: { name, mimeType: FOLDER_MIME, parents: [parentId] },
      supportsAllDrives: true,
      fields: 'id',
    });
    // Another job may have created the same folder meanwhile: the oldest wins, and ours goes if it lost.
    const winner = (await this.#findFolder(parentId, name)) || (data.id as string);
    if (data.id && winner !== data.id) await this.#trash(data.id).catch(() => undefined);
    return winner;
  }

  /** The file at `key`: the newest of that name in its folder (Drive allows several; uploads leave several only after a race, see #refuseExisting). */
  async #file(key: string): Promise<drive_v3.Schema$File | undefined> {
    const segments = key.split('/');
    const name = segments.pop() as string;
    const parent = await this.#folder(segments, false);
    if (!parent) return undefined;
    return (await this.#children(parent, name, false)).at(-1);
  }

  /**
   * Fail with `conflict` when `parentId` holds a file named `name`: Drive
   * lets any number of files share a name, and #file would then serve the
   * newest under the key, so a second upload would shadow the first job's
   * file rather than sit beside it. Drive has no create-if-absent, so this
   * is a lookup, not a guarantee: upload() runs it before the first byte
   * (a taken key costs no transfer) and again just before the last chunk,
   * the request that creates the file, which leaves a race window of that
   * one request (with its retries) rather than the whole transfer. Two
   * uploads to one key whose windows overlap both land, and the later file
   * is the one served under the key, as with S3's HEAD; job keys are unique
   * unless a filename is given.
   */
  async #refuseExisting(parentId: string, name: string): Promise<void> {
    if ((await this.#children(parentId, name, false)).length === 0) return;
    throw driveError('conflict', 'KeyExists', this.name);
  }

  async #trash(fileId: string): Promise<void> {
    // Trash rather than delete: permanent deletion in a shared drive needs
    // the organizer role, and the spec asks only for content manager.
    await this.#drive.files.update({ fileId, supportsAllDrives: true, requestBody: { trashed: true }, fields: 'id' });
  }

  /* --------------------------- interface --------------------------- */

  /**
   * Check folder_id (a folder the account may add to), then create and
   * trash `verify_credentials.txt` in it. Creating a file is the one call
   * that shows rule 3's quota error, so nothing lighter would do. The probe
   * writes directly in folder_id, not under folder_prefix: permissions in
   * Drive come from folder_id, and the probe should leave no folders behind.
   */
  async probe(): Promise<void> {
    try {
      const root = await this.#rootFolder();
      const id = await this.#resumableUpload(root.id, PROBE_OBJECT_NAME, 'text/plain', countingSource(Readable.from([Buffer.from('mediajobs storage probe\n')]), this.name));
      await this.#trash(id);
    } catch (err) {
      throw mapDriveError(err, this.name);
    }
  }

  /**
   * Stream `body` to the file at `key` (folders created as needed) through a
   * resumable session. A key that already holds a file is never written
   * again: the upload fails with `conflict` (see #refuseExisting).
   */
  async upload(key: string, body: Readable, opts: UploadOptions = {}): Promise<UploadResult> {
    return streamUpload(this.name, key, body, opts, {
      send: async (source) => {
        const segments = key.split('/');
        const name = segments.pop() as string;
        const parent = (await this.#folder(segments, true)) as string;
        const refuseExisting = () => this.#refuseExisting(parent, name);
        await refuseExisting();
        // The job the file belongs to, as an appProperty: private to the app, kept with the file.
        const appProperties = opts.jobId !== undefined ? { [JOB_METADATA]: opts.jobId } : undefined;
        await this.#resumableUpload(parent, name, opts.contentType ?? 'application/octet-stream', source, opts.size, refuseExisting, appProperties);
      },
      // No remove: the session checks the size before its last chunk, so a short stream never becomes a file.
      mapError: (err) => mapDriveError(err, this.name),
    });
  }

  /** A gateway URL (see the header): signed, expiring, made without a network call. */
  async presign(key: string, expiresSeconds: number): Promise<string> {
    assertValidKey(key);
    if (!this.#download) {
      throw new StorageError('invalid_config', 'presign_unavailable', `${this.name}: download URLs are not configured`, { provider: this.name });
    }
    assertExpiry(expiresSeconds, this.name, MAX_DOWNLOAD_URL_SECONDS);
    const { baseUrl, secret, ref } = this.#download;
    const expires = Math.floor(Date.now() / 1000) + expiresSeconds;
    const sig = signDriveDownload(ref, key, expires, secret);
    return `${baseUrl.replace(/\/+$/, '')}${DRIVE_DOWNLOAD_PATH}${encodeURIComponent(ref)}/${encodeKeyPath(key)}?expires=${expires}&sig=${sig}`;
  }

  /** The file at `key` as Drive holds it (files.list with size and appProperties): its size and job; undefined when none is there. */
  async stat(key: string): Promise<ObjectInfo | undefined> {
    assertValidKey(key);
    let file: drive_v3.Schema$File | undefined;
    try {
      file = await this.#file(key);
    } catch (err) {
      throw mapDriveError(err, this.name);
    }
    if (!file?.id) return undefined;
    const jobId = file.appProperties?.[JOB_METADATA];
    return { size: Number(file.size ?? 0), ...(typeof jobId === 'string' && { jobId }) };
  }

  /** Idempotent: a missing file is already deleted. Trashed, not purged (see #trash). */
  async delete(key: string): Promise<void> {
    assertValidKey(key);
    try {
      const file = await this.#file(key);
      if (file?.id) await this.#trash(file.id);
    } catch (err) {
      const mapped = mapDriveError(err, this.name);
      if (mapped.code !== 'not_found') throw mapped;
    }
  }

  /**
   * The gateway's half of a download URL: stream the file at `key` from
   * Drive with the account's credentials. `range` is passed to Drive as is
   * (`bytes=a-b`), which answers 206.
   */
  async openDownload(key: string, opts: { range?: string } = {}): Promise<DriveDownload> {
    assertValidKey(key);
    try {
      const file = await this.#file(key);
      if (!file?.id) throw driveError('not_found', 'notFound', this.name, 404);
      const res = await this.#drive.files.get(
        { fileId: file.id, alt: 'media', supportsAllDrives: true },
        { responseType: 'stream', ...(opts.range ? { headers: { Range: opts.range } } : {}) },
      );
      const header = (n: string) => (res.headers as unknown as { get(n: string): string | null }).get(n) ?? undefined;
      const length = header('content-length');
      const range = header('content-range');
      return {
        status: res.status,
        body: res.data as Readable,
        contentType: header('content-type') ?? file.mimeType ?? 'application/octet-stream',
        ...(length !== undefined ? { contentLength: Number(length) } : {}),
        ...(range !== undefined ? { contentRange: range } : {}),
        fileName: file.name ?? key.split('/').pop() ?? 'download',
      };
    } catch (err) {
      throw mapDriveError(err, this.name);
    }
  }

  /* ------------------------ resumable upload ------------------------ */

  async #raw(opts: Record<string, unknown>): Promise<RawResponse> {
    // Statuses are judged here (308 is the protocol's "go on"), and retries too: gaxios's would resend a consumed body.
    return this.#auth.request({ ...opts, timeout: this.timeoutMs, retry: false, responseType: 'text', validateStatus: () => true });
  }

  /** Throw the mapped error of a non-success response, with the reason Drive gave. */
  #fail(res: RawResponse): never {
    let data: unknown = res.data;
    if (typeof data === 'string') {
      try {
        data = JSON.parse(data) as unknown;
      } catch {
        data = undefined;
      }
    }
    throw mapDriveError({ response: { status: res.status, data } }, this.name);
  }

  async #retrying<T>(op: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await op();
      } catch (err) {
        const mapped = mapDriveError(err, this.name);
        if (attempt >= this.maxRetries || mapped.code !== 'unreachable') throw mapped;
        await sleep(200 * 2 ** attempt);
      }
    }
  }

  /**
   * Upload `source` as a new file named `name` in `parentId`; returns its id.
   * One chunk is held at a time (plus what was read past it), and it is only
   * let go once Drive confirms it; the last chunk carries the total, which
   * is when Drive creates the file, so `beforeCreate` runs just before it.
   * A failure cancels the session, so no partial file is ever created.
   */
  async #resumableUpload(
    parentId: string,
    name: string,
    contentType: string,
    source: CountedSource,
    size?: number,
    beforeCreate?: () => Promise<void>,
    appProperties?: Record<string, string>,
  ): Promise<string> {
    const init = await this.#retrying(async () => {
      const res = await this.#raw({
        method: 'POST',
        url: `${this.rootUrl}upload/drive/v3/files?uploadType=resumable&supportsAllDrives=true&fields=${encodeURIComponent(FILE_FIELDS)}`,
        headers: {
          'Content-Type': 'application/json; charset=UTF-8',
          'X-Upload-Content-Type': contentType,
          ...(size !== undefined ? { 'X-Upload-Content-Length': String(size) } : {}),
        },
        data: JSON.stringify({ name, parents: [parentId], mimeType: contentType, ...(appProperties && { appProperties }) }),
      });
      if (res.status !== 200) this.#fail(res);
      return res;
    });
    const session = init.headers.get('location');
    if (!session) throw driveError('failed', 'no_upload_session', this.name);

    let offset = 0; // bytes Drive has confirmed
    try {
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      for await (const chunk of source.stream) {
        pending.push(chunk as Buffer);
        pendingBytes += (chunk as Buffer).length;
        // Strictly more than a chunk: what is left over proves this chunk is not the last.
        while (pendingBytes > this.chunkSize) {
          const all = Buffer.concat(pending, pendingBytes);
          offset = await this.#sendChunk(session, all.subarray(0, this.chunkSize), offset);
          pending = [all.subarray(this.chunkSize)];
          pendingBytes = all.length - this.chunkSize;
        }
      }
      const last = Buffer.concat(pending, pendingBytes);
      const total = offset + last.length;
      // Checked before the last chunk, which is what creates the file: a short stream leaves nothing behind.
      if (size !== undefined && total !== size) {
        throw new StorageError('failed', 'size_mismatch', `${this.name}: upload is smaller than its declared size`, { provider: this.name });
      }
      await beforeCreate?.();
      return await this.#finish(session, last, offset, total);
    } catch (err) {
      // Cancelling (DELETE, answered 499) frees the session; nothing was created.
      await this.#raw({ method: 'DELETE', url: session }).catch(() => undefined);
      throw err;
    }
  }

  /** Send a non-final chunk starting at `offset`; resumes within it until Drive holds all of it. Returns the new offset. */
  async #sendChunk(session: string, chunk: Buffer, offset: number): Promise<number> {
    const end = offset + chunk.length;
    let confirmed = offset;
    for (let attempt = 0; ; ) {
      const part = chunk.subarray(confirmed - offset);
      try {
        const res = await this.#raw({
          method: 'PUT',
          url: session,
          headers: { 'Content-Range': `bytes ${confirmed}-${end - 1}/*`, 'Content-Type': 'application/octet-stream' },
          data: part,
        });
        if (res.status === 308) {
          confirmed = confirmedBytes(res);
          if (confirmed >= end) return end;
          continue; // Drive kept only part of it: send the rest
        }
        if (res.status >= 500 || res.status === 429) throw driveError('unreachable', `HTTP${res.status}`, this.name, res.status);
        this.#fail(res);
      } catch (err) {
        const mapped = mapDriveError(err, this.name);
        if (mapped.code !== 'unreachable' || attempt >= this.maxRetries) throw mapped;
        await sleep(200 * 2 ** attempt++);
        confirmed = await this.#askProgress(session, confirmed);
        if (confirmed >= end) return end;
      }
    }
  }

  /** Send the last chunk (possibly empty), which names the total; returns the new file's id. */
  async #finish(session: string, last: Buffer, offset: number, total: number): Promise<string> {
    let confirmed = offset;
    for (let attempt = 0; ; ) {
      try {
        const res = await this.#raw({
          method: 'PUT',
          url: session,
          headers: {
            'Content-Range': last.length === 0 ? `bytes */${total}` : `bytes ${confirmed}-${total - 1}/${total}`,
            'Content-Type': 'application/octet-stream',
          },
          data: last.subarray(confirmed - offset),
        });
        if (res.status === 200 || res.status === 201) return fileId(res, this.name);
        if (res.status === 308) {
          confirmed = Math.max(confirmed, confirmedBytes(res));
          continue;
        }
        if (res.status >= 500 || res.status === 429) throw driveError('unreachable', `HTTP${res.status}`, this.name, res.status);
        this.#fail(res);
      } catch (err) {
        const mapped = mapDriveError(err, this.name);
        if (mapped.code !== 'unreachable' || attempt >= this.maxRetries) throw mapped;
        await sleep(200 * 2 ** attempt++);
        const status = await this.#raw({ method: 'PUT', url: session, headers: { 'Content-Range': `bytes */${total}` }, data: '' });
        if (status.status === 200 || status.status === 201) return fileId(status, this.name);
        if (status.status !== 308) this.#fail(status);
        confirmed = Math.max(offset, confirmedBytes(status));
      }
    }
  }

  /**
   * How many bytes the session holds (a `Content-Range: bytes *\/*` query);
   * `known` when the service cannot be asked, so the next attempt resends
   * from there and the attempt count still bounds the loop.
   */
  async #askProgress(session: string, known: number): Promise<number> {
    let res: RawResponse;
    try {
      res = await this.#raw({ method: 'PUT', url: session, headers: { 'Content-Range': 'bytes */*' }, data: '' });
    } catch (err) {
      if (mapDriveError(err, this.name).code === 'unreachable') return known;
      throw err;
    }
    if (res.status === 308) return Math.max(known, confirmedBytes(res));
    if (res.status >= 500 || res.status === 429) return known;
    return this.#fail(res);
  }
}

/** Bytes a 308 says the session holds: its `Range: bytes=0-N` header, or none. */
function confirmedBytes(res: RawResponse): number {
  const m = /^bytes=0-(\d+)$/.exec(res.headers.get('range') ?? '');
  return m ? Number(m[1]) + 1 : 0;
}

function fileId(res: RawResponse, provider: string): string {
  let data: unknown = res.data;
  if (typeof data === 'string') {
    try {
      data = JSON.parse(data) as unknown;
    } catch {
      data = undefined;
    }
  }
  const id = (data as { id?: unknown } | undefined)?.id;
  if (typeof id !== 'string' || id === '') throw driveError('failed', 'no_file_id', provider);
  return id;
}

