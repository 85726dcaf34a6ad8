// Azure Blob Storage through the official SDK (@azure/storage-blob) with a
// storage account's shared key: Azure itself, sovereign clouds (an
// `endpoint` such as https://<account>.blob.core.chinacloudapi.cn) and
// emulators (Azurite, whose endpoint carries the account in its path:
// http://127.0.0.1:10000/devstoreaccount1).
import {
  BlobSASPermissions,
  BlobServiceClient,
  SASProtocol,
  StorageSharedKeyCredential,
  generateBlobSASQueryParameters,
  newPipeline,
  type ContainerClient,
  type RequestPolicyFactory,
} from '@azure/storage-blob';
import type { Readable } from 'node:stream';
import {
  JOB_METADATA,
  NETWORK_ERROR_CODES,
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
import type { BoundedAgents } from '../outbound-agents.js';

export interface BlobStorageOptions {
  /** Reported in errors; `blob` by default. */
  name?: string;
  /** Storage account name: 3-24 lower-case letters and digits. */
  accountName: string;
  /** The account's shared key (Base64), as the portal shows it. */
  accountKey: string;
  container: string;
  /**
   * Blob service URL; absent means https://<account>.blob.core.windows.net.
   * Taken as the service root: Azurite's includes the account
   * (http://127.0.0.1:10000/devstoreaccount1). A bare host gets https://.
   */
  endpoint?: string;
  /** The destination's folder_prefix; the probe writes under it (see probe()). */
  folderPrefix?: string;
  /** Block size in bytes; default 4 MiB (raised when the declared size needs more than 50,000 blocks), 8 MiB when the size is unknown. */
  blockSize?: number;
  /** Blocks in flight at once; memory is bounded by about concurrency × blockSize. Default 4. */
  concurrency?: number;
  /** Attempts per request, first try included; default 3. */
  maxTries?: number;
  /** Give up on one attempt (one block, the probe's put) after this long; default 300 s (8 MiB at under 30 kB/s). */
  tryTimeoutMs?: number;
  /** First retry delay; default 500 ms, doubling up to 10 s. */
  retryDelayMs?: number;
  /** The agents requests go through (a ReadBudget's, for a probe); default the SDK's. */
  agents?: BoundedAgents;
}

/** JOB_METADATA as Blob metadata may name it: names are C# identifiers, so no hyphen (x-ms-meta-mediajobs_job). */
export const BLOB_JOB_METADATA = JOB_METADATA.replace(/-/g, '_');

const MiB = 1024 * 1024;
// 4 MiB blocks (rclone's default too) keep the buffers at 16 MiB with 4 in
// flight; measured against Azurite they upload as fast as 8 MiB ones (lib/bench).
const DEFAULT_BLOCK = 4 * MiB;
// A stream of unknown length may need up to 50,000 blocks: 8 MiB allows ~390 GiB.
const UNKNOWN_SIZE_BLOCK = 8 * MiB;
const MAX_BLOCKS = 50_000; // committed blocks per blob
const MAX_BLOCK = 4000 * MiB; // largest block Put Block accepts (service version 2019-12-12 and later)
const MAX_SAS_SECONDS = 7 * 86_400; // our cap, matching S3 and GCS signed URLs; Azure itself has none for shared-key SAS

// x-ms-error-code values (Blob service error codes) → our codes. Anything
// unlisted falls back on the HTTP status.
const BLOB_CODES: Record<string, StorageErrorCode> = {
  AuthenticationFailed: 'auth',
  AuthorizationFailure: 'auth',
  AuthorizationPermissionMismatch: 'auth',
  AuthorizationProtocolMismatch: 'auth',
  AuthorizationResourceTypeMismatch: 'auth',
  AuthorizationServiceMismatch: 'auth',
  AuthorizationSourceIPMismatch: 'auth',
  InsufficientAccountPermissions: 'auth',
  InvalidAuthenticationInfo: 'auth',
  KeyBasedAuthenticationNotPermitted: 'auth',
  AccountIsDisabled: 'auth',
  // Put Block List with If-None-Match: * on a blob that exists (see upload()).
  BlobAlreadyExists: 'conflict',
  ContainerNotFound: 'not_found',
  ContainerBeingDeleted: 'not_found',
  ContainerDisabled: 'not_found',
  BlobNotFound: 'not_found',
  ResourceNotFound: 'not_found',
  AccountNotFound: 'not_found',
  InvalidResourceName: 'invalid_config',
  InvalidUri: 'invalid_config',
  InvalidQueryParameterValue: 'invalid_config',
  InvalidHeaderValue: 'invalid_config',
  UnsupportedHeader: 'invalid_config',
  InvalidBlobOrBlock: 'failed',
  InternalError: 'unreachable',
  ServerBusy: 'unreachable',
  OperationTimedOut: 'unreachable',
};

// Node socket, DNS and TLS failures: the service cannot be talked to at all.
const HUMAN: Record<StorageErrorCode, string> = {
  not_found: 'container or blob not found',
  auth: 'credentials rejected',
  invalid_config: 'configuration rejected by the service',
  unreachable: 'service unreachable',
  conflict: 'blob already exists',
  failed: 'request failed',
};

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  statusCode?: unknown;
  details?: { errorCode?: unknown };
  cause?: unknown;
  errors?: unknown;
}

/** The errno of a socket error, wherever core-rest-pipeline or Node put it (code, cause, AggregateError). */
function networkCode(e: ErrorLike, depth = 0): string | undefined {
  if (depth > 3) return undefined;
  if (typeof e.code === 'string' && NETWORK_ERROR_CODES.has(e.code)) return e.code;
  if (e.cause && typeof e.cause === 'object') {
    const inner = networkCode(e.cause as ErrorLike, depth + 1);
    if (inner) return inner;
  }
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors as ErrorLike[]) {
      const found = inner && typeof inner === 'object' ? networkCode(inner, depth + 1) : undefined;
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * Map an SDK or socket error to a StorageError. The reason is the service's
 * error code (`AuthenticationFailed`, `ContainerNotFound`) or the socket
 * errno; the SDK's message is dropped, since it quotes the request URL (and
 * with it the account and, for SAS requests, the signature).
 */
export function mapBlobError(err: unknown, provider = 'blob'): StorageError {
  if (err instanceof StorageError) return err;
  const e = (err ?? {}) as ErrorLike;
  const status = typeof e.statusCode === 'number' ? e.statusCode : undefined;
  // RestError.code holds x-ms-error-code for service errors; details.errorCode is the same from the XML body.
  const serviceCode =
    typeof e.details?.errorCode === 'string' ? e.details.errorCode : typeof e.code === 'string' && status !== undefined ? e.code : undefined;
  const net = networkCode(e);

  let code: StorageErrorCode;
  let reason: string;
  if (net) {
    code = 'unreachable';
    reason = net;
  } else if (serviceCode && BLOB_CODES[serviceCode]) {
    code = BLOB_CODES[serviceCode];
    reason = serviceCode;
  } else if (e.name === 'AbortError') {
    // No caller-supplied abort signal exists here: an abort is the per-try deadline (tryTimeoutPolicy).
    code = 'unreachable';
    reason = 'timeout';
  } else if (status !== undefined) {
    code = status === 404 ? 'not_found' : status === 401 || status === 403 ? 'auth' : status >= 500 ? 'unreachable' : 'failed';
    reason = serviceCode ?? `HTTP${status}`;
  } else if (e.name === 'RestError' && e.code === 'REQUEST_SEND_ERROR') {
    // core-rest-pipeline's wrapper for a request that never got an answer.
    code = 'unreachable';
    reason = 'REQUEST_SEND_ERROR';
  } else {
    code = 'failed';
    reason = typeof e.name === 'string' && e.name !== 'Error' ? e.name : 'unknown';
  }
  reason = safeReason(reason);
  const opts: { provider: string; httpStatus?: number } = { provider };
  if (status !== undefined) opts.httpStatus = status;
  return new StorageError(code, reason, `${provider}: ${HUMAN[code]} (${reason})`, opts);
}

function serviceUrl(opts: BlobStorageOptions, provider: string): string {
  if (!opts.endpoint) return `https://${opts.accountName}.blob.core.windows.net`;
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(opts.endpoint) ? opts.endpoint : `https://${opts.endpoint}`;
  const bad = (msg: string): never => {
    throw new StorageError('invalid_config', 'invalid_endpoint', `${provider}: endpoint ${msg}`, { provider });
  };
  let url: URL | undefined;
  try {
    url = new URL(withScheme);
  } catch {
    bad('is not a valid URL');
  }
  const u = url as URL;
  if (u.protocol !== 'https:' && u.protocol !== 'http:') bad('must be http or https');
  if (u.username || u.password) bad('must not carry credentials');
  // A SAS token in the endpoint would be a secret in a field we treat as public.
  if (u.search || u.hash) bad('must not carry a query or fragment');
  return `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
}

export class BlobStorageProvider implements StorageProvider {
  readonly name: string;
  readonly accountName: string;
  readonly container: string;
  /** The blob service URL requests go to (no credentials in it). */
  readonly url: string;
  private readonly folderPrefix: string;
  private readonly blockSize: number | undefined;
  private readonly concurrency: number;
  // Private fields: keep the key (inside the credential and the pipeline)
  // out of JSON.stringify and util.inspect of the provider.
  readonly #credential: StorageSharedKeyCredential;
  readonly #container: ContainerClient;

  constructor(opts: BlobStorageOptions) {
    this.name = opts.name ?? 'blob';
    const fail = (reason: string, msg: string): never => {
      throw new StorageError('invalid_config', reason, `${this.name}: ${msg}`, { provider: this.name });
    };
    if (!opts.accountName) fail('missing_account_name', 'account_name is required');
    if (!/^[a-z0-9]{3,24}$/.test(opts.accountName)) fail('invalid_account_name', 'account_name must be 3-24 lower-case letters or digits');
    if (!opts.container) fail('missing_container', 'container is required');
    if (!opts.accountKey) fail('missing_account_key', 'account_key is required');
    // Shared keys are Base64; anything else can only fail later with a confusing signature error.
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(opts.accountKey.trim())) fail('invalid_account_key', 'account_key must be Base64');
    if (opts.blockSize !== undefined && (!Number.isInteger(opts.blockSize) || opts.blockSize < 1 || opts.blockSize > MAX_BLOCK)) {
      fail('invalid_block_size', 'block size must be 1 byte to 4000 MiB');
    }
    if (opts.concurrency !== undefined && (!Number.isInteger(opts.concurrency) || opts.concurrency < 1)) {
      fail('invalid_concurrency', 'concurrency must be a positive integer');
    }

    this.accountName = opts.accountName;
    this.container = opts.container;
    this.url = serviceUrl(opts, this.name);
    this.folderPrefix = sanitizeKeyPrefix(opts.folderPrefix);
    this.blockSize = opts.blockSize;
    this.concurrency = opts.concurrency ?? 4;
    this.#credential = new StorageSharedKeyCredential(opts.accountName, opts.accountKey.trim());
    const pipeline = newPipeline(this.#credential, {
      retryOptions: { maxTries: opts.maxTries ?? 3, retryDelayInMs: opts.retryDelayMs ?? 500, maxRetryDelayInMs: 10_000 },
    });
    // Added to the pipeline newPipeline made (which carries the credential), not to a copy.
    pipeline.factories.push(tryTimeoutPolicy(opts.tryTimeoutMs ?? 300_000));
    if (opts.agents) pipeline.factories.push(agentPolicy(opts.agents));
    this.#container = new BlobServiceClient(this.url, pipeline).getContainerClient(opts.container);
  }

  /**
   * Put and delete `verify_credentials.txt` at the root of the destination's
   * folder_prefix (the container root when there is none): credentials may
   * be scoped to that prefix, and it is where the jobs will write.
   */
  async probe(): Promise<void> {
    const key = this.folderPrefix ? `${this.folderPrefix}/${PROBE_OBJECT_NAME}` : PROBE_OBJECT_NAME;
    const blob = this.#container.getBlockBlobClient(key);
    const body = 'mediajobs storage probe\n';
    try {
      await blob.upload(body, Buffer.byteLength(body), { blobHTTPHeaders: { blobContentType: 'text/plain' } });
      await blob.delete();
    } catch (err) {
      throw mapBlobError(err, this.name);
    }
  }

  /**
   * Stream `body` into a block blob: blocks of blockSize are staged
   * `concurrency` at a time and committed at the end, so memory stays near
   * concurrency × blockSize whatever the file size, and nothing is visible
   * under the key until the commit. Blocks of a failed upload are never
   * committed; Azure discards uncommitted blocks after a week.
   *
   * An existing blob is never overwritten: the commit carries
   * If-None-Match: *, so the service itself refuses it (409
   * BlobAlreadyExists, mapped to `conflict`) in the same step that would
   * replace the blob, and two uploads racing for one key cannot both land.
   * The refusal comes only at the commit, after every block was sent (Put
   * Block takes no such condition); the refused blocks stay uncommitted
   * against the existing blob, which they leave untouched, until Azure
   * discards them. One cost of the atomic check: a commit the SDK retries
   * after its first attempt landed unseen (a lost response) is refused by
   * our own blob, so the caller moves to another key and this copy stays
   * behind, a stray file rather than a lost one.
   */
  async upload(key: string, body: Readable, opts: UploadOptions = {}): Promise<UploadResult> {
    return streamUpload(this.name, key, body, opts, {
      send: async (source) => {
        const blockSize = this.blockSize ?? planBlockSize(opts.size);
        await this.#container.getBlockBlobClient(key).uploadStream(source.stream, blockSize, this.concurrency, {
          ...(opts.contentType ? { blobHTTPHeaders: { blobContentType: opts.contentType } } : {}),
          ...(opts.jobId !== undefined && { metadata: { [BLOB_JOB_METADATA]: opts.jobId } }),
          // uploadStream sends these conditions as headers only with Put Block List (Put Block reads just a lease id from them).
          conditions: { ifNoneMatch: '*' },
        });
      },
      remove: () => this.#container.getBlockBlobClient(key).deleteIfExists(),
      mapError: (err) => mapBlobError(err, this.name),
    });
  }

  /**
   * A service SAS URL granting read on this one blob until it expires. Signed
   * locally with the shared key (no request is made); HTTPS-only unless the
   * endpoint itself is plain HTTP (an emulator).
   */
  async presign(key: string, expiresSeconds: number): Promise<string> {
    assertValidKey(key);
    assertExpiry(expiresSeconds, this.name, MAX_SAS_SECONDS);
    const blob = this.#container.getBlockBlobClient(key);
    const sas = generateBlobSASQueryParameters(
      {
        containerName: this.container,
        blobName: key,
        permissions: BlobSASPermissions.parse('r'),
        // No start time: a start taken from our clock would make the URL
        // fail on a service whose clock runs a little behind.
        expiresOn: new Date(Date.now() + expiresSeconds * 1000),
        protocol: this.url.startsWith('https:') ? SASProtocol.Https : SASProtocol.HttpsAndHttp,
      },
      this.#credential,
    );
    return `${blob.url}?${sas.toString()}`;
  }

  /** The blob's size and job as stored (Get Blob Properties: Content-Length, x-ms-meta-mediajobs_job); undefined when nothing is there. */
  async stat(key: string): Promise<ObjectInfo | undefined> {
    assertValidKey(key);
    try {
      const props = await this.#container.getBlockBlobClient(key).getProperties();
      const jobId = props.metadata?.[BLOB_JOB_METADATA];
      return { size: props.contentLength ?? 0, ...(jobId !== undefined && { jobId }) };
    } catch (err) {
      const mapped = mapBlobError(err, this.name);
      // A HEAD answer has no body: BlobNotFound comes as the header, else as a bare 404, which a missing container answers with ContainerNotFound.
      if (mapped.code === 'not_found' && mapped.reason !== 'ContainerNotFound') return undefined;
      throw mapped;
    }
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    try {
      // deleteIfExists swallows BlobNotFound only; a missing container still fails.
      await this.#container.getBlockBlobClient(key).deleteIfExists();
    } catch (err) {
      throw mapBlobError(err, this.name);
    }
  }
}

/**
 * Sets a client-side deadline on every HTTP attempt. The SDK's own
 * `tryTimeoutInMs` only asks the service to give up (a `timeout` query
 * parameter), so a server that accepts the connection and never answers
 * would hang an upload forever; the HTTP client aborts a request whose
 * `timeout` passes.
 */
function tryTimeoutPolicy(ms: number): RequestPolicyFactory {
  return {
    create: (next) => ({
      sendRequest: (request) => {
        request.timeout = ms;
        return next.sendRequest(request);
      },
    }),
  };
}

/** Sends every attempt through the given agents: the HTTP client takes a request's own agent over its cached ones. */
function agentPolicy(agents: BoundedAgents): RequestPolicyFactory {
  return {
    create: (next) => ({
      sendRequest: (request) => {
        request.agent = request.url.startsWith('https:') ? agents.https : agents.http;
        return next.sendRequest(request);
      },
    }),
  };
}

/** 4 MiB blocks, or larger (whole MiB) when a declared size would need more than 50,000 of them. */
function planBlockSize(size: number | undefined): number {
  if (size === undefined) return UNKNOWN_SIZE_BLOCK;
  return Math.min(MAX_BLOCK, Math.max(DEFAULT_BLOCK, Math.ceil(size / MAX_BLOCKS / MiB) * MiB));
}
