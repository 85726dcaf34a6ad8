// Managed storage on the local disk (local mode). Files live under one
// directory; the gateway serves them at /files/<key> to whoever holds an
// HMAC-signed, expiring URL, which is what a presigned S3 GET gives in
// production. This module owns both halves of that URL contract (signing
// here, verification and the safe opening of a stored file for the
// gateway's route) so
// they cannot drift apart.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { constants as fsConstants, createWriteStream, type BigIntStats } from 'node:fs';
import { access, link, lstat, mkdir, open, readlink, realpath, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { FileHandle } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import {
  PROBE_OBJECT_NAME,
  StorageError,
  assertExpiry,
  assertValidKey,
  countingSource,
  type ObjectInfo,
  type StorageErrorCode,
  type StagedFile,
  type StorageProvider,
  type UploadOptions,
  type UploadResult,
} from './types.js';

export interface LocalStorageOptions {
  /** Root directory of the stored files (MANAGED_STORAGE_DIR). Created when missing. */
  dir: string;
  /** Base URL the gateway is reached at (PUBLIC_BASE_URL); may carry a path when behind a proxy. */
  publicBaseUrl: string;
  /**
   * HMAC key of download URLs (FILE_URL_SECRET). Absent for a process that
   * only writes (the runner: it uploads, stages and deletes, and must not
   * hold the key that signs every download URL; docs/adr/0012); presign()
   * then fails.
   */
  secret?: string;
  /** Provider name reported in errors; `managed` by default. */
  name?: string;
}

/** Where uploads are written before they are published under their key; dot-leading, so no valid key can reach it. */
const TMP_DIR = '.tmp';

/**
 * Where each stored file's job is recorded (`.owners/<key>` holds the job
 * id; docs/adr/0012, "Local managed storage"): the disk has no object
 * metadata, and runners in local mode write the directory without a grant,
 * so the record is written beside the file when it is published. Dot-leading:
 * no valid key reaches it, and the gateway's /files route never serves it.
 */
const OWNERS_DIR = '.owners';

/** An owner record holds a job id; a longer one is not ours. */
const MAX_OWNER_BYTES = 256;

const FS_CODES: Record<string, StorageErrorCode> = {
  ENOENT: 'not_found',
  ENOTDIR: 'not_found',
  EACCES: 'auth',
  EPERM: 'auth',
  EROFS: 'auth',
  EEXIST: 'conflict',
};

/** Map a filesystem error to a StorageError without its message, which names paths. */
function fsError(err: unknown, provider: string, doing: string): StorageError {
  if (err instanceof StorageError) return err;
  const errno = (err as NodeJS.ErrnoException | undefined)?.code;
  const code: StorageErrorCode = (errno && FS_CODES[errno]) || 'failed';
  return new StorageError(code, errno ?? 'io_error', `${provider}: ${doing} failed (${errno ?? 'I/O error'})`, { provider });
}

/** Percent-encode each segment of a key for a URL path, keeping the `/` separators. */
export function encodeKeyPath(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

/** Inverse of encodeKeyPath for the gateway's /files/<key> route; throws StorageError on malformed escapes or an invalid key. */
export function decodeKeyPath(encoded: string): string {
  let key: string;
  try {
    key = encoded.split('/').map(decodeURIComponent).join('/');
  } catch {
    throw new StorageError('invalid_config', 'invalid_key', 'invalid object key: malformed escape');
  }
  assertValidKey(key);
  return key;
}

/** Hex HMAC-SHA256 of "<key>\n<expires>"; the newline keeps key and expiry from running into each other. */
export function signFileUrl(key: string, expires: number, secret: string): string {
  return createHmac('sha256', secret).update(`${key}\n${expires}`).digest('hex');
}

/**
 * Check a download URL's signature and expiry. `expires` and `sig` are taken
 * as they come from the query string; `nowMs` is milliseconds since the
 * epoch (Date.now()). The URL is valid while now < expires. Constant-time
 * comparison, so response timing reveals nothing about the expected
 * signature.
 */
export function verifySignedFileUrl(
  key: string,
  expires: string | number,
  sig: string,
  secret: string,
  nowMs: number = Date.now(),
): boolean {
  const expStr = String(expires);
  if (!/^\d{1,12}$/.test(expStr)) return false;
  const exp = Number(expStr);
  if (nowMs >= exp * 1000) return false;
  if (typeof sig !== 'string' || !/^[0-9a-f]{64}$/i.test(sig)) return false;
  // Re-sign with the canonical number, so "0123" and "123" are not two spellings of one URL.
  const expected = Buffer.from(signFileUrl(key, exp, secret), 'hex');
  return timingSafeEqual(expected, Buffer.from(sig, 'hex'));
}

/** A stored file opened for the gateway's /files route: read it through `handle` (and close it), never by its path again. */
export interface OpenedFile {
  /** Open read-only; the caller closes it (a read stream made from it with autoClose does). */
  handle: FileHandle;
  size: number;
  mtime: Date;
}

/**
 * Read-only, without following a link at the last component (ELOOP), and
 * without blocking should a FIFO have been put there (a regular file reads
 * as usual with O_NONBLOCK).
 */
const OPEN_STORED = fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK;

/** Errors of a path that names no stored file: missing, a file where a directory was expected, a link where none may be. */
const NOT_THERE = new Set(['ENOENT', 'ENOTDIR', 'ELOOP']);

/**
 * Open the file of `key` under `dir` for the gateway's /files route. Throws
 * StorageError `invalid_config` for an invalid key and `not_found` when no
 * regular file is there. The storage directory is written by runners, so a
 * link in it is never followed, wherever it points (outside, or to another
 * stored file): the path must resolve to itself, the last component is
 * opened with O_NOFOLLOW, and the file opened must be the one at that path
 * (openedAt), so a directory swapped for a link between the check and the
 * open is caught too. The caller reads the descriptor it was given, never
 * the path.
 */
export async function openFile(dir: string, key: string): Promise<OpenedFile> {
  assertValidKey(key);
  const notFound = () => new StorageError('not_found', 'NoSuchKey', 'managed: file not found', { provider: 'managed' });
  const refused = (doing: string) => (err: unknown): never => {
    if (NOT_THERE.has((err as NodeJS.ErrnoException).code ?? '')) throw notFound();
    throw fsError(err, 'managed', doing);
  };
  const root = await realpath(dir).catch(refused('resolve'));
  const candidate = path.join(root, ...key.split('/'));
  // No link anywhere on the way: the path resolves to itself.
  const real = await realpath(candidate).catch(refused('resolve'));
  if (real !== candidate || !isInside(root, real)) throw notFound();
  const handle = await open(candidate, OPEN_STORED).catch(refused('open'));
  try {
    const st = await handle.stat({ bigint: true });
    if (!st.isFile() || !(await openedAt(handle, candidate, st))) throw notFound();
    return { handle, size: Number(st.size), mtime: st.mtime };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err instanceof StorageError ? err : fsError(err, 'managed', 'stat');
  }
}

/**
 * Whether the open file is the one at `p`. Linux names an open file's own
 * path in /proc/self/fd, which no link on the way can fake (a file reached
 * through a directory swapped for a link shows its real place); elsewhere
 * its device and inode are compared with an lstat of `p`.
 */
async function openedAt(handle: FileHandle, p: string, st: BigIntStats): Promise<boolean> {
  const named = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
  if (named !== undefined) return named === p;
  const at = await lstat(p, { bigint: true }).catch(() => undefined);
  return at !== undefined && at.isFile() && at.dev === st.dev && at.ino === st.ino;
}

function isInside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
}

/** How often a staged file's written pages are sent to disk while it is being written (writingBack). */
const WRITE_BACK_INTERVAL_MS = 250;

/**
 * How much of an upload may wait while one write is with the disk. With the
 * stream's default 16 KiB, a mux read from a pipe (64 KiB chunks) gets one
 * thread-pool write per chunk and ffmpeg waits on each; with room for a few
 * chunks they go down together in one writev. Measured on a 296 MB copy
 * from a pipe: 1.1–1.3 s at 16 KiB, 0.6–0.7 s at 1 MiB, the same as ffmpeg
 * writing the file itself.
 */
const WRITE_BUFFER_BYTES = 1024 * 1024;

/**
 * Have a file written to disk while it is being written: an fdatasync every
 * WRITE_BACK_INTERVAL_MS, one at a time. The fsync that publishes it then
 * only has the tail to write, instead of the whole file after the last byte
 * (with lots of RAM the kernel starts writing back only after 30 s). A
 * failed sync is left to that fsync, which reports it. stop() waits for the
 * sync in flight, so the handle is never closed under one.
 */
function writingBack(fh: FileHandle): { stop(): Promise<void> } {
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  const tick = () => {
    inFlight = fh.datasync().catch(() => undefined).finally(() => {
      if (!stopped) timer = setTimeout(tick, WRITE_BACK_INTERVAL_MS).unref();
    });
  };
  let timer = setTimeout(tick, WRITE_BACK_INTERVAL_MS).unref();
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}

export class LocalStorageProvider implements StorageProvider {
  readonly name: string;
  readonly dir: string;
  private readonly baseUrl: string;
  // Private field: keeps the URL-signing key (FILE_URL_SECRET) out of
  // JSON.stringify and util.inspect of the provider, as the other providers
  // keep their credentials.
  readonly #secret: string | undefined;

  constructor(opts: LocalStorageOptions) {
    this.name = opts.name ?? 'managed';
    // Absent is a writer's provider (see `secret`); given, it must be usable.
    if (opts.secret !== undefined && opts.secret.length < 16) {
      throw new StorageError('invalid_config', 'missing_secret', `${this.name}: FILE_URL_SECRET of at least 16 characters is required`, {
        provider: this.name,
      });
    }
    let base: URL;
    try {
      base = new URL(opts.publicBaseUrl);
    } catch {
      throw new StorageError('invalid_config', 'invalid_base_url', `${this.name}: PUBLIC_BASE_URL is not a URL`, { provider: this.name });
    }
    this.baseUrl = `${base.origin}${base.pathname.replace(/\/+$/, '')}`;
    this.dir = path.resolve(opts.dir);
    this.#secret = opts.secret;
  }

  private pathOf(key: string): string {
    assertValidKey(key);
    const p = path.resolve(this.dir, key);
    // assertValidKey already rules out escapes; this is the belt to its braces.
    if (!isInside(this.dir, p)) throw new StorageError('invalid_config', 'invalid_key', 'invalid object key: outside storage');
    return p;
  }

  async probe(): Promise<void> {
    // Writability of the temp area is what uploads need; a fresh name per
    // probe keeps concurrent probes from tripping over each other.
    const tmpDir = path.join(this.dir, TMP_DIR);
    const file = path.join(tmpDir, `${randomBytes(6).toString('hex')}-${PROBE_OBJECT_NAME}`);
    try {
      await mkdir(tmpDir, { recursive: true });
      const fh = await open(file, 'wx', 0o600);
      try {
        await fh.writeFile('mediajobs storage probe\n');
      } finally {
        await fh.close();
      }
      await unlink(file);
    } catch (err) {
      throw fsError(err, this.name, 'probe');
    }
  }

  /**
   * Stream `body` to `<dir>/<key>` through a staged file (stage()), so a
   * reader never sees a partial file. An existing key is never overwritten:
   * the upload fails with `conflict`, and the caller picks another key
   * (spine.md: a colliding filename gets `-<jobId 8>`). On failure the body
   * is destroyed and nothing is left behind.
   */
  async upload(key: string, body: Readable, opts: UploadOptions = {}): Promise<UploadResult> {
    let staged: StagedFile | undefined;
    try {
      // Fail before spending the transfer when the key is already taken; the
      // link in publish is what actually guarantees no overwrite.
      if (await exists(this.pathOf(key))) throw this.conflict();
      staged = await this.stage();
      const source = countingSource(body, this.name, opts.size);
      // The staged file owns the descriptor: the stream must not close it.
      await pipeline(source.stream, createWriteStream('', { fd: staged.fd, autoClose: false, highWaterMark: WRITE_BUFFER_BYTES }));
      if (opts.size !== undefined && source.bytes !== opts.size) {
        throw new StorageError('failed', 'size_mismatch', `${this.name}: upload is smaller than its declared size`, { provider: this.name });
      }
      await staged.publish(key, opts);
      return { key, size: source.bytes };
    } catch (err) {
      if (!body.destroyed) body.destroy();
      await staged?.discard();
      throw fsError(err, this.name, 'upload');
    }
  }

  /**
   * A file under the storage directory's temp area, written back to disk
   * while it fills (writingBack), published by hard-linking it under its key
   * once fsynced. The runner gives its descriptor to ffmpeg as stdout, so a
   * mux lands in storage without passing through node (ADR 0007).
   */
  async stage(): Promise<StagedFile> {
    const tmp = path.join(this.dir, TMP_DIR, `${randomBytes(12).toString('hex')}.part`);
    let fh: FileHandle;
    try {
      await mkdir(path.dirname(tmp), { recursive: true });
      fh = await open(tmp, 'wx', 0o644);
    } catch (err) {
      throw fsError(err, this.name, 'upload');
    }
    const writeBack = writingBack(fh);
    let staged = true;
    return {
      fd: fh.fd,
      path: tmp,
      publish: async (key, opts = {}) => {
        if (!staged) throw new StorageError('failed', 'not_staged', `${this.name}: the file was already published or discarded`, { provider: this.name });
        try {
          const final = this.pathOf(key);
          await mkdir(path.dirname(final), { recursive: true });
          await writeBack.stop();
          // Durable before it becomes visible under its key.
          await fh.sync();
          const { size } = await fh.stat();
          await this.publish(tmp, final);
          staged = false;
          if (opts.jobId !== undefined) await this.recordOwner(key, opts.jobId);
          await fh.close().catch(() => undefined);
          return { key, size };
        } catch (err) {
          throw fsError(err, this.name, 'upload');
        }
      },
      discard: async () => {
        if (!staged) return;
        staged = false;
        await writeBack.stop();
        await fh.close().catch(() => undefined);
        await unlink(tmp).catch(() => undefined);
      },
    };
  }

  /**
   * link(2) fails with EEXIST instead of replacing, which rename(2) would do
   * silently: that is the atomic "create if absent" the no-overwrite rule
   * needs. Filesystems without hard links (some network and FUSE mounts)
   * fall back to check-then-rename, which has a small race window.
   */
  private async publish(tmp: string, final: string): Promise<void> {
    try {
      await link(tmp, final);
    } catch (err) {
      const errno = (err as NodeJS.ErrnoException).code;
      if (errno === 'EEXIST') throw this.conflict();
      if (errno === 'EPERM' || errno === 'ENOTSUP' || errno === 'EOPNOTSUPP' || errno === 'ENOSYS') {
        if (await exists(final)) throw this.conflict();
        await rename(tmp, final);
        return;
      }
      throw err;
    }
    // Published; the temp name is just a second link now, and the caller's
    // cleanup retries its removal, so a failure here must not fail the upload.
    await unlink(tmp).catch(() => undefined);
  }

  private conflict(): StorageError {
    return new StorageError('conflict', 'KeyExists', `${this.name}: an object already exists at this key`, { provider: this.name });
  }

  async presign(key: string, expiresSeconds: number): Promise<string> {
    assertValidKey(key);
    assertExpiry(expiresSeconds, this.name);
    if (this.#secret === undefined) {
      throw new StorageError('invalid_config', 'no_signing_key', `${this.name}: this process holds no FILE_URL_SECRET and cannot sign download URLs`, {
        provider: this.name,
      });
    }
    const expires = Math.floor(Date.now() / 1000) + expiresSeconds;
    const sig = signFileUrl(key, expires, this.#secret);
    return `${this.baseUrl}/files/${encodeKeyPath(key)}?expires=${expires}&sig=${sig}`;
  }

  async delete(key: string): Promise<void> {
    const p = this.pathOf(key);
    try {
      await unlink(p);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw fsError(err, this.name, 'delete');
    }
    // After the file: a record without its file names nothing, a file without its record belongs to no job.
    await unlink(this.ownerPath(key)).catch(() => undefined);
  }

  /**
   * The file at `key` as the disk holds it: its size (an fstat of the file
   * opened without following a link, openFile) and the job its owner record
   * names; undefined when no regular file is there.
   */
  async stat(key: string): Promise<ObjectInfo | undefined> {
    let opened: OpenedFile;
    try {
      opened = await openFile(this.dir, key);
    } catch (err) {
      if (err instanceof StorageError && err.code === 'not_found') return undefined;
      throw err;
    }
    await opened.handle.close().catch(() => undefined);
    const jobId = await this.readOwner(key);
    return { size: opened.size, ...(jobId !== undefined && { jobId }) };
  }

  private ownerPath(key: string): string {
    this.pathOf(key);
    return path.join(this.dir, OWNERS_DIR, ...key.split('/'));
  }

  /** Write the record of `key`'s job, replacing a stale one (a file deleted by hand leaves its record), atomically by rename. */
  private async recordOwner(key: string, jobId: string): Promise<void> {
    const record = this.ownerPath(key);
    const tmp = path.join(this.dir, TMP_DIR, `${randomBytes(12).toString('hex')}.owner`);
    await mkdir(path.dirname(record), { recursive: true });
    const fh = await open(tmp, 'wx', 0o644);
    try {
      await fh.writeFile(jobId);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, record);
  }

  /** The job `key`'s owner record names, read without following a link; undefined without one. */
  private async readOwner(key: string): Promise<string | undefined> {
    let fh: FileHandle;
    try {
      fh = await open(this.ownerPath(key), OPEN_STORED);
    } catch {
      return undefined;
    }
    try {
      const buf = Buffer.alloc(MAX_OWNER_BYTES + 1);
      const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
      if (bytesRead === 0 || bytesRead > MAX_OWNER_BYTES) return undefined;
      return buf.subarray(0, bytesRead).toString('utf8');
    } catch {
      return undefined;
    } finally {
      await fh.close().catch(() => undefined);
    }
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await access(p, fsConstants.F_OK);
    return true;
  } catch {
    return false;
  }
}
