// Alibaba Cloud OSS through the official `ali-oss` client: a user's `oss`
// destination (spec: POST /user/oss).
//
// Signatures are V4 (OSS4-HMAC-SHA256). ali-oss still defaults to V1, but
// OSS closed V1 to new accounts in March 2025 and to new buckets in
// September 2025, and V1 signed URLs would not be accepted there at all. V4
// needs the bucket's region, which the spec's fields do not carry: it is
// read from the standard endpoint (`oss-<region>[-internal].aliyuncs.com`)
// or given explicitly (`region`, ours, like `force_path_style` for s3).
import OSS from 'ali-oss';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  JOB_METADATA,
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
import { MultipartUpload, choosePartSize, type MultipartBackend } from './parts.js';
import type { BoundedAgents } from '../outbound-agents.js';

export interface OssStorageOptions {
  /** Reported in errors; default `oss`. */
  name?: string;
  /** `oss-cn-hangzhou.aliyuncs.com`, with or without `https://`; a bare host gets https. */
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  accessKeySecret: string;
  /** Region id such as `cn-hangzhou`; needed when it cannot be read from the endpoint (custom or accelerate endpoints). */
  region?: string;
  /** The destination's folder_prefix; the probe writes under it. */
  folderPrefix?: string;
  /** Multipart part size in bytes (>= 100 KiB); default 8 MiB, or 16 MiB when the size is unknown. */
  partSize?: number;
  /** Parts in flight at once; memory is bounded by about (parallel + 1) × partSize. Default 4. */
  parallel?: number;
  /** Limit for one request, in ms; default 120 s (a stalled backend must not hang a job). */
  timeoutMs?: number;
  /** Attempts per request when the failure is transient (network, 5xx); default 3. */
  maxAttempts?: number;
  /** The agents requests go through (a ReadBudget's, for a probe); default ali-oss's process-wide ones. */
  agents?: BoundedAgents;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const MIN_PART = 100 * KiB; // OSS's minimum for every part but the last
const DEFAULT_PART = 8 * MiB;
// Unknown length: 16 MiB × 10,000 parts allows ~156 GiB while 4 in flight
// (plus the one read ahead) keep the buffer near 80 MiB.
const UNKNOWN_SIZE_PART = 16 * MiB;
const MAX_PARTS = 10_000;
const MAX_PRESIGN_SECONDS = 604_800; // V4 signed URLs live at most 7 days

// OSS error codes (the XML <Code>) → our codes. Every credential or
// permission failure is reported with the reason `AccessDenied`, the one the
// spec names for POST /user/oss; the OSS code itself stays in the message.
const OSS_CODES: Record<string, [StorageErrorCode, string]> = {
  NoSuchBucket: ['not_found', 'NoSuchBucket'],
  NoSuchKey: ['not_found', 'NoSuchKey'],
  NoSuchUpload: ['failed', 'NoSuchUpload'],
  // 409 to a write sent with x-oss-forbid-overwrite: true (see upload()).
  FileAlreadyExists: ['conflict', 'KeyExists'],
  AccessDenied: ['auth', 'AccessDenied'],
  InvalidAccessKeyId: ['auth', 'AccessDenied'],
  SignatureDoesNotMatch: ['auth', 'AccessDenied'],
  SecurityTokenExpired: ['auth', 'AccessDenied'],
  InvalidSecurityToken: ['auth', 'AccessDenied'],
  UserDisable: ['auth', 'AccessDenied'],
  RequestTimeTooSkewed: ['failed', 'RequestTimeTooSkewed'],
  InvalidBucketName: ['invalid_config', 'InvalidBucketName'],
  InvalidObjectName: ['invalid_config', 'InvalidObjectName'],
  InvalidArgument: ['invalid_config', 'InvalidArgument'],
  InternalError: ['unreachable', 'InternalError'],
  ServiceUnavailable: ['unreachable', 'ServiceUnavailable'],
  RequestTimeout: ['unreachable', 'RequestTimeout'],
};

// Socket and DNS failures. urllib's error, as ali-oss rethrows it, keeps the
// errno only inside its message, so the token is picked out of the message
// (and nothing else of it is kept).
const NETWORK_ERRNO = /\b(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|ECONNABORTED|EPROTO|CERT_HAS_EXPIRED|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN)\b/;

interface AliOssError {
  name?: unknown;
  code?: unknown;
  status?: unknown;
  message?: unknown;
}

/**
 * Map an ali-oss or socket error to a StorageError. The message is built
 * from our text and the OSS code only: ali-oss messages can quote the
 * request URL (endpoint, bucket) and OSS error bodies the key id.
 */
export function mapOssError(err: unknown, provider = 'oss'): StorageError {
  if (err instanceof StorageError) return err;
  const e = (err ?? {}) as AliOssError;
  const status = typeof e.status === 'number' ? e.status : undefined;
  const ossCode = typeof e.code === 'string' ? e.code : undefined;
  const name = typeof e.name === 'string' ? e.name : '';
  const errno = typeof e.message === 'string' ? NETWORK_ERRNO.exec(e.message)?.[1] : undefined;

  let code: StorageErrorCode;
  let reason: string;
  let detail: string | undefined;
  if (ossCode && OSS_CODES[ossCode]) {
    [code, reason] = OSS_CODES[ossCode];
    detail = ossCode;
  } else if (status === -1 || status === -2 || errno || /Timeout/.test(name)) {
    // urllib reports -1 for a network error and -2 for a timeout.
    code = 'unreachable';
    reason = errno ?? (status === -2 || /Timeout/.test(name) ? 'timeout' : 'network_error');
  } else if (status !== undefined && status > 0) {
    code = status === 404 ? 'not_found' : status === 401 || status === 403 ? 'auth' : status >= 500 ? 'unreachable' : 'failed';
    reason = code === 'auth' ? 'AccessDenied' : ossCode && safeReason(ossCode) === ossCode ? ossCode : `HTTP${status}`;
    detail = ossCode;
  } else {
    code = 'failed';
    reason = 'unknown';
  }
  const shown = detail && safeReason(detail) === detail && detail !== reason ? `${reason}, ${detail}` : reason;
  const opts: { provider: string; httpStatus?: number } = { provider };
  if (status !== undefined && status > 0) opts.httpStatus = status;
  return new StorageError(code, reason, `${provider}: ${STORAGE_ERROR_TEXT[code]} (${shown})`, opts);
}

/** Worth another attempt: the network or the service failed, not the request. */
function transient(err: StorageError): boolean {
  return err.code === 'unreachable';
}

/** The region id of a standard OSS endpoint host, e.g. `oss-cn-hangzhou-internal.aliyuncs.com` → `cn-hangzhou`. */
export function ossRegionFromEndpoint(host: string): string | undefined {
  const m = /^oss-([a-z0-9-]+?)(?:-internal)?\.aliyuncs\.com$/.exec(host.toLowerCase());
  if (!m || m[1] === 'accelerate' || m[1] === 'accelerate-overseas') return undefined;
  return m[1];
}

export class OssStorageProvider implements StorageProvider {
  readonly name: string;
  readonly bucket: string;
  readonly region: string;
  private readonly folderPrefix: string;
  private readonly partSize: number | undefined;
  private readonly parallel: number;
  private readonly maxAttempts: number;
  // Private field: keeps the client, and the secret in its options, out of
  // JSON.stringify and util.inspect of the provider.
  readonly #client: OSS;

  constructor(opts: OssStorageOptions) {
    this.name = opts.name ?? 'oss';
    const fail = (reason: string, msg: string): never => {
      throw new StorageError('invalid_config', reason, `${this.name}: ${msg}`, { provider: this.name });
    };
    if (!opts.bucket) fail('missing_bucket', 'bucket is required');
    if (!opts.accessKeyId || !opts.accessKeySecret) fail('missing_credentials', 'access_key_id and access_key_secret are required');
    if (!opts.endpoint) fail('missing_endpoint', 'endpoint is required');
    let url: URL;
    try {
      url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(opts.endpoint) ? opts.endpoint : `https://${opts.endpoint}`);
    } catch {
      url = fail('invalid_endpoint', 'endpoint is not a valid URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') fail('invalid_endpoint', 'endpoint must be http or https');
    if (url.username || url.password) fail('invalid_endpoint', 'endpoint must not carry credentials');
    if (url.pathname !== '/' || url.search) fail('invalid_endpoint', 'endpoint must be a host, without a path');
    // A bucket host (`<bucket>.oss-…`) given as the endpoint would be prefixed with the bucket again.
    if (url.hostname.toLowerCase().startsWith(`${opts.bucket.toLowerCase()}.`)) {
      fail('invalid_endpoint', 'endpoint must be the region endpoint, not the bucket host');
    }
    const region = opts.region?.trim().replace(/^oss-/, '') || ossRegionFromEndpoint(url.hostname);
    if (!region) fail('region_required', 'region is required when the endpoint does not name it');
    if (!/^[a-z0-9-]{2,40}$/.test(region as string)) fail('invalid_region', 'region is not a region id');
    if (opts.partSize !== undefined && (!Number.isInteger(opts.partSize) || opts.partSize < MIN_PART)) {
      fail('invalid_part_size', 'part size must be at least 100 KiB');
    }

    this.bucket = opts.bucket;
    this.region = region as string;
    this.folderPrefix = sanitizeKeyPrefix(opts.folderPrefix);
    this.partSize = opts.partSize;
    this.parallel = Math.max(1, opts.parallel ?? 4);
    this.maxAttempts = Math.max(1, opts.maxAttempts ?? 3);
    let client: OSS;
    try {
      client = new OSS({
        endpoint: `${url.protocol}//${url.host}`,
        bucket: opts.bucket,
        accessKeyId: opts.accessKeyId,
        accessKeySecret: opts.accessKeySecret,
        region: `oss-${this.region}`,
        authorizationV4: true,
        secure: url.protocol === 'https:',
        timeout: opts.timeoutMs ?? 120_000,
        ...(opts.agents && { agent: opts.agents.http, httpsAgent: opts.agents.https }),
      });
    } catch {
      // ali-oss validates the bucket name and endpoint; its message would echo them.
      client = fail('invalid_bucket', 'bucket name or endpoint rejected');
    }
    this.#client = client;
  }

  /** Run `op`, again after a pause when it failed transiently; every failure comes out mapped. */
  async #attempt<T>(op: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await op();
      } catch (err) {
        const mapped = mapOssError(err, this.name);
        if (attempt >= this.maxAttempts || !transient(mapped)) throw mapped;
        await sleep(250 * 4 ** (attempt - 1));
      }
    }
  }

  /**
   * Put and delete `verify_credentials.txt` at the root of the folder
   * prefix, where RAM policies scoped to the prefix allow it (see s3.ts).
   */
  async probe(): Promise<void> {
    const key = this.folderPrefix ? `${this.folderPrefix}/${PROBE_OBJECT_NAME}` : PROBE_OBJECT_NAME;
    await this.#attempt(() => this.#client.put(key, Buffer.from('mediajobs storage probe\n'), { mime: 'text/plain' }));
    await this.#attempt(() => this.#client.delete(key));
  }

  /**
   * Stream `body` to the bucket: one PutObject when it fits one part,
   * otherwise a multipart upload driven here (parts.ts; ali-oss's own needs
   * a file or a whole Buffer) with `parallel` parts in flight, each held as
   * a Buffer so a failed part can be sent again. Memory stays bounded
   * whatever the file size; a failed multipart upload is aborted so no
   * orphaned parts are billed.
   *
   * An existing key is never overwritten: PutObject, InitiateMultipartUpload
   * and CompleteMultipartUpload carry `x-oss-forbid-overwrite: true`, and OSS
   * refuses a write to a taken key with 409 FileAlreadyExists (`conflict`),
   * checking as it creates the object: for a multipart upload that is the
   * Complete, so an object that appeared under the key meanwhile is kept too,
   * and the refused upload is aborted like any failed one. OSS ignores the
   * header on a bucket with versioning enabled or suspended: there the
   * earlier object becomes a previous version instead.
   */
  async upload(key: string, body: Readable, opts: UploadOptions = {}): Promise<UploadResult> {
    const client = this.#client;
    const attempt = <T>(op: () => Promise<T>) => this.#attempt(op);
    // The job the object belongs to as user metadata (x-oss-meta-mediajobs-job), which OSS keeps from the Put or the Initiate.
    const described = { ...(opts.contentType ? { mime: opts.contentType } : {}), ...(opts.jobId !== undefined && { meta: { [JOB_METADATA]: opts.jobId } as unknown as OSS.UserMeta }) };
    // A fresh object per request: ali-oss adds to the headers it is given.
    // A 409 after a retried request may be our own first attempt having
    // landed; it is reported as `conflict` all the same (another job's upload
    // of the same bytes would look no different), which costs an unreferenced
    // object, never an overwrite.
    const forbidOverwrite = () => ({ 'x-oss-forbid-overwrite': 'true' });
    const backend: MultipartBackend = {
      async putObject(buf) {
        await attempt(() => client.put(key, buf, { ...described, headers: forbidOverwrite() }));
      },
      async create() {
        return (await attempt(() => client.initMultipartUpload(key, { ...described, headers: forbidOverwrite() }))).uploadId;
      },
      async uploadPart(uploadId, partNo, buf) {
        return (await attempt(() => client.uploadPart(key, uploadId, partNo, buf, 0, buf.length))).etag;
      },
      async complete(uploadId, parts) {
        await attempt(() => client.completeMultipartUpload(key, uploadId, parts, { headers: forbidOverwrite() }));
      },
      abort: (uploadId) => client.abortMultipartUpload(key, uploadId),
    };
    const partSize = choosePartSize(opts.size, { fixed: this.partSize, preferred: DEFAULT_PART, unknownSize: UNKNOWN_SIZE_PART, maxParts: MAX_PARTS });
    const multipart = new MultipartUpload(backend, { provider: this.name, partSize, parallel: this.parallel, maxParts: MAX_PARTS });
    return streamUpload(this.name, key, body, opts, {
      send: (source) => multipart.send(source.stream),
      remove: () => client.delete(key),
      mapError: (err) => mapOssError(err, this.name),
      abandon: () => multipart.abandon(),
    });
  }

  /** A V4 signed GET URL (`x-oss-signature-version=OSS4-HMAC-SHA256`); only `host` is implied, so any HTTP client can use it. */
  async presign(key: string, expiresSeconds: number): Promise<string> {
    assertValidKey(key);
    assertExpiry(expiresSeconds, this.name, MAX_PRESIGN_SECONDS);
    try {
      return await this.#client.signatureUrlV4('GET', expiresSeconds, undefined, key);
    } catch (err) {
      throw mapOssError(err, this.name);
    }
  }

  /** The object's size and job as stored (HeadObject: Content-Length, x-oss-meta-mediajobs-job); undefined when nothing is there. */
  async stat(key: string): Promise<ObjectInfo | undefined> {
    assertValidKey(key);
    let head: { meta: Record<string, string> | null; res: { headers: Record<string, unknown> } };
    try {
      head = (await this.#attempt(() => this.#client.head(key))) as unknown as typeof head;
    } catch (err) {
      if (err instanceof StorageError && err.code === 'not_found' && err.reason === 'NoSuchKey') return undefined;
      // A HEAD answer has no body: a 404 without the code in x-oss-err is a missing key too, unless the bucket is.
      if (err instanceof StorageError && err.httpStatus === 404 && err.reason !== 'NoSuchBucket') return undefined;
      throw err;
    }
    const jobId = head.meta?.[JOB_METADATA];
    return { size: Number(head.res.headers['content-length'] ?? 0), ...(jobId !== undefined && { jobId }) };
  }

  /** Idempotent: OSS answers 204 for a missing key too. */
  async delete(key: string): Promise<void> {
    assertValidKey(key);
    await this.#attempt(() => this.#client.delete(key));
  }
}
