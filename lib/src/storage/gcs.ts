// Google Cloud Storage through the official client (@google-cloud/storage)
// with a service account key: resumable uploads, V4 signed URLs signed
// locally with the account's private key.
import { IdempotencyStrategy, Storage, type Bucket } from '@google-cloud/storage';
import { DefaultTransporter, GoogleAuth } from 'google-auth-library';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseServiceAccountJson, type ServiceAccountKey } from './service-account.js';
import {
  JOB_METADATA,
  NETWORK_ERROR_CODES,
  STORAGE_ERROR_TEXT,
  PROBE_OBJECT_NAME,
  StorageError,
  assertExpiry,
  assertValidKey,
  safeReason,
  sanitizeKeyPrefix,
  streamUpload,
  type StorageErrorCode,
  type ObjectInfo,
  type StorageProvider,
  type UploadOptions,
  type UploadResult } from './types.js';

export interface GcsStorageOptions {
  /** Reported in errors; `gcs` by default. */
  name?: string;
  /** The destination's project_id (required by the spec's backend-construction step). */
  projectId: string;
  bucket: string;
  /** From parseServiceAccountJson(), or the raw `service_account_json` (JSON, escaped JSON or Base64), parsed here. */
  credentials: ServiceAccountKey | string;
  /** The destination's folder_prefix; the probe writes under it (see probe()). */
  folderPrefix?: string;
  /**
   * Deployment setting, never a user's: the JSON API root instead of
   * https://storage.googleapis.com (private endpoints, tests). Signed URLs
   * point at it too.
   */
  apiEndpoint?: string;
  /**
   * Deployment setting, never a user's: where the service-account JWT is
   * exchanged for an access token instead of Google's OAuth endpoint. The
   * key file's own `token_uri` is ignored on purpose: honouring it would let
   * whoever writes the file make the service POST to any address.
   */
  tokenUri?: string;
  /** Bytes per resumable-upload request; a multiple of 256 KiB, default 16 MiB. Memory is bounded by about one chunk. */
  chunkSize?: number;
  /** Retries of a failed request or chunk (after the first try); default 3. */
  maxRetries?: number;
  /** Deadline of each control request (token, JSON API, the probe's upload); default 60 s. */
  timeoutMs?: number;
  /** Deadline of each resumable-upload request (one chunk); default 300 s, i.e. 16 MiB at under 60 kB/s. */
  chunkTimeoutMs?: number;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const CHUNK_UNIT = 256 * KiB; // resumable chunks other than the last must be multiples of this
const DEFAULT_CHUNK = 16 * MiB;
const MAX_SIGNED_URL_SECONDS = 604_800; // V4 signed URLs live at most 7 days
// Objects only: read_write is the narrowest scope that creates and deletes
// them (the library itself would ask for full_control and cloud-platform).
const SCOPE = 'https://www.googleapis.com/auth/devstorage.read_write';
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

// Errors the OAuth token endpoint answers with (RFC 6749 §5.2) when the
// account, its key or the signed JWT is refused.
const OAUTH_AUTH_ERRORS = new Set(['invalid_grant', 'invalid_client', 'unauthorized_client', 'access_denied', 'invalid_scope']);

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  status?: unknown;
  errno?: unknown;
  cause?: unknown;
  error?: unknown;
  errors?: unknown;
  type?: unknown;
  response?: { status?: unknown; data?: unknown };
}

/** The error and those it wraps: gaxios keeps the fetch error in `error`, Node in `cause` or AggregateError's `errors`. */
function chain(e: ErrorLike, depth = 0): ErrorLike[] {
  if (depth > 3) return [e];
  const inner = [e.cause, e.error, ...(Array.isArray(e.errors) ? (e.errors as unknown[]) : [])].filter(
    (x): x is ErrorLike => x !== null && typeof x === 'object',
  );
  return [e, ...inner.flatMap((x) => chain(x, depth + 1))];
}

function networkCode(e: ErrorLike): string | undefined {
  for (const x of chain(e)) for (const c of [x.code, x.errno]) if (typeof c === 'string' && NETWORK_ERROR_CODES.has(c)) return c;
  return undefined;
}

/** node-fetch (under gaxios and teeny-request) reports its deadline as type `request-timeout`. */
function isTimeout(e: ErrorLike): boolean {
  return chain(e).some((x) => x.type === 'request-timeout' || x.name === 'TimeoutError');
}

/** The HTTP status, wherever the JSON-API client (ApiError.code), gaxios (response.status) or the resumable uploader (code) put it. */
function httpStatus(e: ErrorLike): number | undefined {
  for (const s of [e.response?.status, e.status, e.code]) {
    if (typeof s === 'number' && s >= 100 && s < 600) return s;
    if (typeof s === 'string' && /^[1-5]\d\d$/.test(s)) return Number(s);
  }
  return undefined;
}

/**
 * Map a client, token-endpoint or socket error to a StorageError. Reasons
 * are fixed tokens: `AuthenticationFailed` (the spec's word for a refused
 * service account), `AccessDenied`, `NoSuchBucket`, the socket errno or
 * `HTTP<status>`; the client's messages are dropped since they can quote the
 * bucket, the account's email or the server's reply.
 */
export function mapGcsError(err: unknown, provider = 'gcs'): StorageError {
  if (err instanceof StorageError) return err;
  const e = (err ?? {}) as ErrorLike;
  const net = networkCode(e);
  const status = httpStatus(e);
  // The token endpoint answers {"error": "invalid_grant", ...}; the JSON API {"error": {code, message, errors}}.
  const data = e.response?.data as { error?: unknown } | undefined;
  const oauthError = typeof data?.error === 'string' ? data.error : undefined;

  let code: StorageErrorCode;
  let reason: string;
  if (net) {
    code = 'unreachable';
    reason = net;
  } else if (oauthError && OAUTH_AUTH_ERRORS.has(oauthError)) {
    code = 'auth';
    reason = 'AuthenticationFailed';
  } else if (status === 401) {
    code = 'auth';
    reason = 'AuthenticationFailed';
  } else if (status === 403) {
    code = 'auth';
    reason = 'AccessDenied';
  } else if (status === 404) {
    // Every call here names an object in the configured bucket; uploads and
    // the probe only get a 404 when the bucket itself is missing.
    code = 'not_found';
    reason = 'NoSuchBucket';
  } else if (status === 412) {
    // The only precondition an upload carries is ifGenerationMatch=0, so a
    // failed one means the key already holds an object. (The cleanup delete's
    // generation precondition can fail too, but its errors are dropped.)
    code = 'conflict';
    reason = 'KeyExists';
  } else if (status !== undefined && (status === 408 || status === 429 || status >= 500)) {
    code = 'unreachable';
    reason = `HTTP${status}`;
  } else if (status === 400) {
    code = 'invalid_config';
    reason = 'HTTP400';
  } else if (e.name === 'AbortError') {
    code = 'failed';
    reason = 'aborted';
  } else if (e.code === 'FILE_NO_UPLOAD' || e.code === 'FILE_NO_UPLOAD_DELETE') {
    // The client's checksum of what it sent differs from the stored object's.
    code = 'failed';
    reason = 'checksum_mismatch';
  } else if (isTimeout(e)) {
    code = 'unreachable';
    reason = 'timeout';
  } else if (status !== undefined) {
    code = 'failed';
    reason = `HTTP${status}`;
  } else {
    code = 'failed';
    reason = 'unknown';
  }
  reason = safeReason(reason);
  const opts: { provider: string; httpStatus?: number } = { provider };
  if (status !== undefined) opts.httpStatus = status;
  return new StorageError(code, reason, `${provider}: ${STORAGE_ERROR_TEXT[code]} (${reason})`, opts);
}

type TransportOptions = Parameters<DefaultTransporter['request']>[0];

/**
 * The auth client's transport: gives every request without one a deadline
 * (the library sets none, so a server that never answers would hang a
 * job), and sends the JWT-bearer token exchange to `tokenUri` when one is
 * configured.
 */
class GcsTransporter extends DefaultTransporter {
  readonly #tokenUri: string | undefined;
  readonly #timeoutMs: number;

  constructor(tokenUri: string | undefined, timeoutMs: number) {
    super();
    this.#tokenUri = tokenUri;
    this.#timeoutMs = timeoutMs;
  }

  override request<T>(opts: TransportOptions) {
    let o = opts.timeout === undefined ? { ...opts, timeout: this.#timeoutMs } : opts;
    // Matched on the grant rather than on the library's token URL, which is
    // an internal constant of gtoken and has changed between releases.
    const grant = (o.data as { grant_type?: unknown } | undefined)?.grant_type;
    if (this.#tokenUri && grant === JWT_BEARER_GRANT) o = { ...o, url: this.#tokenUri };
    return super.request<T>(o);
  }
}

function checkUrl(value: string, field: string, provider: string): string {
  const fail = (): never => {
    throw new StorageError('invalid_config', `invalid_${field}`, `${provider}: ${field} must be an http(s) URL without credentials`, { provider });
  };
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    fail();
  }
  const u = url as URL;
  if ((u.protocol !== 'https:' && u.protocol !== 'http:') || u.username || u.password) fail();
  return u.toString().replace(/\/+$/, '');
}

export class GcsStorageProvider implements StorageProvider {
  readonly name: string;
  readonly bucket: string;
  readonly projectId: string;
  private readonly folderPrefix: string;
  private readonly chunkSize: number;
  private readonly timeoutMs: number;
  // Private fields: the client holds the private key; keep it out of
  // JSON.stringify and util.inspect of the provider.
  readonly #bucket: Bucket;

  constructor(opts: GcsStorageOptions) {
    this.name = opts.name ?? 'gcs';
    const fail = (reason: string, msg: string): never => {
      throw new StorageError('invalid_config', reason, `${this.name}: ${msg}`, { provider: this.name });
    };
    if (!opts.projectId?.trim()) fail('project_id_required', 'project_id is required');
    if (!opts.bucket) fail('missing_bucket', 'bucket is required');
    if (!opts.credentials) fail('missing_credentials', 'service_account_json is required');
    const credentials = typeof opts.credentials === 'string' ? parseServiceAccountJson(opts.credentials, this.name) : opts.credentials;
    const chunkSize = opts.chunkSize ?? DEFAULT_CHUNK;
    if (!Number.isInteger(chunkSize) || chunkSize < CHUNK_UNIT || chunkSize % CHUNK_UNIT !== 0) {
      fail('invalid_chunk_size', 'chunk size must be a positive multiple of 256 KiB');
    }
    const apiEndpoint = opts.apiEndpoint ? checkUrl(opts.apiEndpoint, 'api_endpoint', this.name) : undefined;
    const tokenUri = opts.tokenUri ? checkUrl(opts.tokenUri, 'token_uri', this.name) : undefined;

    this.bucket = opts.bucket;
    this.projectId = opts.projectId.trim();
    this.folderPrefix = sanitizeKeyPrefix(opts.folderPrefix);
    this.chunkSize = chunkSize;
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    const chunkTimeoutMs = opts.chunkTimeoutMs ?? 300_000;

    // Built from the vetted fields only (see service-account.ts), never from
    // the user's file. A GoogleAuth rather than a bare JWT client: the client
    // signs URLs locally only when GoogleAuth holds the key, and only a
    // GoogleAuth passed in keeps our narrower scope.
    const auth = new GoogleAuth({
      credentials: {
        type: 'service_account',
        client_email: credentials.clientEmail,
        private_key: credentials.privateKey,
        ...(credentials.privateKeyId ? { private_key_id: credentials.privateKeyId } : {}),
      },
      scopes: [SCOPE],
      clientOptions: { transporter: new GcsTransporter(tokenUri, this.timeoutMs) },
    });
    const maxRetries = opts.maxRetries ?? 3;
    const storage: Storage = new Storage({
      projectId: this.projectId,
      authClient: auth,
      // With a custom endpoint the client skips authentication unless told otherwise.
      ...(apiEndpoint ? { apiEndpoint, useAuthWithCustomEndpoint: true } : {}),
      // RetryAlways: by default the client retries a write only when it
      // carries a generation precondition. Uploads do (see upload()), but the
      // probe's save and delete do not, and a probe lost to a dropped
      // connection would refuse a good destination. Repeating them is safe:
      // the probe's object is its own, and an upload's chunks are resent
      // within its session, whose precondition the service checks once, when
      // it creates the object. A 412 is never retried, whatever the strategy:
      // the client retries only 408, 429, 5xx and dropped connections.
      retryOptions: { autoRetry: maxRetries > 0, maxRetries, idempotencyStrategy: IdempotencyStrategy.RetryAlways },
      timeout: this.timeoutMs,
    });
    // Resumable-upload requests take their options from the interceptors
    // (JSON API requests already carry the timeout above).
    // (The library types an interceptor's result more narrowly than the options it passes in.)
    const withChunkTimeout = (reqOpts: { timeout?: number }) => (reqOpts.timeout === undefined ? { ...reqOpts, timeout: chunkTimeoutMs } : reqOpts);
    storage.interceptors.push({ request: withChunkTimeout as unknown as Storage['interceptors'][number]['request'] });
    this.#bucket = storage.bucket(opts.bucket);
  }

  /**
   * Upload (one simple multipart request) and delete `verify_credentials.txt`
   * at the root of the destination's folder_prefix: credentials may be
   * limited to that prefix by IAM conditions, and it is where jobs write.
   */
  async probe(): Promise<void> {
    const key = this.folderPrefix ? `${this.folderPrefix}/${PROBE_OBJECT_NAME}` : PROBE_OBJECT_NAME;
    const file = this.#bucket.file(key);
    try {
      await file.save('mediajobs storage probe\n', { resumable: false, contentType: 'text/plain', timeout: this.timeoutMs });
      await file.delete({ ignoreNotFound: true });
    } catch (err) {
      throw mapGcsError(err, this.name);
    }
  }

  /**
   * Stream `body` through a resumable upload session in chunks of
   * chunkSize: the client holds one chunk to resend it, so memory stays near
   * one chunk whatever the file size, and a dropped connection resumes from
   * the last byte the service confirmed instead of starting over. The object
   * appears only when the last chunk lands, and the client checks its CRC32C
   * against the stored object's.
   *
   * An existing object is never overwritten: the session carries
   * ifGenerationMatch=0 ("only if there is no live object"), which GCS
   * checks when the last chunk would create the object, in the same step.
   * So an object that appeared under the key while this upload ran (another
   * job's) is kept too, which a lookup before uploading could not promise.
   * The refusal is a 412, reported as `conflict`; the session's bytes are
   * discarded and nothing is stored. It comes only after the bytes were sent,
   * the price of the check being atomic; keys collide only when a job names
   * its file.
   */
  async upload(key: string, body: Readable, opts: UploadOptions = {}): Promise<UploadResult> {
    let generation: string | undefined;
    // The job the object belongs to, as the object's custom metadata (metadata.mediajobs-job).
    const custom = opts.jobId !== undefined ? { metadata: { [JOB_METADATA]: opts.jobId } } : {};
    return streamUpload(this.name, key, body, opts, {
      send: async (source) => {
        const file = this.#bucket.file(key);
        // An empty stream cannot go through a chunked session: the client
        // would finalise it with `Content-Range: bytes 0--1/0`, which GCS
        // refuses as malformed (400). Zero bytes go as one simple upload,
        // under the same no-overwrite precondition.
        if (!(await hasData(source.stream))) {
          await file.save(Buffer.alloc(0), {
            resumable: false, timeout: this.timeoutMs, preconditionOpts: { ifGenerationMatch: 0 },
            ...(opts.contentType && { contentType: opts.contentType }), metadata: custom,
          });
          const created = file.metadata.generation;
          if (typeof created === 'string' || typeof created === 'number') generation = String(created);
          return;
        }
        // The session is opened here rather than by createWriteStream: the
        // client (7.x) drops authentication for sessions createWriteStream
        // opens against a non-Google apiEndpoint (it does not pass on
        // useAuthWithCustomEndpoint), while createResumableUpload honours it.
        // The data requests then go to the session URI, which is itself the
        // authorisation, as on GCS. The size is not declared: the session would
        // then wait for exactly that many bytes and a short stream would stall
        // it; the counter checks the size instead.
        // The precondition goes with the session's creation: the service
        // keeps it with the session and applies it when the object is created.
        // A resent final request of a finished session answers the object, not
        // 412, so a retry never takes our own object for another's. Should
        // the service refuse the session's creation already, that 412 maps to
        // `conflict` the same way.
        const [uri] = await file.createResumableUpload({
          metadata: { ...(opts.contentType ? { contentType: opts.contentType } : {}), ...custom },
          preconditionOpts: { ifGenerationMatch: 0 },
        });
        const sink = file.createWriteStream({ uri, resumable: true, chunkSize: this.chunkSize, validation: 'crc32c' });
        await pipeline(source.stream, sink);
        const created = file.metadata.generation;
        if (typeof created === 'string' || typeof created === 'number') generation = String(created);
      },
      // Only the generation this upload created: whatever else the key may
      // hold by then is not ours to delete.
      remove: () => this.#bucket.file(key).delete({ ignoreNotFound: true, ...(generation !== undefined ? { ifGenerationMatch: generation } : {}) }),
      mapError: (err) => mapGcsError(err, this.name),
    });
  }

  /** A V4 signed GET URL, signed locally with the service account's key (no request is made). */
  async presign(key: string, expiresSeconds: number): Promise<string> {
    assertValidKey(key);
    assertExpiry(expiresSeconds, this.name, MAX_SIGNED_URL_SECONDS);
    try {
      const [url] = await this.#bucket.file(key).getSignedUrl({ version: 'v4', action: 'read', expires: Date.now() + expiresSeconds * 1000 });
      return url;
    } catch (err) {
      throw mapGcsError(err, this.name);
    }
  }

  /** The object's size and job as stored (objects.get: size, metadata.mediajobs-job); undefined when nothing is there. */
  async stat(key: string): Promise<ObjectInfo | undefined> {
    assertValidKey(key);
    try {
      const [meta] = await this.#bucket.file(key).getMetadata();
      const jobId = meta.metadata?.[JOB_METADATA];
      return { size: Number(meta.size ?? 0), ...(typeof jobId === 'string' && { jobId }) };
    } catch (err) {
      // Here a 404 is the object's (mapGcsError takes every 404 for the bucket's, which uploads meet); a missing bucket answers the same.
      if (httpStatus((err ?? {}) as ErrorLike) === 404) return undefined;
      throw mapGcsError(err, this.name);
    }
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    try {
      await this.#bucket.file(key).delete({ ignoreNotFound: true });
    } catch (err) {
      throw mapGcsError(err, this.name);
    }
  }
}

/**
 * Whether the stream yields any data before it ends. The first chunk is
 * read and put back (unshift), so the stream still holds every byte.
 */
async function hasData(stream: Readable): Promise<boolean> {
  // Reading once starts the stream filling its buffer, so a failing source
  // can error before the upload pipes it. That error is not lost (the
  // counting source records it and pipeline() sees the stream errored); the
  // listener only keeps it from being an uncaught 'error' event meanwhile.
  stream.on('error', () => undefined);
  for (;;) {
    const chunk = stream.read() as Buffer | null;
    if (chunk !== null) {
      stream.unshift(chunk);
      return true;
    }
    if (stream.readableEnded) return false;
    await new Promise<void>((resolve, reject) => {
      const done = (err?: unknown) => {
        stream.off('readable', done).off('end', done).off('error', done);
        if (err instanceof Error) reject(err);
        else resolve();
      };
      stream.once('readable', done).once('end', done).once('error', done);
    });
  }
}
