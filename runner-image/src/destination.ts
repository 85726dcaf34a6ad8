// Where the file goes: the job's destination.json (per-job Secret) turned
// into a storage provider, the object key, an upload that never
// overwrites another job's file, and uploads that stop and leave nothing
// behind when the job is cancelled (CancellableProvider).
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { storageEndpoints, type StorageEndpointsConfig } from '@mediajobs/lib/config';
import {
  createProvider, destinationKeyLayout, isStorageError, objectKey, parseDestination, StorageError,
  type StagedFile, type StorageProvider, type UploadResult,
} from '@mediajobs/lib/storage/index';
import type { UploadOptions } from '@mediajobs/lib/storage/types';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import { checkedAgents } from '@mediajobs/lib/outbound-agents';

export interface ResolvedDestination {
  provider: StorageProvider;
  folderPrefix?: string;
  baseFolder: string;
  /**
   * The job every file is stored for (MEDIAJOB_JOB_ID): recorded with each
   * object (UploadOptions.jobId, CancellableProvider), where the operator
   * reads it back before it accepts what the runner reports (docs/adr/0012).
   */
  jobId?: string;
}

export class DestinationError extends Error {
  override readonly name = 'DestinationError';
}

/**
 * Read `<credentialsDir>/destination.json` and build its provider, talking
 * to the GCS/Drive `endpoints` of the runner's validated settings
 * (GCS_API_ENDPOINT, ...: deployment settings the operator puts in the
 * pod's env, never the document's). No network call: a destination that
 * cannot be reached shows at upload time. Errors carry no credential or
 * path (the file holds secrets). With `policy`, a user's S3, OSS or Blob
 * endpoint is connected to only where the outbound-address policy allows,
 * every address its name resolves to checked as each connection opens (the
 * gateway checked the endpoint as written; a name can answer differently by
 * now); a refused one fails the upload as unreachable.
 */
export async function resolveDestination(
  credentialsDir: string, endpoints: StorageEndpointsConfig, env: NodeJS.ProcessEnv = process.env, policy?: OutboundPolicy,
): Promise<ResolvedDestination> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(path.join(credentialsDir, 'destination.json'), 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new DestinationError(code ? `destination.json unreadable (${code})` : 'destination.json is not valid JSON');
  }
  const dest = parseDestination(raw);
  // Managed storage settings come in the Secret's document (the operator puts them there), never in the pod's env.
  // They hold no key that signs download URLs and no bucket credentials: local disk is written directly, S3
  // through the document's upload grant (lib/src/storage/granted.ts, docs/adr/0012).
  const managed = (raw as { managed?: Record<string, string> }).managed;
  const userEndpoint = dest.provider === 's3' || dest.provider === 'oss' || dest.provider === 'blob';
  const provider = await createProvider(raw, {
    ...storageEndpoints(endpoints), env: managed ? { ...env, ...managed } : env, ...(policy && userEndpoint && { agents: checkedAgents({ policy }) }),
  });
  return { provider, ...destinationKeyLayout(dest), ...(env.MEDIAJOB_JOB_ID && { jobId: env.MEDIAJOB_JOB_ID }) };
}

/** What an upload of a cancelled job fails with (the pipeline's report is not sent: the runner is stopping). */
export class UploadCancelled extends Error {
  override readonly name = 'UploadCancelled';
  constructor() {
    super('the job was cancelled');
  }
}

/**
 * A provider whose uploads stop when the job is cancelled (SIGTERM aborts
 * `signal`): the body of an upload in progress is destroyed, so the
 * provider aborts its multipart upload (or discards its staged file); an
 * upload that completes after the abort is deleted at once; and the keys
 * delivered before it are kept so the runner can remove them
 * (removeDelivered) when it stops before its final report. Every upload of
 * the job goes through it, sidecars included, since it wraps the provider;
 * so `onStored` hears of each file stored (its bytes) and of each it
 * deleted again (null), which the runner writes into status.storedFiles,
 * and each is stored as `jobId`'s (the object's metadata, UploadOptions).
 */
export class CancellableProvider implements StorageProvider {
  private readonly delivered = new Set<string>();
  readonly stage?: () => Promise<StagedFile>;

  constructor(
    private readonly inner: StorageProvider,
    private readonly signal: AbortSignal,
    private readonly onStored: (key: string, bytes: number | null) => void = () => undefined,
    private readonly jobId?: string,
  ) {
    const stage = inner.stage?.bind(inner);
    if (stage) this.stage = async () => this.staged(await stage());
  }

  get name(): string {
    return this.inner.name;
  }

  probe(): Promise<void> {
    return this.inner.probe();
  }

  presign(key: string, expiresSeconds: number): Promise<string> {
    return this.inner.presign(key, expiresSeconds);
  }

  async delete(key: string): Promise<void> {
    await this.inner.delete(key);
    if (this.delivered.delete(key)) this.onStored(key, null);
  }

  async upload(key: string, body: Readable, opts?: UploadOptions): Promise<UploadResult> {
    if (this.signal.aborted) {
      body.destroy();
      throw new UploadCancelled();
    }
    const stop = () => body.destroy(new UploadCancelled());
    this.signal.addEventListener('abort', stop, { once: true });
    try {
      return await this.kept(await this.inner.upload(key, body, { ...opts, ...this.owner() }));
    } finally {
      this.signal.removeEventListener('abort', stop);
    }
  }

  /** Files stored so far that the job has not reported yet. */
  deliveredKeys(): string[] {
    return [...this.delivered];
  }

  /** Delete every file this job stored (it was cancelled before reporting them); returns how many went. */
  async removeDelivered(): Promise<number> {
    let n = 0;
    for (const key of this.deliveredKeys()) {
      await this.delete(key);
      n++;
    }
    return n;
  }

  private owner(): Pick<UploadOptions, 'jobId'> {
    return this.jobId === undefined ? {} : { jobId: this.jobId };
  }

  private async kept(r: UploadResult): Promise<UploadResult> {
    if (this.signal.aborted) {
      await this.inner.delete(r.key);
      throw new UploadCancelled();
    }
    this.delivered.add(r.key);
    this.onStored(r.key, r.size);
    return r;
  }

  private staged(file: StagedFile): StagedFile {
    return {
      fd: file.fd,
      path: file.path,
      publish: async (key) => {
        if (this.signal.aborted) {
          await file.discard();
          throw new UploadCancelled();
        }
        return this.kept(await file.publish(key, this.owner()));
      },
      discard: () => file.discard(),
    };
  }
}

/** The destination with its provider made cancellable (CancellableProvider), telling `onStored` what it stores and deletes. */
export function cancellable(
  dest: ResolvedDestination, signal: AbortSignal, onStored?: (key: string, bytes: number | null) => void,
): ResolvedDestination & { provider: CancellableProvider } {
  return { ...dest, provider: new CancellableProvider(dest.provider, signal, onStored, dest.jobId) };
}

/** Counts bytes as they pass, for upload progress, without buffering. */
class Counter extends Transform {
  bytes = 0;
  constructor(private readonly onBytes: (n: number) => void) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    this.onBytes(this.bytes);
    cb(null, chunk);
  }
}

export interface UploadJobFile {
  /** The file to upload; or, instead, `open`. */
  file?: string;
  /**
   * A body produced while it uploads (ffmpeg muxing into the upload), made
   * afresh for each key tried, since a refused key destroys the body it got.
   */
  open?: () => Readable;
  /**
   * Used instead of `open` when the provider can stage a file on this
   * machine's disk (local managed storage): fill it through its descriptor
   * (ffmpeg's stdout), rejecting when the writer fails. Written once, then
   * published under the first key not taken.
   */
  writeTo?: (file: Pick<StagedFile, 'fd' | 'path'>) => Promise<void>;
  ext: string;
  contentType: string;
  jobId: string;
  filename?: string;
  folder?: string;
  onProgress?: (fraction: number) => void;
}

export type UploadOutcome =
  | { ok: true; result: UploadResult }
  | { ok: false; error: unknown; localReadFailed: boolean };

/**
 * Upload `file` under the job's object key. A key that already holds a file
 * is never overwritten (the provider refuses with `conflict`): a requested
 * filename then gets `-<jobId 8>` (spine.md); if that is taken too, it can
 * only be an earlier attempt of this same job (a retried pod), and a
 * time-stamped key keeps both rather than guessing.
 */
export async function uploadJobFile(dest: ResolvedDestination, f: UploadJobFile): Promise<UploadOutcome> {
  const size = f.file !== undefined ? (await stat(f.file)).size : undefined;
  const base = { folderPrefix: dest.folderPrefix, baseFolder: dest.baseFolder, folder: f.folder, name: f.filename, fallback: f.jobId, ext: f.ext };
  const suffix8 = f.jobId.slice(0, 8);
  const candidates = [
    () => objectKey(base),
    () => objectKey({ ...base, suffix: suffix8 }),
    () => objectKey({ ...base, suffix: `${suffix8}-${Date.now().toString(36)}` }),
  ];
  if (f.writeTo && dest.provider.stage) return uploadStaged(dest.provider, f.writeTo, candidates);
  let lastError: unknown;
  for (const keyOf of candidates) {
    let key: string;
    try {
      key = keyOf();
    } catch (err) {
      return { ok: false, error: err, localReadFailed: false };
    }
    let localReadFailed = false;
    // A fresh stream per attempt: a refused upload destroys the one it was given.
    const body: Readable = f.file !== undefined ? createReadStream(f.file) : f.open!();
    if (f.file !== undefined) body.once('error', () => (localReadFailed = true));
    const counter = new Counter((n) => f.onProgress?.(size ? n / size : 1));
    body.once('error', (err: Error) => counter.destroy(err));
    try {
      const result = await dest.provider.upload(key, body.pipe(counter), { contentType: f.contentType, ...(size !== undefined ? { size } : {}) });
      return { ok: true, result };
    } catch (err) {
      body.destroy();
      lastError = err;
      if (isStorageError(err) && err.code === 'conflict') continue;
      return { ok: false, error: err, localReadFailed };
    }
  }
  return { ok: false, error: lastError, localReadFailed: false };
}

/** uploadJobFile for a provider that stages: one write, then the keys in turn, so a taken key costs no second mux. */
async function uploadStaged(provider: StorageProvider, writeTo: NonNullable<UploadJobFile['writeTo']>, keys: (() => string)[]): Promise<UploadOutcome> {
  let staged: StagedFile | undefined;
  try {
    // An impossible name fails before the work, as with a streamed upload.
    let key = keys[0]!();
    staged = await provider.stage!();
    // As a failed stream is to an upload (countingSource): the source's failure, for the caller to classify.
    await writeTo(staged).catch(() => {
      throw new StorageError('failed', 'source_error', `${provider.name}: the file being written failed`, { provider: provider.name });
    });
    for (let i = 0; ; key = keys[++i]!()) {
      try {
        return { ok: true, result: await staged.publish(key) };
      } catch (err) {
        if (!isStorageError(err) || err.code !== 'conflict' || i === keys.length - 1) throw err;
      }
    }
  } catch (err) {
    await staged?.discard();
    return { ok: false, error: err, localReadFailed: false };
  }
}
