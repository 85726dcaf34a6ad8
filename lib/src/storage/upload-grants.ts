// Upload grants: how a runner writes to managed storage on S3 without
// holding its credentials (docs/adr/0012-runner-upload-grants.md). This
// module owns the grant's wire format on both ends: the job-scoped token the
// operator mints into the runner's Secret, the requests a runner sends the
// gateway (granted.ts is that client), and the gateway's side of them
// (UploadGrantBroker), which checks the token, the job and the key and then
// makes the bucket calls with managed storage's credentials. HTTP is left to
// the gateway's router (api-gateway/src/routes/upload-grants.ts); the jobs
// table to the lookup the broker is given (GrantJobLookup).
//
// No provider SDK is imported here (the operator mints tokens; the runner
// reads the paths): the bucket is reached through GrantStore, which
// S3StorageProvider implements.
import { createHash, createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { TERMINAL_STATUSES, type JobStatus } from '../mediajob/types.js';
import { SecretBox } from '../secret-box.js';
import type { CompletedPart } from './parts.js';
import { S3_PARTS } from './parts.js';
import { JOB_METADATA, MANAGED_KEY_PREFIX, StorageError, assertValidKey, isStorageError, type StorageErrorCode } from './types.js';

/** Where the gateway answers grant requests; each operation is `POST <path>/<op>` with a JSON body. */
export const UPLOAD_GRANT_PATH = '/internal/upload-grants';

/** The operations, each a POST: `check` (the grant works), `begin`, `part`, `complete`, `abort` an upload, `delete` an object. */
export const GRANT_OPS = ['check', 'begin', 'part', 'complete', 'abort', 'delete'] as const;
export type GrantOp = (typeof GRANT_OPS)[number];

/** The user metadata (x-amz-meta-mediajobs-job) naming the job whose upload created an object: delete checks it. */
export { JOB_METADATA };

/** How long a part's upload URL is valid: one part's PUT, retries included, with room for a slow link. */
export const PART_URL_SECONDS = 900;

/**
 * How long after a job ended without delivering (cancelled, failed) its
 * grant still answers `abort` and `delete`: the runner cleans up when its pod
 * is stopped, which follows the row's end by well under a second, or by a
 * status report when the cancel notice was lost.
 */
export const CLEANUP_SECONDS = 600;

/** Objects one grant (one runner attempt) may begin: the media file and its two sidecars, subtitles and thumbnail. */
export const GRANT_MAX_OBJECTS = 3;

/**
 * Room for the sidecars above the media's cap: a thumbnail and a subtitle
 * file are well under a MiB each; this leaves a wide margin.
 */
export const GRANT_SIDECAR_BYTES = 32 * 1024 * 1024;

/** The reservation a job row takes at insert (migration 0010), for a job whose row says none. */
export const DEFAULT_RESERVED_BYTES = 512 * 1024 * 1024;

/** URLs one part may be signed for: the runner sends a part again after a failure (3 tries), with room to spare. */
export const GRANT_PART_SIGNINGS = 8;

/** S3's largest part (5 GiB): a part URL signs its length, which must be one S3 takes. */
export const MAX_PART_BYTES = 5 * 1024 ** 3;

/** HKDF label of the grant key: a key of its own, never SECRET_KEYS' AES key itself. */
const GRANT_KEY_LABEL = 'mediajobs upload grant';

const JOB_ID = /^[A-Za-z0-9-]{1,64}$/;

/* ------------------------------------------------------------------ */
/* Tokens                                                               */
/* ------------------------------------------------------------------ */

/**
 * Why a token was refused; `expired` is said only of a token that was
 * genuine. `prefix`: the managed key prefix (managedKeyPrefix) of the job's
 * API key, absent in a token minted without one (before keys had one).
 */
export type TokenCheck =
  | { ok: true; jobId: string; expiresAt: number; kid: string; prefix?: string }
  | { ok: false; why: 'missing' | 'malformed' | 'forged' | 'expired' };

/**
 * The grant keys, derived from SECRET_KEYS (which the gateway and the
 * operator both hold): one per key id, so a token minted before a key
 * rotation still verifies while its key is listed. Tokens are
 * `<jobId>.<expires unix s>.<kid>[.<prefix>].<base64url HMAC-SHA256 of what precedes>`;
 * the MAC key is HKDF-SHA256 of the key with the label above. The prefix
 * names where the job's keys are (`<prefix>/videos/`); a token without one
 * grants `videos/`, as every token did before keys had a prefix.
 */
export class UploadGrantKeys {
  // Private fields: the keys stay out of JSON.stringify and util.inspect.
  readonly #keys = new Map<string, Buffer>();
  readonly #current: string;

  /** `secretKeys`: the SECRET_KEYS spec; SecretBox's rules (and errors) apply. The first key mints. */
  constructor(secretKeys: string) {
    new SecretBox(secretKeys); // validates the spec with the box's own messages
    const entries = secretKeys.split(',').map((s) => s.trim()).filter(Boolean);
    for (const entry of entries) {
      const at = entry.indexOf(':');
      const key = Buffer.from(entry.slice(at + 1), 'base64');
      this.#keys.set(entry.slice(0, at), Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), GRANT_KEY_LABEL, 32)));
    }
    this.#current = entries[0]!.slice(0, entries[0]!.indexOf(':'));
  }

  /** A token for `jobId` valid until `expiresAt` (unix seconds), for keys under `prefix` (managedKeyPrefix) when given. */
  mint(jobId: string, expiresAt: number, prefix?: string): string {
    if (!JOB_ID.test(jobId)) throw new Error('upload grant: a job id is letters, digits and dashes');
    if (!Number.isSafeInteger(expiresAt) || expiresAt <= 0) throw new Error('upload grant: expiry must be unix seconds');
    if (prefix !== undefined && !MANAGED_KEY_PREFIX.test(prefix)) throw new Error('upload grant: a key prefix is what managedKeyPrefix makes');
    const claims = [jobId, expiresAt, this.#current, ...(prefix !== undefined ? [prefix] : [])].join('.');
    return `${claims}.${this.#mac(this.#current, claims)}`;
  }

  /** Check a token: constant-time MAC comparison, then the expiry against `nowMs`. */
  verify(token: string | undefined, nowMs: number = Date.now()): TokenCheck {
    if (!token) return { ok: false, why: 'missing' };
    const parts = token.split('.');
    if (parts.length !== 4 && parts.length !== 5) return { ok: false, why: 'malformed' };
    const [jobId, expires, kid] = parts as [string, string, string];
    const prefix = parts.length === 5 ? parts[3]! : undefined;
    const mac = parts.at(-1)!;
    if (!JOB_ID.test(jobId) || !/^\d{1,12}$/.test(expires) || !/^[A-Za-z0-9_-]{43}$/.test(mac)) return { ok: false, why: 'malformed' };
    if (prefix !== undefined && !MANAGED_KEY_PREFIX.test(prefix)) return { ok: false, why: 'malformed' };
    if (!this.#keys.has(kid) || !this.#same(this.#mac(kid, parts.slice(0, -1).join('.')), mac)) return { ok: false, why: 'forged' };
    const expiresAt = Number(expires);
    if (nowMs >= expiresAt * 1000) return { ok: false, why: 'expired' };
    return { ok: true, jobId, expiresAt, kid, ...(prefix !== undefined ? { prefix } : {}) };
  }

  /**
   * An upload id as the runner holds it: bound to the job and the key it
   * was begun for, so a runner can send parts, complete or abort only an
   * upload its own `begin` returned, whatever upload ids it learns.
   */
  sealUpload(kid: string, jobId: string, key: string, uploadId: string): string {
    const id = Buffer.from(uploadId).toString('base64url');
    return `${id}.${this.#mac(kid, `upload\n${jobId}\n${key}\n${uploadId}`)}`;
  }

  /** The upload id inside a sealed one, or undefined when it was not sealed for this job and key. */
  openUpload(kid: string, jobId: string, key: string, sealed: string): string | undefined {
    const [id, mac, extra] = sealed.split('.');
    if (!id || !mac || extra !== undefined || !/^[A-Za-z0-9_-]+$/.test(id) || !this.#keys.has(kid)) return undefined;
    const uploadId = Buffer.from(id, 'base64url').toString();
    return this.#same(this.#mac(kid, `upload\n${jobId}\n${key}\n${uploadId}`), mac) ? uploadId : undefined;
  }

  #mac(kid: string, text: string): string {
    return createHmac('sha256', this.#keys.get(kid)!).update(text).digest('base64url');
  }

  #same(expected: string, given: string): boolean {
    const a = Buffer.from(expected);
    const b = Buffer.from(given);
    return a.length === b.length && timingSafeEqual(a, b);
  }
}

/* ------------------------------------------------------------------ */
/* Answers                                                              */
/* ------------------------------------------------------------------ */

/**
 * A refusal or failure as the gateway answers it: HTTP status, `{error}`
 * with fixed words, and the StorageError code and reason the runner raises
 * for it (granted.ts), so its classification (storage_unreachable, a taken
 * key tried again under another name) works as with any provider.
 */
export class GrantError extends Error {
  constructor(readonly status: number, readonly code: StorageErrorCode, readonly reason: string, message: string) {
    super(message);
    this.name = 'GrantError';
  }
}

const STORAGE_STATUS: Record<StorageErrorCode, number> = {
  conflict: 409,
  not_found: 404,
  invalid_config: 400,
  // The bucket refusing managed storage's own credentials, or out of reach: the gateway's failure, not the runner's.
  auth: 502,
  unreachable: 502,
  failed: 502,
};

/** Any error of a grant request as its answer; anything but a GrantError or StorageError is a 500. */
export function grantErrorOf(err: unknown): GrantError {
  if (err instanceof GrantError) return err;
  if (isStorageError(err)) {
    const status = STORAGE_STATUS[err.code];
    return new GrantError(status, err.code, err.reason, status === 502 ? 'Managed storage failed' : err.code === 'conflict' ? 'An object already exists at this key' : err.code === 'not_found' ? 'No such object or upload' : 'Invalid object key');
  }
  return new GrantError(500, 'failed', 'internal_error', 'Internal server error');
}

const refused = (status: number, reason: string, message: string) => new GrantError(status, 'auth', reason, message);

const TOKEN_ANSWERS: Record<Exclude<TokenCheck, { ok: true }>['why'], GrantError> = {
  missing: refused(401, 'grant_missing', 'Missing upload grant'),
  malformed: refused(401, 'grant_invalid', 'Invalid upload grant'),
  forged: refused(401, 'grant_invalid', 'Invalid upload grant'),
  expired: refused(401, 'grant_expired', 'Upload grant has expired'),
};

/* ------------------------------------------------------------------ */
/* The gateway's side                                                   */
/* ------------------------------------------------------------------ */

/** The bucket calls the broker makes (S3StorageProvider's brokered-upload methods). Errors are StorageErrors. */
export interface GrantStore {
  headObject(key: string): Promise<{ metadata: Record<string, string>; size: number } | undefined>;
  createMultipartUpload(key: string, opts: { contentType?: string; metadata: Record<string, string> }): Promise<string>;
  /** The URL signs `contentLength`: S3 refuses a body of another length. */
  presignUploadPart(key: string, uploadId: string, partNumber: number, expiresSeconds: number, contentLength: number): Promise<string>;
  completeMultipartUpload(key: string, uploadId: string, parts: CompletedPart[]): Promise<void>;
  abortMultipartUpload(key: string, uploadId: string): Promise<void>;
  delete(key: string): Promise<void>;
}

/**
 * A grant's job as its row says: the status, and when it ended (ms since
 * the epoch; null while it runs, or unknown); for its byte cap
 * (grantByteCap), its file-size limit (options.limits.maxFilesizeBytes) and
 * its storage reservation (jobs.reserved_bytes), when the row has them.
 */
export interface GrantJob {
  status: JobStatus | string;
  finishedAt: number | null;
  maxFilesizeBytes?: number | null;
  reservedBytes?: number | null;
}

/**
 * The bytes one grant may have part URLs signed for and store: the job's
 * file-size limit, else its storage reservation (what its runner expects
 * to deliver, at least 1 MiB, or the 512 MiB taken at insert), plus room
 * for the sidecars. A live recording of unknown size is bounded by the
 * reservation too (docs/adr/0012, "Bounds").
 */
export function grantByteCap(job: GrantJob): number {
  const media = job.maxFilesizeBytes ?? job.reservedBytes ?? DEFAULT_RESERVED_BYTES;
  return media + GRANT_SIDECAR_BYTES;
}

/** One grant: its job, and its own id (the token's SHA-256, never the token). */
export interface GrantRef {
  grantId: string;
  jobId: string;
}

/** What the ledger refuses: another object, more bytes, more parts (or a part signed too often), an upload it does not know. */
export type LedgerRefusal = 'objects' | 'bytes' | 'parts' | 'upload';

/** An object as the ledger knows it: the job whose grant last completed it, and its size as stored. */
export interface StoredObject {
  jobId: string;
  size: number;
}

/**
 * The broker's record of what each grant did (grant-ledger.ts is it on
 * Postgres): bounds a grant, and tells the operator which job stored a key
 * and how big it is.
 */
export interface GrantLedger {
  /** Record an object begun, unless the grant has `maxObjects` already: its row id, or the refusal. */
  reserveObject(g: GrantRef, key: string, maxObjects: number): Promise<number | LedgerRefusal>;
  /** The reserved object's upload id, once the bucket gave one. */
  begun(id: number, uploadId: string): Promise<void>;
  /** A reservation whose upload the bucket never began. */
  release(id: number): Promise<void>;
  /** Record a part URL signed for `bytes`, unless it takes the grant past a cap. */
  signPart(g: GrantRef, uploadId: string, number: number, bytes: number, caps: { bytes: number; parts: number; signings: number }): Promise<LedgerRefusal | undefined>;
  /** Bytes the grant's completed objects hold, as stored. */
  storedBytes(g: GrantRef): Promise<number>;
  completed(g: GrantRef, uploadId: string, size: number): Promise<void>;
  ended(g: GrantRef, uploadId: string, state: 'aborted' | 'deleted'): Promise<void>;
  /** The job's object at `key` was deleted through its grant. */
  deleted(jobId: string, key: string): Promise<void>;
  /** For each key the ledger has an object at, who stored it and its size. */
  storedBy(keys: readonly string[]): Promise<Map<string, StoredObject>>;
  /** Delete up to `limit` objects' rows (their parts with them) of jobs that ended over `keepSeconds` ago; how many went. */
  forgetEnded(keepSeconds: number, limit: number): Promise<number>;
}

/**
 * How long the ledger keeps what an ended job's grants did. The grant
 * answers nothing after CLEANUP_SECONDS; the operator reads the rows to
 * accept a completion, and once the job's row recorded it, that record
 * answers (operator/src/stored-files.ts checkedResult). A day leaves room
 * for an operator that was down when the job ended.
 */
export const LEDGER_KEEP_SECONDS = 86_400;

/** The broker sweeps ended jobs' rows at most this often, LEDGER_SWEEP_ROWS at a time, so the ledger's size follows the jobs running, not history. */
export const LEDGER_SWEEP_SECONDS = 600;
export const LEDGER_SWEEP_ROWS = 1000;

/** The broker's view of the jobs table: undefined for a job without a row. */
export type GrantJobLookup = (jobId: string) => Promise<GrantJob | undefined>;

/** The operations that only remove what the job's own uploads made. */
const CLEANUP_OPS: ReadonlySet<GrantOp> = new Set(['abort', 'delete']);

/**
 * Whether a grant's job lets `op` through at `nowMs`. While the job runs,
 * every operation. Once it ended without delivering (cancelled, failed, ...)
 * only the cleanup, for `cleanupMs` after its end: its runner removes the
 * partial upload and what it stored when it is stopped, which follows the
 * row's end. Nothing once Completed: the files are the user's.
 */
export function grantAnswers(op: GrantOp, job: GrantJob | undefined, nowMs: number, cleanupMs: number): boolean {
  if (job === undefined) return false;
  if (!TERMINAL_STATUSES.includes(job.status as JobStatus)) return true;
  if (!CLEANUP_OPS.has(op) || job.status === 'Completed' || job.finishedAt === null) return false;
  return nowMs < job.finishedAt + cleanupMs;
}

export interface UploadGrantBrokerOptions {
  store: GrantStore;
  keys: UploadGrantKeys;
  /** The grant's job (grantAnswers decides with it). */
  jobs: GrantJobLookup;
  /** What each grant did: its bounds, and the operator's record of who stored what. */
  ledger: GrantLedger;
  /**
   * Managed storage's base folder as every granted key has it, after the
   * token's key prefix when it names one (destinationKeyLayout). Default `videos/`.
   */
  keyPrefix?: string;
  /** Lifetime of a part's URL; default PART_URL_SECONDS. */
  partUrlSeconds?: number;
  /** How long after its end a job's cleanup is answered; default CLEANUP_SECONDS. */
  cleanupSeconds?: number;
  /** The clock; default Date.now. */
  now?: () => number;
}

const key = z.string().min(1).max(1024);
const upload = z.string().min(1).max(4096);
const BODIES = {
  check: z.object({}),
  begin: z.object({ key, contentType: z.string().max(255).regex(/^[\x21-\x7e][\x20-\x7e]*$/).optional() }),
  part: z.object({ key, upload, partNumber: z.number().int().min(1).max(S3_PARTS.maxParts), size: z.number().int().min(0).max(MAX_PART_BYTES) }),
  complete: z.object({
    key, upload,
    parts: z.array(z.object({ number: z.number().int().min(1).max(S3_PARTS.maxParts), etag: z.string().min(1).max(256) })).min(1).max(S3_PARTS.maxParts),
  }),
  abort: z.object({ key, upload }),
  delete: z.object({ key }),
} as const satisfies Record<GrantOp, z.ZodType>;

/**
 * The gateway's side of a grant: every request names its token; the job
 * must still be running (or, for the cleanup, have ended a moment ago:
 * grantAnswers), the key must be under the token's part of managed storage,
 * and an upload id must be one this job's `begin` sealed. Objects are created only
 * where none is (HEAD before begin and again before complete: a lookup, as
 * the s3 provider's refuseExisting, with its race window), carry the job
 * id in their metadata, and only an object carrying this job's id is
 * deleted.
 */
export class UploadGrantBroker {
  readonly #o: Required<UploadGrantBrokerOptions>;
  /** When this broker last swept the ledger (ms; #sweep). */
  #swept = Number.NEGATIVE_INFINITY;

  constructor(opts: UploadGrantBrokerOptions) {
    this.#o = { keyPrefix: 'videos/', partUrlSeconds: PART_URL_SECONDS, cleanupSeconds: CLEANUP_SECONDS, now: Date.now, ...opts };
  }

  /** Answer one request: the value to send as JSON, or undefined for 204. Throws GrantError or StorageError (grantErrorOf). */
  async handle(op: string, token: string | undefined, body: unknown): Promise<Record<string, unknown> | undefined> {
    if (!(GRANT_OPS as readonly string[]).includes(op)) throw new GrantError(404, 'failed', 'unknown_operation', 'Not found');
    const now = this.#o.now();
    this.#sweep(now);
    const checked = this.#o.keys.verify(token, now);
    if (!checked.ok) throw TOKEN_ANSWERS[checked.why];
    const parsed = BODIES[op as GrantOp].safeParse(body ?? {});
    if (!parsed.success) throw new GrantError(400, 'invalid_config', 'invalid_request', 'Invalid upload grant request');
    const job = await this.#o.jobs(checked.jobId);
    if (!grantAnswers(op as GrantOp, job, now, this.#o.cleanupSeconds * 1000)) throw refused(403, 'job_not_running', 'The job is not running');
    const req = parsed.data as Record<string, unknown>;
    if (typeof req.key === 'string') this.#checkKey(req.key, checked.prefix);
    const grant: Grant = { jobId: checked.jobId, kid: checked.kid, grantId: grantIdOf(token!) };
    switch (op as GrantOp) {
      case 'check': return undefined;
      case 'begin': return this.#begin(grant, req as z.infer<typeof BODIES.begin>);
      case 'part': return this.#part(grant, job!, req as z.infer<typeof BODIES.part>);
      case 'complete': return this.#complete(grant, job!, req as z.infer<typeof BODIES.complete>);
      case 'abort': return this.#abort(grant, req as z.infer<typeof BODIES.abort>);
      case 'delete': return this.#delete(grant, req as z.infer<typeof BODIES.delete>);
    }
  }

  /** The key is valid and in the token's part of managed storage: under `<prefix>/videos/`, or `videos/` for a token without a prefix. */
  /**
   * The ledger's tables are the broker's (one owner): it deletes ended
   * jobs' rows itself, beside a request and never in its way, at most every
   * LEDGER_SWEEP_SECONDS. A sweep that fails is tried again by the next
   * one; nothing depends on it but the tables' size.
   */
  #sweep(now: number): void {
    if (now - this.#swept < LEDGER_SWEEP_SECONDS * 1000) return;
    this.#swept = now;
    this.#o.ledger.forgetEnded(LEDGER_KEEP_SECONDS, LEDGER_SWEEP_ROWS).catch(() => undefined);
  }

  #checkKey(k: string, prefix: string | undefined): void {
    assertValidKey(k); // StorageError invalid_config → 400
    const under = prefix === undefined ? this.#o.keyPrefix : `${prefix}/${this.#o.keyPrefix}`;
    if (!k.startsWith(under)) throw refused(403, 'key_outside_layout', 'The key is outside managed storage');
  }

  async #refuseExisting(k: string): Promise<void> {
    let found: { metadata: Record<string, string> } | undefined;
    try {
      found = await this.#o.store.headObject(k);
    } catch (err) {
      // As refuseExisting in s3.ts: without s3:ListBucket a missing key answers 403.
      if (isStorageError(err) && err.code === 'auth') return;
      throw err;
    }
    if (found) throw new StorageError('conflict', 'KeyExists', 'managed: an object already exists at this key', { provider: 'managed' });
  }

  #uploadId(grant: Grant, k: string, sealed: string): string {
    const id = this.#o.keys.openUpload(grant.kid, grant.jobId, k, sealed);
    if (id === undefined) throw refused(403, 'upload_not_granted', 'The upload was not begun by this job');
    return id;
  }

  /** A taken key is refused before anything is counted (the runner tries another name); then the object counts, begun or not. */
  async #begin(grant: Grant, req: z.infer<typeof BODIES.begin>): Promise<Record<string, unknown>> {
    await this.#refuseExisting(req.key);
    const reserved = await this.#o.ledger.reserveObject(grant, req.key, GRANT_MAX_OBJECTS);
    if (typeof reserved !== 'number') throw OVER_CAP[reserved]();
    let id: string;
    try {
      id = await this.#o.store.createMultipartUpload(req.key, {
        ...(req.contentType ? { contentType: req.contentType } : {}),
        metadata: { [JOB_METADATA]: grant.jobId },
      });
    } catch (err) {
      await this.#o.ledger.release(reserved);
      throw err;
    }
    await this.#o.ledger.begun(reserved, id);
    return { upload: this.#o.keys.sealUpload(grant.kid, grant.jobId, req.key, id) };
  }

  /** A part's URL signs the length the runner declared; the ledger counts it against the grant's caps first. */
  async #part(grant: Grant, job: GrantJob, req: z.infer<typeof BODIES.part>): Promise<Record<string, unknown>> {
    const id = this.#uploadId(grant, req.key, req.upload);
    const caps = { bytes: grantByteCap(job), parts: S3_PARTS.maxParts, signings: GRANT_PART_SIGNINGS };
    const refusal = await this.#o.ledger.signPart(grant, id, req.partNumber, req.size, caps);
    if (refusal) throw OVER_CAP[refusal]();
    return { url: await this.#o.store.presignUploadPart(req.key, id, req.partNumber, this.#o.partUrlSeconds, req.size) };
  }

  /**
   * Complete, then read the object's size as stored: a bucket that does not
   * check a signed length (s3rver checks no V4 signature) may hold more than
   * was signed, so an object past the grant's byte cap is deleted again and
   * refused. What is recorded is the stored size, never the runner's word.
   */
  async #complete(grant: Grant, job: GrantJob, req: z.infer<typeof BODIES.complete>): Promise<undefined> {
    const id = this.#uploadId(grant, req.key, req.upload);
    const numbers = req.parts.map((p) => p.number);
    if (numbers.some((n, i) => i > 0 && n <= numbers[i - 1]!)) throw new GrantError(400, 'invalid_config', 'invalid_request', 'Invalid upload grant request');
    // Again: an object stored under the key since begin (another job's) is kept, never replaced.
    await this.#refuseExisting(req.key);
    await this.#o.store.completeMultipartUpload(req.key, id, req.parts);
    const stored = await this.#o.store.headObject(req.key);
    if (!stored) throw new StorageError('failed', 'not_stored', 'managed: the completed object is not there', { provider: 'managed' });
    if ((await this.#o.ledger.storedBytes(grant)) + stored.size > grantByteCap(job)) {
      await this.#o.store.delete(req.key);
      await this.#o.ledger.ended(grant, id, 'deleted');
      throw OVER_CAP.bytes();
    }
    await this.#o.ledger.completed(grant, id, stored.size);
    return undefined;
  }

  async #abort(grant: Grant, req: z.infer<typeof BODIES.abort>): Promise<undefined> {
    const id = this.#uploadId(grant, req.key, req.upload);
    await this.#o.store.abortMultipartUpload(req.key, id);
    await this.#o.ledger.ended(grant, id, 'aborted');
    return undefined;
  }

  async #delete(grant: Grant, req: z.infer<typeof BODIES.delete>): Promise<undefined> {
    const found = await this.#o.store.headObject(req.key);
    if (!found) return undefined; // already gone: delete is idempotent
    if (found.metadata[JOB_METADATA] !== grant.jobId) throw refused(403, 'not_this_jobs_object', 'The object was not stored by this job');
    await this.#o.store.delete(req.key);
    await this.#o.ledger.deleted(grant.jobId, req.key);
    return undefined;
  }
}

interface Grant extends GrantRef {
  kid: string;
}

/** A grant's id in the ledger: the token's SHA-256, so the ledger holds nothing that opens anything. */
export function grantIdOf(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * A grant past a cap: a refusal the runner raises as StorageError `failed`
 * (its job fails upload_failed), not a crash and not a reason to try the
 * upload again under another name.
 */
const OVER_CAP: Record<LedgerRefusal, () => GrantError> = {
  objects: () => new GrantError(403, 'failed', 'grant_objects_exceeded', `The upload grant allows ${GRANT_MAX_OBJECTS} objects: the media and its two sidecars`),
  bytes: () => new GrantError(413, 'failed', 'grant_bytes_exceeded', 'The upload grant\'s byte limit is reached'),
  parts: () => new GrantError(413, 'failed', 'grant_parts_exceeded', 'The upload grant\'s part limit is reached'),
  upload: () => refused(403, 'upload_not_granted', 'The upload was not begun by this job'),
};
