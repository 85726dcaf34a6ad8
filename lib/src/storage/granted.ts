// Managed storage on S3 as a runner reaches it: through an upload grant
// (upload-grants.ts, docs/adr/0012), never with the bucket's credentials.
// The runner's destination.json names the gateway and a job-scoped token;
// every upload is a multipart upload whose begin, complete and abort are
// gateway calls, and whose parts the runner PUTs itself to URLs the gateway
// signs one part at a time, so the bytes never pass through the gateway.
// The multipart loop is the s3 provider's (parts.ts), with S3's part sizes.
// No SDK: requests are node's fetch.
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { MultipartUpload, S3_PARTS, abortPatiently, choosePartSize, type MultipartBackend } from './parts.js';
import {
  NETWORK_ERROR_CODES,
  STORAGE_ERROR_TEXT,
  StorageError,
  assertExpiry,
  assertValidKey,
  isStorageError,
  safeReason,
  streamUpload,
  type StorageErrorCode,
  type StorageProvider,
  type UploadOptions,
  type UploadResult,
} from './types.js';
import { UPLOAD_GRANT_PATH, type GrantOp } from './upload-grants.js';

export interface GrantedUploadOptions {
  /** Reported in errors; `managed`. */
  name?: string;
  /** The gateway's base URL (the operator's UPLOAD_GRANT_URL). */
  url: string;
  /** The job-scoped grant token. */
  token: string;
  /** Parts in flight at once; default 4, as the s3 provider. */
  parallel?: number;
  /** Attempts of a request that may be repeated (a part, abort, delete, check); default 3. */
  attempts?: number;
  /** Deadline of one gateway request; default 30 s. */
  requestTimeoutMs?: number;
  /** Deadline of one part's PUT; default 300 s (a 16 MiB part at ~0.5 Mbit/s). */
  partTimeoutMs?: number;
}

const CODES = new Set<string>(Object.keys(STORAGE_ERROR_TEXT));

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** The socket errno or undici's error code behind a failed fetch, if any. */
function networkCode(e: ErrorLike, depth = 0): string | undefined {
  if (depth > 3) return undefined;
  if (typeof e.code === 'string' && (NETWORK_ERROR_CODES.has(e.code) || e.code.startsWith('UND_ERR_'))) return e.code;
  const inner = [e.cause, ...(Array.isArray(e.errors) ? (e.errors as unknown[]) : [])];
  for (const x of inner) {
    const found = x && typeof x === 'object' ? networkCode(x as ErrorLike, depth + 1) : undefined;
    if (found) return found;
  }
  return undefined;
}

export class GrantedUploadProvider implements StorageProvider {
  readonly name: string;
  private readonly parallel: number;
  private readonly attempts: number;
  private readonly requestTimeoutMs: number;
  private readonly partTimeoutMs: number;
  // Private fields: the gateway's address and the token stay out of JSON.stringify and util.inspect.
  readonly #base: string;
  readonly #token: string;

  constructor(opts: GrantedUploadOptions) {
    this.name = opts.name ?? 'managed';
    let base: URL;
    try {
      base = new URL(opts.url);
    } catch {
      throw new StorageError('invalid_config', 'invalid_grant_url', `${this.name}: the upload grant's URL is not a URL`, { provider: this.name });
    }
    if (!opts.token) throw new StorageError('invalid_config', 'missing_grant_token', `${this.name}: the upload grant has no token`, { provider: this.name });
    this.#base = `${base.origin}${base.pathname.replace(/\/+$/, '')}${UPLOAD_GRANT_PATH}`;
    this.#token = opts.token;
    this.parallel = opts.parallel ?? 4;
    this.attempts = Math.max(1, opts.attempts ?? 3);
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.partTimeoutMs = opts.partTimeoutMs ?? 300_000;
  }

  /** Asks the gateway whether the grant works (token, job running); writes nothing. */
  async probe(): Promise<void> {
    await this.call('check', {}, true);
  }

  /**
   * Stream `body` to `key`: begin (the gateway refuses a taken key before
   * a byte is read, and creates the multipart upload), the parts, complete.
   * A stream that fits one part is that upload with its one part (S3 takes
   * a last part of any size), so there is one path. On failure the upload
   * is aborted.
   */
  async upload(key: string, body: Readable, opts: UploadOptions = {}): Promise<UploadResult> {
    const state: { upload?: string; completed: boolean } = { completed: false };
    const backend: MultipartBackend = {
      putObject: async (part) => backend.complete(state.upload!, [{ number: 1, etag: await backend.uploadPart(state.upload!, 1, part) }]),
      create: async () => state.upload!,
      uploadPart: (upload, number, part) => this.sendPart(key, upload, number, part),
      complete: async (upload, parts) => {
        await this.call('complete', { key, upload, parts }, false);
        state.completed = true;
      },
      // The begun upload is aborted below, whether MultipartUpload got to create() or not.
      abort: async () => undefined,
    };
    const partSize = choosePartSize(opts.size, { fixed: undefined, preferred: S3_PARTS.preferred, unknownSize: S3_PARTS.unknownSize, maxParts: S3_PARTS.maxParts });
    const multipart = new MultipartUpload(backend, { provider: this.name, partSize, parallel: this.parallel, maxParts: S3_PARTS.maxParts });
    return streamUpload(this.name, key, body, opts, {
      send: async (source) => {
        const begun = await this.call('begin', { key, ...(opts.contentType ? { contentType: opts.contentType } : {}) }, false);
        if (typeof begun?.upload !== 'string') throw this.error('failed', 'invalid_answer');
        state.upload = begun.upload;
        await multipart.send(source.stream);
      },
      remove: () => this.delete(key),
      mapError: (err) => (isStorageError(err) ? err : this.error('failed', 'unknown')),
      abandon: async () => {
        await multipart.abandon();
        const upload = state.upload;
        if (upload !== undefined && !state.completed) await abortPatiently(() => this.call('abort', { key, upload }, true));
      },
    });
  }

  /** A runner signs no download URLs: the gateway and the operator do. */
  async presign(key: string, expiresSeconds: number): Promise<string> {
    assertValidKey(key);
    assertExpiry(expiresSeconds, this.name);
    throw new StorageError('invalid_config', 'no_signing_key', `${this.name}: an upload grant cannot sign download URLs`, { provider: this.name });
  }

  /** Deletes an object this job's upload created (the gateway checks); a missing key succeeds. */
  async delete(key: string): Promise<void> {
    assertValidKey(key);
    await this.call('delete', { key }, true);
  }

  /** One part: its URL from the gateway, then the bytes straight to the bucket; both again on a transient failure. */
  private async sendPart(key: string, upload: string, partNumber: number, part: Buffer): Promise<string> {
    return this.retrying(true, async () => {
      // Not repeated by itself: this whole attempt is.
      // The URL signs the part's length: the gateway counts it against the grant's byte cap.
      const answer = await this.call('part', { key, upload, partNumber, size: part.length }, false);
      if (typeof answer?.url !== 'string') throw this.error('failed', 'invalid_answer');
      // A view of the part, not a copy (fetch takes Uint8Array over ArrayBuffer; a Buffer is one).
      const bytes = new Uint8Array(part.buffer as ArrayBuffer, part.byteOffset, part.length);
      const res = await this.fetch(answer.url, { method: 'PUT', body: bytes, signal: AbortSignal.timeout(this.partTimeoutMs) });
      const text = await res.text().catch(() => '');
      if (!res.ok) {
        // S3's XML error: its <Code> is the reason; the rest may name the bucket.
        const code = /<Code>([^<]{1,64})<\/Code>/.exec(text)?.[1] ?? `HTTP${res.status}`;
        throw this.error(res.status === 403 ? 'auth' : res.status === 404 ? 'not_found' : res.status >= 500 ? 'unreachable' : 'failed', code, res.status);
      }
      const etag = res.headers.get('etag');
      if (!etag) throw this.error('failed', 'no_etag');
      return etag;
    });
  }

  /** A grant request: the JSON answer, undefined for 204; a refusal as the StorageError the gateway named. */
  private async call(op: GrantOp, body: Record<string, unknown>, repeatable: boolean): Promise<Record<string, unknown> | undefined> {
    return this.retrying(repeatable, async () => {
      const res = await this.fetch(`${this.#base}/${op}`, {
        method: 'POST',
        headers: { 'authorization': `Bearer ${this.#token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
      const answer = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
      if (res.ok) return res.status === 204 ? undefined : answer;
      const code = typeof answer?.code === 'string' && CODES.has(answer.code) ? (answer.code as StorageErrorCode) : undefined;
      const reason = typeof answer?.reason === 'string' ? answer.reason : `HTTP${res.status}`;
      const byStatus: StorageErrorCode = res.status === 401 || res.status === 403 ? 'auth' : res.status === 409 ? 'conflict'
        : res.status === 404 ? 'not_found' : res.status >= 500 ? 'unreachable' : 'failed';
      throw this.error(code ?? byStatus, reason, res.status);
    });
  }

  /** fetch, with a failure to connect or a deadline as StorageError `unreachable` (the errno or TimeoutError as reason). */
  private async fetch(url: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(url, init);
    } catch (err) {
      const e = (err ?? {}) as ErrorLike;
      const timedOut = e.name === 'TimeoutError' || (e.cause as ErrorLike | undefined)?.name === 'TimeoutError';
      throw this.error('unreachable', timedOut ? 'TimeoutError' : (networkCode(e) ?? 'network_error'));
    }
  }

  /** `attempt` up to `attempts` times while it fails as unreachable, when it may be repeated. */
  private async retrying<T>(repeatable: boolean, attempt: () => Promise<T>): Promise<T> {
    for (let i = 1; ; i++) {
      try {
        return await attempt();
      } catch (err) {
        if (!repeatable || i >= this.attempts || !isStorageError(err) || err.code !== 'unreachable') throw err;
        await sleep(200 * 2 ** (i - 1));
      }
    }
  }

  private error(code: StorageErrorCode, reason: string, httpStatus?: number): StorageError {
    const r = safeReason(reason);
    return new StorageError(code, r, `${this.name}: ${STORAGE_ERROR_TEXT[code]} (${r})`, {
      provider: this.name, ...(httpStatus !== undefined ? { httpStatus } : {}),
    });
  }
}
