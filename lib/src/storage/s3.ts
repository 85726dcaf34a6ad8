// S3-compatible storage through the official AWS SDK v3: AWS itself, and the
// S3-compatible services users bring (R2, MinIO, Backblaze, Wasabi, ...) as
// well as s3rver in tests. Used for a user's `s3` destination and for
// managed storage in production.
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Readable } from 'node:stream';
import type { BoundedAgents } from '../outbound-agents.js';
import { MultipartUpload, S3_PARTS, choosePartSize, type CompletedPart, type MultipartBackend } from './parts.js';
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

export interface S3StorageOptions {
  /** Reported in errors: `s3` for a user's destination, `managed` for managed storage. */
  name?: string;
  /** Custom endpoint for S3-compatible services; absent means AWS. A bare host gets https://. */
  endpoint?: string;
  bucket: string;
  /** `auto` is accepted for services that use it (e.g. R2); it needs an endpoint. */
  region: string;
  /** Both or neither; neither means the SDK's default chain (env, IRSA, instance role). */
  accessKeyId?: string;
  secretAccessKey?: string;
  /** `bucket` in the path instead of the host name; most self-hosted services need it. */
  forcePathStyle?: boolean;
  /** The destination's folder_prefix; the probe writes under it (see probe()). */
  folderPrefix?: string;
  /** Multipart part size in bytes (>= 5 MiB); default 5 MiB (more for files over ~48 GiB), or 16 MiB when the size is unknown. */
  partSize?: number;
  /** Parts in flight at once; default 4. Part buffers take (queueSize + 1) × partSize: those in flight and the one being filled. */
  queueSize?: number;
  /** SDK attempts per request (first try included); default 3. */
  maxAttempts?: number;
  /** Give up connecting after this long; default 10 s, so a dead endpoint fails fast. */
  connectionTimeoutMs?: number;
  /** Give up on a connection idle this long mid-request; default 120 s (a stalled backend must not hang a job forever). */
  socketTimeoutMs?: number;
  /** The agents requests go through (a ReadBudget's, for a probe); default the SDK's. */
  agents?: BoundedAgents;
}

// S3's part sizes (parts.ts S3_PARTS), shared with the upload-grant provider,
// whose parts go to the same bucket.
const { min: MIN_PART, preferred: DEFAULT_PART, unknownSize: UNKNOWN_SIZE_PART, maxParts: MAX_PARTS } = S3_PARTS;
const MAX_PRESIGN_SECONDS = 604_800; // SigV4 presigned URLs live at most 7 days

// Service error names (the XML <Code>) → our codes. Anything unlisted falls
// back on the HTTP status (classify()).
const S3_CODES: Record<string, StorageErrorCode> = {
  NoSuchBucket: 'not_found',
  NoSuchKey: 'not_found',
  NotFound: 'not_found',
  AccessDenied: 'auth',
  InvalidAccessKeyId: 'auth',
  SignatureDoesNotMatch: 'auth',
  ExpiredToken: 'auth',
  InvalidToken: 'auth',
  TokenRefreshRequired: 'auth',
  AllAccessDisabled: 'auth',
  AccountProblem: 'auth',
  RequestTimeTooSkewed: 'auth',
  CredentialsProviderError: 'auth',
  InvalidBucketName: 'invalid_config',
  PermanentRedirect: 'invalid_config',
  AuthorizationHeaderMalformed: 'invalid_config',
  IllegalLocationConstraintException: 'invalid_config',
  InvalidRequest: 'invalid_config',
  InternalError: 'unreachable',
  ServiceUnavailable: 'unreachable',
  SlowDown: 'unreachable',
  RequestTimeout: 'unreachable',
  TimeoutError: 'unreachable',
};

// Node socket and DNS failures: the backend cannot be talked to at all.
interface ErrorLike {
  name?: unknown;
  code?: unknown;
  Code?: unknown;
  errors?: unknown;
  $metadata?: { httpStatusCode?: number };
}

/** The errno of a socket error, looking inside Node's AggregateError (IPv4+IPv6 attempts). */
function networkCode(e: ErrorLike): string | undefined {
  if (typeof e.code === 'string' && NETWORK_ERROR_CODES.has(e.code)) return e.code;
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors as ErrorLike[]) {
      if (inner && typeof inner.code === 'string' && NETWORK_ERROR_CODES.has(inner.code)) return inner.code;
    }
  }
  return undefined;
}

/**
 * Map an SDK or socket error to a StorageError. The reason is the service's
 * error code (`NoSuchBucket`) or the socket errno (`ECONNREFUSED`); the SDK's
 * own message is dropped, since it can name the endpoint, bucket or key id.
 */
export function mapS3Error(err: unknown, provider = 's3'): StorageError {
  if (err instanceof StorageError) return err;
  const e = (err ?? {}) as ErrorLike;
  const status = e.$metadata?.httpStatusCode;
  const net = networkCode(e);
  const name = typeof e.Code === 'string' ? e.Code : typeof e.name === 'string' ? e.name : undefined;

  let code: StorageErrorCode;
  let reason: string;
  if (net) {
    code = 'unreachable';
    reason = net;
  } else if (name && S3_CODES[name]) {
    code = S3_CODES[name];
    reason = name;
  } else if (name === 'AbortError') {
    code = 'failed';
    reason = 'aborted';
  } else if (status !== undefined) {
    code = status === 404 ? 'not_found' : status === 401 || status === 403 ? 'auth' : status >= 500 ? 'unreachable' : 'failed';
    reason = name && name !== 'Error' && name !== 'Unknown' && name !== 'UnknownError' ? name : `HTTP${status}`;
  } else {
    code = 'failed';
    reason = name && name !== 'Error' ? name : 'unknown';
  }
  reason = safeReason(reason);
  const opts: { provider: string; httpStatus?: number } = { provider };
  if (status !== undefined) opts.httpStatus = status;
  return new StorageError(code, reason, `${provider}: ${STORAGE_ERROR_TEXT[code]} (${reason})`, opts);
}

/** An upload's user metadata: the job it belongs to (x-amz-meta-mediajobs-job), when it names one. */
function jobMetadata(opts: UploadOptions): Record<string, string> | undefined {
  return opts.jobId === undefined ? undefined : { [JOB_METADATA]: opts.jobId };
}

function normaliseEndpoint(endpoint: string, provider: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint) ? endpoint : `https://${endpoint}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new StorageError('invalid_config', 'invalid_endpoint', `${provider}: endpoint is not a valid URL`, { provider });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new StorageError('invalid_config', 'invalid_endpoint', `${provider}: endpoint must be http or https`, { provider });
  }
  if (url.username || url.password) {
    throw new StorageError('invalid_config', 'invalid_endpoint', `${provider}: endpoint must not carry credentials`, { provider });
  }
  return url.toString().replace(/\/+$/, '');
}

export class S3StorageProvider implements StorageProvider {
  readonly name: string;
  readonly bucket: string;
  private readonly folderPrefix: string;
  private readonly partSize: number | undefined;
  private readonly queueSize: number;
  // Private field: keeps the client (and the credentials inside its config)
  // out of JSON.stringify and util.inspect of the provider.
  readonly #client: S3Client;

  constructor(opts: S3StorageOptions) {
    this.name = opts.name ?? 's3';
    const fail = (reason: string, msg: string): never => {
      throw new StorageError('invalid_config', reason, `${this.name}: ${msg}`, { provider: this.name });
    };
    if (!opts.bucket) fail('missing_bucket', 'bucket is required');
    if (!opts.region) fail('missing_region', 'region is required');
    if (Boolean(opts.accessKeyId) !== Boolean(opts.secretAccessKey)) {
      fail('incomplete_credentials', 'access key and secret key go together');
    }
    const endpoint = opts.endpoint ? normaliseEndpoint(opts.endpoint, this.name) : undefined;
    if (opts.region === 'auto' && !endpoint) fail('invalid_region', "region 'auto' needs an endpoint");
    if (opts.partSize !== undefined && (!Number.isInteger(opts.partSize) || opts.partSize < MIN_PART)) {
      fail('invalid_part_size', 'part size must be at least 5 MiB');
    }

    this.bucket = opts.bucket;
    // Sanitised exactly as objectKey() does, so the probe tests the prefix the jobs will write under.
    this.folderPrefix = sanitizeKeyPrefix(opts.folderPrefix);
    this.partSize = opts.partSize;
    this.queueSize = opts.queueSize ?? 4;

    const config: S3ClientConfig = {
      region: opts.region,
      forcePathStyle: opts.forcePathStyle ?? false,
      maxAttempts: opts.maxAttempts ?? 3,
      requestHandler: {
        connectionTimeout: opts.connectionTimeoutMs ?? 10_000,
        socketTimeout: opts.socketTimeoutMs ?? 120_000,
        ...(opts.agents && { httpAgent: opts.agents.http, httpsAgent: opts.agents.https }),
      },
      // Since 3.729 the SDK adds CRC32 checksums (and aws-chunked trailers on
      // streams) to every upload by default; many S3-compatible services and
      // s3rver reject or store those bodies verbatim. Checksums only where an
      // operation requires them keeps every backend working. The same default
      // also signs x-amz-checksum-mode into presigned GETs, which plain
      // browsers/curl do not send.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    };
    if (endpoint) config.endpoint = endpoint;
    if (opts.accessKeyId && opts.secretAccessKey) {
      config.credentials = { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey };
    }
    this.#client = new S3Client(config);
  }

  /**
   * Put and delete `verify_credentials.txt` at the root of the destination's
   * folder_prefix (the bucket root when there is none). Under the prefix
   * rather than the bucket root because credentials are often scoped by
   * policy to that prefix: probing the root would refuse keys that can write
   * everything the jobs will write.
   */
  async probe(): Promise<void> {
    const key = this.folderPrefix ? `${this.folderPrefix}/${PROBE_OBJECT_NAME}` : PROBE_OBJECT_NAME;
    try {
      await this.#client.send(
        new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: 'mediajobs storage probe\n', ContentType: 'text/plain' }),
      );
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      throw mapS3Error(err, this.name);
    }
  }

  /**
   * Stream `body` to the bucket: one PutObject when it fits one part,
   * otherwise a multipart upload driven here (parts.ts) with queueSize parts
   * in flight, so memory stays near (queueSize + 1) × partSize whatever the
   * file size. A failed multipart upload is aborted (no orphaned parts
   * billed). An existing key is never overwritten: the upload fails with
   * `conflict` (see refuseExisting). Why not @aws-sdk/lib-storage: see
   * docs/adr/0006-s3-multipart-upload-driven-here.md.
   */
  async upload(key: string, body: Readable, opts: UploadOptions = {}): Promise<UploadResult> {
    const { name } = this;
    const client = this.#client;
    const Bucket = this.bucket;
    const ContentType = opts.contentType;
    const Metadata = jobMetadata(opts);
    const backend: MultipartBackend = {
      // Buffers, not streams, as bodies: the SDK sends a Buffer with its
      // Content-Length and can send it again on a retry.
      async putObject(Body) {
        await client.send(new PutObjectCommand({ Bucket, Key: key, Body, ContentType, Metadata }));
      },
      async create() {
        const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket, Key: key, ContentType, Metadata }));
        if (!UploadId) throw new StorageError('failed', 'no_upload_id', `${name}: CreateMultipartUpload returned no upload id`, { provider: name });
        return UploadId;
      },
      async uploadPart(UploadId, PartNumber, Body) {
        const { ETag } = await client.send(new UploadPartCommand({ Bucket, Key: key, UploadId, PartNumber, Body }));
        if (!ETag) throw new StorageError('failed', 'no_etag', `${name}: UploadPart returned no ETag`, { provider: name });
        return ETag;
      },
      async complete(UploadId, parts) {
        await client.send(
          new CompleteMultipartUploadCommand({
            Bucket,
            Key: key,
            UploadId,
            MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.number, ETag: p.etag })) },
          }),
        );
      },
      abort: (UploadId) => client.send(new AbortMultipartUploadCommand({ Bucket, Key: key, UploadId })),
    };
    const partSize = choosePartSize(opts.size, { fixed: this.partSize, preferred: DEFAULT_PART, unknownSize: UNKNOWN_SIZE_PART, maxParts: MAX_PARTS });
    const multipart = new MultipartUpload(backend, { provider: this.name, partSize, parallel: this.queueSize, maxParts: MAX_PARTS });
    return streamUpload(this.name, key, body, opts, {
      send: async (source) => {
        await this.refuseExisting(key);
        await multipart.send(source.stream);
      },
      remove: () => client.send(new DeleteObjectCommand({ Bucket, Key: key })),
      mapError: (err) => mapS3Error(err, this.name),
      abandon: () => multipart.abandon(),
    });
  }

  /**
   * Fail with `conflict` before any byte is sent when the key already holds
   * an object. A HEAD rather than a conditional PutObject (If-None-Match: *):
   * not every S3-compatible service honours that header, and some refuse it.
   * A 403 passes: without s3:ListBucket AWS answers 403 for a missing key
   * too. Two uploads racing for one key between HEAD and PUT can both land
   * (the later wins); job keys are unique unless a filename is given.
   */
  private async refuseExisting(key: string): Promise<void> {
    try {
      await this.#client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      const mapped = mapS3Error(err, this.name);
      if (mapped.code === 'not_found' || mapped.code === 'auth') return;
      throw mapped;
    }
    throw new StorageError('conflict', 'KeyExists', `${this.name}: an object already exists at this key`, { provider: this.name });
  }

  async presign(key: string, expiresSeconds: number): Promise<string> {
    assertValidKey(key);
    assertExpiry(expiresSeconds, this.name, MAX_PRESIGN_SECONDS);
    try {
      return await getSignedUrl(this.#client, new GetObjectCommand({ Bucket: this.bucket, Key: key }), { expiresIn: expiresSeconds });
    } catch (err) {
      throw mapS3Error(err, this.name);
    }
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    try {
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      const mapped = mapS3Error(err, this.name);
      if (mapped.reason === 'NoSuchKey') return; // already gone: delete is idempotent
      throw mapped;
    }
  }

  /** The object's size and job as stored (HEAD: Content-Length, x-amz-meta-mediajobs-job); undefined when nothing is there. */
  async stat(key: string): Promise<ObjectInfo | undefined> {
    const head = await this.headObject(key);
    if (!head) return undefined;
    const jobId = head.metadata[JOB_METADATA];
    return { size: head.size, ...(jobId !== undefined && { jobId }) };
  }

  /*
   * Uploads brokered for another process (upload grants: the gateway, with
   * managed storage's credentials, for a runner that has none; see
   * upload-grants.ts and docs/adr/0012). Apart from upload(): the runner
   * sends the parts itself, to URLs signed here one part at a time.
   */

  /** The object's user metadata (x-amz-meta-*) and size, or undefined when nothing is stored at `key`. Other failures throw mapped. */
  async headObject(key: string): Promise<{ metadata: Record<string, string>; size: number } | undefined> {
    assertValidKey(key);
    try {
      const head = await this.#client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { metadata: head.Metadata ?? {}, size: head.ContentLength ?? 0 };
    } catch (err) {
      const mapped = mapS3Error(err, this.name);
      if (mapped.code === 'not_found') return undefined;
      throw mapped;
    }
  }

  /** Begin a multipart upload of `key` whose object will carry `metadata`; returns the upload id. */
  async createMultipartUpload(key: string, opts: { contentType?: string; metadata: Record<string, string> }): Promise<string> {
    assertValidKey(key);
    let UploadId: string | undefined;
    try {
      ({ UploadId } = await this.#client.send(
        new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key, ContentType: opts.contentType, Metadata: opts.metadata }),
      ));
    } catch (err) {
      throw mapS3Error(err, this.name);
    }
    if (!UploadId) throw new StorageError('failed', 'no_upload_id', `${this.name}: CreateMultipartUpload returned no upload id`, { provider: this.name });
    return UploadId;
  }

  /**
   * A URL the holder PUTs one part's bytes to, for `expiresSeconds`; the
   * answer's ETag header is the part's. `contentLength` is one of the signed
   * headers (X-Amz-SignedHeaders names content-length), so S3 refuses a body
   * of any other length (SignatureDoesNotMatch).
   */
  async presignUploadPart(key: string, uploadId: string, partNumber: number, expiresSeconds: number, contentLength: number): Promise<string> {
    assertValidKey(key);
    assertExpiry(expiresSeconds, this.name, MAX_PRESIGN_SECONDS);
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PARTS) {
      throw new StorageError('invalid_config', 'invalid_part_number', `${this.name}: part number must be 1..${MAX_PARTS}`, { provider: this.name });
    }
    try {
      return await getSignedUrl(
        this.#client,
        new UploadPartCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumber: partNumber, ContentLength: contentLength }),
        { expiresIn: expiresSeconds, signableHeaders: new Set(['content-length']) },
      );
    } catch (err) {
      throw mapS3Error(err, this.name);
    }
  }

  /** Join the parts (ascending) into the object. */
  async completeMultipartUpload(key: string, uploadId: string, parts: CompletedPart[]): Promise<void> {
    assertValidKey(key);
    try {
      await this.#client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: key,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.number, ETag: p.etag })) },
        }),
      );
    } catch (err) {
      throw mapS3Error(err, this.name);
    }
  }

  /** Discard an unfinished upload and its parts. */
  async abortMultipartUpload(key: string, uploadId: string): Promise<void> {
    assertValidKey(key);
    try {
      await this.#client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }));
    } catch (err) {
      throw mapS3Error(err, this.name);
    }
  }

  /** Close the client's sockets; the provider is unusable afterwards. */
  destroy(): void {
    this.#client.destroy();
  }
}
