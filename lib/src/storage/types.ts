// The contract every storage provider keeps (docs/design/spine.md, "Storage
// provider interface"), the one error type of the layer, and the object key
// layout shared by every provider so a job's file lands at the same key
// whichever backend stores it.
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';

export interface UploadOptions {
  contentType?: string;
  /** Expected byte count; when given, a stream of another length fails the upload instead of storing a truncated file. */
  size?: number;
  /**
   * The job the object belongs to, stored with it (JOB_METADATA) where the
   * operator reads it back (stat) before it signs, records, bills or deletes
   * what the job's runner reports (docs/adr/0012, "Users' destinations").
   */
  jobId?: string;
}

/**
 * The name of the entry naming an object's job, on every provider: S3's
 * `x-amz-meta-mediajobs-job`, OSS's `x-oss-meta-mediajobs-job`, GCS object
 * metadata, Drive appProperties; Azure Blob metadata names are C#
 * identifiers, so there it is `mediajobs_job` (BLOB_JOB_METADATA). Local
 * managed storage keeps it in an owner record beside the file (managed-local.ts).
 */
export const JOB_METADATA = 'mediajobs-job';

/** What stat() reads back: the object's size as stored, and the job its metadata names (none when it names none). */
export interface ObjectInfo {
  size: number;
  jobId?: string;
}

export interface UploadResult {
  key: string;
  /** Bytes actually stored (counted from the stream, not trusted from `size`). */
  size: number;
}

export interface StorageProvider {
  /** managed, s3, blob, gcs, oss, drive */
  readonly name: string;
  /** Upload and delete a small `verify_credentials.txt`; throws StorageError. */
  probe(): Promise<void>;
  /**
   * Stream `body` to `key`. On failure `body` is destroyed, so a producer
   * writing into it (ffmpeg) gets a closed pipe rather than blocking. An
   * existing key is never overwritten: the upload fails with `conflict`
   * (atomically where the service can check at creation: local link(2),
   * GCS ifGenerationMatch=0, Blob If-None-Match: *, OSS
   * x-oss-forbid-overwrite; by a lookup first on S3 and Drive, which leaves
   * a race window), and the caller picks another key.
   */
  upload(key: string, body: Readable, opts?: UploadOptions): Promise<UploadResult>;
  /** A URL anyone can GET until it expires; 24 h (86400 s) for job downloads. */
  presign(key: string, expiresSeconds: number): Promise<string>;
  /** Idempotent: deleting a missing key succeeds, as it does on S3. */
  delete(key: string): Promise<void>;
  /**
   * The object at `key` as the backend holds it (HEAD, get properties,
   * files.get): its size and the job its metadata names; undefined when
   * nothing is there. Absent on a runner's upload grant, which reads nothing.
   */
  stat?(key: string): Promise<ObjectInfo | undefined>;
  /**
   * Only providers that store on this machine's disk: an empty file for the
   * caller to fill itself, typically by giving its descriptor to a child
   * process as stdout, so the bytes never pass through this process.
   */
  stage?(): Promise<StagedFile>;
}

/** A file being written for a provider (StorageProvider.stage), not yet under any key. */
export interface StagedFile {
  /** Open for writing at offset 0; the writer must not close it. */
  readonly fd: number;
  /** Where it is on this machine, for a reader to check what was written before it is published. */
  readonly path: string;
  /**
   * Make what was written durable and visible under `key`, atomically. A
   * taken key fails with StorageError `conflict` and keeps the file staged,
   * so another key can be tried; after success the file is no longer staged.
   * `jobId` is recorded as the file's job, as an upload's (UploadOptions).
   */
  publish(key: string, opts?: Pick<UploadOptions, 'jobId'>): Promise<UploadResult>;
  /** Remove the staged file; idempotent, and a no-op once published. */
  discard(): Promise<void>;
}

/** Download URLs handed to clients are valid this long (spec: 24 hours). */
export const DOWNLOAD_URL_TTL_SECONDS = 86_400;

/** Name of the object the credential probe writes and removes (spec: POST /user/s3). */
export const PROBE_OBJECT_NAME = 'verify_credentials.txt';

export type StorageErrorCode =
  | 'unreachable' // network failure, timeout, 5xx: the backend could not be talked to
  | 'auth' // credentials rejected or lacking permission
  | 'not_found' // bucket/container (or object) does not exist
  | 'invalid_config' // the configuration or key cannot work, no network involved
  | 'conflict' // the key already holds another file; never overwritten
  | 'failed'; // anything else (I/O error, size mismatch, unknown backend error)

// Reasons travel into API responses (`Credential validation failed: <reason>`),
// so only short tokens such as `NoSuchBucket` or `ECONNREFUSED` pass; anything
// else could echo a host, a bucket or a credential from a backend message.
const SAFE_REASON = /^[A-Za-z0-9_.-]{1,64}$/;

/** `reason` if it is a short token, else `unknown`; use it before putting a reason into a message. */
export function safeReason(reason: string): string {
  return SAFE_REASON.test(reason) ? reason : 'unknown';
}

const STORAGE_ERROR_BRAND = Symbol.for('mediajobs.storage.StorageError');

/**
 * The one error type of the storage layer. `message` and `reason` are built
 * from fixed text and vetted tokens only, never from a backend's message, so
 * neither can carry a credential, a host or an endpoint into a log or a
 * response. The original error is deliberately not kept as `cause`: loggers
 * serialise causes, and SDK errors carry request details.
 */
export class StorageError extends Error {
  readonly code: StorageErrorCode;
  /** Short machine token for `Credential validation failed: <reason>`, e.g. `NoSuchBucket`. */
  readonly reason: string;
  readonly provider: string;
  /** HTTP status the backend answered with, when there was one. */
  readonly httpStatus?: number;

  constructor(code: StorageErrorCode, reason: string, message: string, opts: { provider?: string; httpStatus?: number } = {}) {
    super(message);
    this.name = 'StorageError';
    this.code = code;
    this.reason = safeReason(reason);
    this.provider = opts.provider ?? 'storage';
    if (opts.httpStatus !== undefined) this.httpStatus = opts.httpStatus;
  }

  /**
   * `instanceof StorageError` holds for a StorageError of any copy of this
   * module. A process can hold two: index.ts loads provider modules with
   * import(), and where the rest was loaded as CommonJS (mocha require()s
   * spec files, and tsx compiles what they import to CommonJS) that import()
   * loads ESM copies of the providers and of this file. Callers tell storage
   * errors apart with instanceof, so the check goes by a registry-wide
   * symbol rather than by which copy's prototype an error has. Subclasses,
   * if any, keep the ordinary check.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== StorageError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as { [STORAGE_ERROR_BRAND]?: unknown })[STORAGE_ERROR_BRAND] === true;
  }
}

// On the prototype, not the instances: nothing shows in util.inspect or a logger's output.
Object.defineProperty(StorageError.prototype, STORAGE_ERROR_BRAND, { value: true });

/**
 * (For providers.) Wrap an upload's source stream: counts its bytes, fails as soon as it
 * outgrows a declared size, and turns any error the source itself raises
 * into StorageError `failed`/`source_error`. That last part is why this is
 * an async iteration rather than a Transform in a pipeline: only errors
 * thrown while reading `body` come from the source, so a dying yt-dlp or
 * ffmpeg pipe (ECONNRESET, EPIPE) is never reported as an unreachable
 * backend, and a full disk never as a broken source. Destroying the returned
 * stream (a backend failed) ends the iteration, which destroys `body`.
 */
export function countingSource(
  body: Readable,
  provider: string,
  limit?: number,
): { stream: Readable; readonly bytes: number; readonly error: StorageError | undefined } {
  const state: { bytes: number; error: StorageError | undefined } = { bytes: 0, error: undefined };
  // Annotated so control-flow analysis knows a call never returns.
  const fail: (err: StorageError) => never = (err) => {
    state.error = err;
    throw err;
  };
  async function* read(): AsyncGenerator<Buffer> {
    const it = body[Symbol.asyncIterator]() as AsyncIterator<unknown>;
    try {
      for (;;) {
        let next: IteratorResult<unknown>;
        try {
          next = await it.next();
        } catch {
          // Only here does an error come from the source. An error thrown in
          // at `yield` below comes from the consumer (a client library
          // giving up) and must pass through unclassified.
          fail(new StorageError('failed', 'source_error', `${provider}: the stream being uploaded failed`, { provider }));
        }
        if (next.done) return;
        const chunk = next.value;
        const buf = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
        state.bytes += buf.length;
        if (limit !== undefined && state.bytes > limit) {
          fail(new StorageError('failed', 'size_mismatch', `${provider}: upload is larger than its declared size`, { provider }));
        }
        yield buf;
      }
    } finally {
      // Destroys the source when reading stops early; a no-op once it ended.
      await it.return?.();
    }
  }
  return {
    stream: Readable.from(read(), { objectMode: false }),
    get bytes() {
      return state.bytes;
    },
    /** What the source wrapper threw, if it did: the root cause even when a client library reports a later error. */
    get error() {
      return state.error;
    },
  };
}

export type CountedSource = ReturnType<typeof countingSource>;

/** A provider's part of streamUpload(). */
export interface UploadSteps {
  /** Send `source.stream` to the backend, under the key streamUpload() checked. */
  send(source: CountedSource): Promise<void>;
  /** Remove what send() stored. Run when the stream fell short of its declared size; absent when send() never completes a short upload. */
  remove?(): Promise<unknown>;
  /** The backend's error as a StorageError. */
  mapError(err: unknown): StorageError;
  /** Cleanup after a failure, once the source is destroyed (abort a multipart upload). */
  abandon?(): Promise<void>;
}

/**
 * (For providers.) The frame every streamed upload shares: count `body`
 * through countingSource (which fails it as soon as it outgrows a declared
 * size), send it, and when it fell short of the declared size remove what
 * was stored and fail with `size_mismatch`: a truncated file must not stay
 * under a job's key. On any failure the source is destroyed, so a producer
 * writing into it (ffmpeg) sees a closed pipe instead of blocking forever,
 * and the error is the source's own when it failed (the root cause, even
 * when a client library then reports something else), else the mapped one.
 */
export async function streamUpload(
  provider: string,
  key: string,
  body: Readable,
  opts: UploadOptions,
  steps: UploadSteps,
): Promise<UploadResult> {
  const source = countingSource(body, provider, opts.size);
  try {
    assertValidKey(key);
    await steps.send(source);
    if (opts.size !== undefined && source.bytes !== opts.size) {
      await steps.remove?.().catch(() => undefined);
      throw new StorageError('failed', 'size_mismatch', `${provider}: upload is smaller than its declared size`, { provider });
    }
    return { key, size: source.bytes };
  } catch (err) {
    // Judged before the streams are destroyed: a read still pending then fails too, and would pass
    // a storage outage off as a failure of the source.
    const failure = source.error ?? steps.mapError(err);
    if (!source.stream.destroyed) source.stream.destroy();
    if (!body.destroyed) body.destroy();
    await steps.abandon?.();
    throw failure;
  }
}

/** (For providers.) Refuse a URL lifetime that is not a whole number of seconds in 1..`maxSeconds` (`invalid_expiry`). */
export function assertExpiry(expiresSeconds: number, provider: string, maxSeconds?: number): void {
  if (Number.isInteger(expiresSeconds) && expiresSeconds > 0 && (maxSeconds === undefined || expiresSeconds <= maxSeconds)) return;
  const range = maxSeconds === undefined ? 'a positive number of seconds' : `1..${maxSeconds} seconds`;
  throw new StorageError('invalid_config', 'invalid_expiry', `${provider}: expiry must be ${range}`, { provider });
}

export function isStorageError(err: unknown): err is StorageError {
  return err instanceof StorageError;
}

/* ------------------------------------------------------------------ */
/* Object keys                                                          */
/* ------------------------------------------------------------------ */

/**
 * Object key layout, the same for every provider:
 *
 *   [<folder_prefix>/]<base_folder>/[<folder>/]<name>[-<suffix>].<ext>
 *
 * - folder_prefix: the destination's prefix (may hold several segments), absent when unset.
 *                  In managed storage, the job's API key's segment (managedKeyPrefix), so
 *                  keys of different API keys never collide; absent in keys stored before.
 * - base_folder:   the destination's base folder, default `videos`.
 * - folder:        the job's `folder` (may hold several segments), absent when unset.
 * - name:          the job's sanitised `filename`, else the job id (`fallback`).
 * - suffix:        the first 8 characters of the job id when a given filename
 *                  would collide with an existing object (spine.md).
 * - ext:           the container's extension, lower case, without the dot.
 *
 * Every segment is sanitised so the same key is valid on S3, Blob, GCS, OSS,
 * Drive and local filesystems (ext4, NTFS, APFS): see sanitizeSegment.
 * Segments are joined with `/`; no segment is empty, `.` or `..`, so a key can
 * never climb out of its prefix.
 */
export interface ObjectKeyInput {
  folderPrefix?: string | null;
  baseFolder?: string | null;
  folder?: string | null;
  /** The requested filename (without extension). */
  name?: string | null;
  /** Used when `name` is absent or sanitises to nothing; normally the job id. */
  fallback?: string;
  /** Appended as `-<suffix>` to dodge a collision; normally the job id's first 8 characters. */
  suffix?: string;
  ext: string;
}

/** What managedKeyPrefix() makes: `k` and 16 hex digits. */
export const MANAGED_KEY_PREFIX = /^k[0-9a-f]{16}$/;

/**
 * The folder_prefix of every managed-storage key of an API key's jobs
 * (media, subtitles, thumbnails). Managed storage is one namespace shared by
 * every key, and a taken key is dodged with `-<suffix>`: without a segment of
 * its own, a key would learn from that suffix that another key stored a file
 * of the same name. Derived from the key's id, which is no credential, and
 * hashed so a download URL does not show a database id; stable, so every
 * process computes it alike and nothing needs storing. 64 bits: two keys
 * sharing a segment would only share suffixes again, as before.
 */
export function managedKeyPrefix(apiKeyId: string): string {
  return `k${createHash('sha256').update(`mediajobs managed storage\n${apiKeyId}`).digest('hex').slice(0, 16)}`;
}

/** Object keys are at most 1024 bytes of UTF-8 on S3, GCS and OSS. */
export const MAX_KEY_BYTES = 1024;
/**
 * UTF-8 bytes of a requested filename. Filesystems (ext4, NTFS, APFS: the
 * local managed store, s3rver, a user's download) take 255 bytes per name,
 * and the runner adds to the name: `-<jobId 8>-<base36 time>` on a retried
 * taken key (18), `-<jobId 8>` on a taken sidecar (9), a subtitle's
 * `.<language>` (21) and `.<ext>` (11): 255 - 59. The API and the CRDs
 * refuse a longer name (job-options.ts, crd-source.ts), so an accepted
 * name is never shortened here.
 */
export const MAX_NAME_BYTES = 196;
/** Folder segments get a little more room since they carry no suffix or extension. */
const MAX_SEGMENT_BYTES = 240;

// Characters that break at least one target: control characters (C0, DEL, C1)
// and the Windows-forbidden set  < > : " / \ | ? *  plus those S3 documents as
// "characters to avoid" ( { } ^ % ` [ ] ~ # ) because they need special
// handling in URLs and some S3-compatible servers mishandle them.
const UNSAFE_CHARS = /[\u0000-\u001f\u007f-\u009f<>:"/\\|?*{}^%`[\]~#]+/g;
// Invisible format characters (zero-width, bidi overrides) make names that
// look identical but differ, and bidi overrides can disguise an extension.
const INVISIBLE_CHARS = /[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;
// Names Windows reserves for devices whatever the extension.
const WINDOWS_RESERVED = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$/i;

function truncateUtf8(s: string, maxBytes: number): string {
  if (Buffer.byteLength(s) <= maxBytes) return s;
  let out = '';
  let bytes = 0;
  for (const ch of s) {
    const b = Buffer.byteLength(ch);
    if (bytes + b > maxBytes) break;
    out += ch;
    bytes += b;
  }
  return out;
}

/**
 * Make one path segment safe for every provider and filesystem; returns ''
 * when nothing usable remains. Unicode letters are kept (titles in any
 * script are legitimate filenames); only characters that break a target go.
 */
export function sanitizeSegment(raw: string, maxBytes = MAX_SEGMENT_BYTES): string {
  // Whitespace first, so a tab or newline becomes a space rather than `_`.
  let s = raw.normalize('NFC').replace(INVISIBLE_CHARS, '').replace(/\s+/g, ' ').replace(UNSAFE_CHARS, '_');
  // Leading dots make hidden files (and `..`); trailing dots and spaces are
  // silently dropped by Windows, so two keys could map to one file.
  s = s.replace(/^[\s.]+/, '').replace(/[\s.]+$/, '');
  s = truncateUtf8(s, maxBytes).replace(/[\s.]+$/, '');
  if (WINDOWS_RESERVED.test(s)) s = `_${s}`;
  return s;
}

function sanitizePath(raw: string | null | undefined, what: string): string[] {
  if (raw === undefined || raw === null) return [];
  const segments: string[] = [];
  for (const part of raw.split(/[/\\]/)) {
    if (part.trim() === '') continue; // tolerate "a//b" and a trailing slash
    if (part === '..' || part === '.') {
      throw new StorageError('invalid_config', 'invalid_path', `${what} must not contain "." or ".." segments`);
    }
    const seg = sanitizeSegment(part);
    if (seg !== '') segments.push(seg);
  }
  return segments;
}

/** A destination's folder_prefix as objectKey() writes it ('' when unset). */
export function sanitizeKeyPrefix(folderPrefix: string | null | undefined): string {
  return sanitizePath(folderPrefix, 'folder_prefix').join('/');
}

/** Build the object key for a job's file; see the layout above. */
export function objectKey(input: ObjectKeyInput): string {
  const ext = input.ext.replace(/^\./, '').toLowerCase();
  if (!/^[a-z0-9]{1,10}$/.test(ext)) {
    throw new StorageError('invalid_config', 'invalid_extension', 'file extension must be 1-10 letters or digits');
  }
  const prefix = sanitizePath(input.folderPrefix, 'folder_prefix');
  const base = sanitizePath(input.baseFolder ?? 'videos', 'base_folder');
  if (base.length === 0) base.push('videos');
  const folder = sanitizePath(input.folder, 'folder');

  let name = input.name ? sanitizeSegment(input.name, MAX_NAME_BYTES) : '';
  // A name with no letter or digit left ("???" became "_") says nothing about
  // the file; the job id is the better name then.
  if (!/[\p{L}\p{N}]/u.test(name) && input.fallback) name = sanitizeSegment(input.fallback, MAX_NAME_BYTES);
  if (name === '') {
    throw new StorageError('invalid_config', 'invalid_filename', 'filename is empty after sanitisation and no fallback was given');
  }
  if (input.suffix) {
    const suffix = sanitizeSegment(input.suffix, 32);
    if (suffix !== '') name = `${name}-${suffix}`;
  }

  const key = [...prefix, ...base, ...folder, `${name}.${ext}`].join('/');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) {
    throw new StorageError('invalid_config', 'key_too_long', `object key exceeds ${MAX_KEY_BYTES} bytes`);
  }
  return key;
}

/** Who may have written a key (mayHaveWritten): a job, as its runner names its files. */
export interface KeyAuthor {
  /** The job id: the name when `filename` gives none, and its first 8 characters the taken-key suffix. */
  jobId: string;
  filename?: string | null;
  folder?: string | null;
  /**
   * The destination's key layout (destinationKeyLayout). Absent when it is
   * not known where the check is made: then any leading folders are taken
   * as the layout, and only the job's own part of the key is checked.
   */
  layout?: { folderPrefix?: string | null; baseFolder?: string | null };
}

/** Subtitle extensions a sidecar's key may carry a language tag before (runner-image/src/sidecars.ts). */
const TAGGED_SIDECAR_EXTS: ReadonlySet<string> = new Set(['vtt', 'srt', 'ttml', 'ass']);

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Whether `key` is one the job's runner may have written: objectKey() of
 * the job's filename (or its id) and folder under the destination's layout,
 * with any extension; or that with the taken-key suffix `-<jobId 8>` (and
 * the time-stamped `-<jobId 8>-<base36>` a retried attempt's taken key
 * gets: runner-image/src/destination.ts uploadJobFile); or a sidecar beside
 * either (the media's key without its extension, `-<jobId 8>` when taken,
 * `.<language>` for a subtitle, its extension: sidecars.ts). What a runner
 * reports (status.storedFiles, status.result's keys) is a claim: the
 * operator deletes, signs or records only a key this says yes to. Another
 * job of the same filename and folder names its first key alike: that the
 * rule cannot tell apart (the suffix of a taken key it can).
 */
export function mayHaveWritten(job: KeyAuthor, key: string): boolean {
  if (typeof key !== 'string' || typeof job.jobId !== 'string' || job.jobId.length < 8) return false;
  try {
    assertValidKey(key);
  } catch {
    return false;
  }
  let own: string;
  try {
    const input = { folder: job.folder, name: job.filename, fallback: job.jobId, ext: 'x' };
    own = job.layout
      ? objectKey({ ...input, folderPrefix: job.layout.folderPrefix, baseFolder: job.layout.baseFolder })
      : objectKey({ ...input, baseFolder: 'videos' }).slice('videos/'.length);
  } catch {
    return false;
  }
  const stem = escapeRegExp(own.slice(0, -'.x'.length));
  const id8 = escapeRegExp(sanitizeSegment(job.jobId.slice(0, 8), 32));
  // Leading folders of an unknown layout: at least the base folder (assertValidKey has refused '', '.', '..' and dot-led segments).
  const lead = job.layout ? '^' : '^(?:[^/]+/)+';
  const m = new RegExp(`${lead}${stem}(?:-${id8}(?:-[0-9a-z]{1,12})?)?(?:-${id8})?(?:\\.([A-Za-z0-9-]{1,20}))?\\.([a-z0-9]{1,10})$`, 'u').exec(key);
  if (!m) return false;
  // A language tag only before a subtitle's extension.
  return m[1] === undefined || TAGGED_SIDECAR_EXTS.has(m[2]!);
}

/**
 * Check a key handed to a provider (keys normally come from objectKey, but
 * the local provider and the gateway's /files route also see keys from URLs).
 * Refuses absolute keys, backslashes, empty, `.`/`..` and dot-leading
 * segments (dot-leading names are where the local provider keeps its
 * temporary files), control characters, and over-long keys.
 */
export function assertValidKey(key: string): void {
  const bad = (why: string): never => {
    throw new StorageError('invalid_config', 'invalid_key', `invalid object key: ${why}`);
  };
  if (typeof key !== 'string' || key.length === 0) bad('empty');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) bad(`longer than ${MAX_KEY_BYTES} bytes`);
  if (/[\u0000-\u001f\u007f]/.test(key)) bad('control character');
  if (key.includes('\\')) bad('backslash');
  if (key.startsWith('/')) bad('absolute');
  for (const seg of key.split('/')) {
    if (seg === '') bad('empty segment');
    if (seg === '.' || seg === '..') bad('relative segment');
    if (seg.startsWith('.')) bad('segment starts with a dot');
  }
}

/** Socket and TLS error codes that mean the service could not be reached (code `unreachable`). */
export const NETWORK_ERROR_CODES: ReadonlySet<string> = new Set([
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
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  // A backend that answers past its read budget (read-budget.ts) is as good as unreachable.
  'ERR_RESPONSE_TOO_LARGE',
  'ERR_READ_DEADLINE',
  // An endpoint the outbound-address policy refuses at connect time (outbound-agents.ts): unreachable for this service.
  'ERR_OUTBOUND_REFUSED',
]);

/** The fixed, credential-free text of each StorageError code. */
export const STORAGE_ERROR_TEXT: Readonly<Record<StorageErrorCode, string>> = {
  not_found: 'bucket or object not found',
  auth: 'credentials rejected',
  invalid_config: 'configuration rejected by the service',
  unreachable: 'service unreachable',
  conflict: 'object already exists',
  failed: 'request failed',
};
