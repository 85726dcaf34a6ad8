// A multipart upload driven from a stream, for the providers whose client
// library has none we can use: ali-oss's needs a file or one whole Buffer,
// and @aws-sdk/lib-storage's kept too much memory alive for the uploader's
// 150 MB budget (docs/adr/0006-s3-multipart-upload-driven-here.md). The
// provider supplies the five requests (MultipartBackend); the stream is cut
// into parts here, sent `parallel` at a time, and aborted on failure.
import { isUnreachable } from '../unreachable.js';
import { StorageError, isStorageError } from './types.js';

export interface CompletedPart {
  /** 1-based, as S3 and OSS number parts. */
  number: number;
  etag: string;
}

/** A provider's requests. Each throws the client library's error (streamUpload's mapError maps it) or a StorageError. */
export interface MultipartBackend {
  /** Store the whole body with one request: the stream fitted in one part (or was empty). */
  putObject(body: Buffer): Promise<void>;
  /** Begin a multipart upload; returns its upload id. */
  create(): Promise<string>;
  /** Send one part; returns its ETag. `body` is not touched again once this settles, so it may be reused. */
  uploadPart(uploadId: string, partNumber: number, body: Buffer): Promise<string>;
  /** `parts` in ascending order. */
  complete(uploadId: string, parts: CompletedPart[]): Promise<void>;
  /** Discard an unfinished upload so its parts are not billed; a failure here is ignored. */
  abort(uploadId: string): Promise<unknown>;
}

export interface MultipartOptions {
  /** Reported in errors. */
  provider: string;
  /** Bytes of every part but the last. */
  partSize: number;
  /** Parts in flight at once; memory is (parallel + 1) × partSize: those in flight and the one being filled. */
  parallel: number;
  /** The service's limit on the number of parts. */
  maxParts: number;
}

const MiB = 1024 * 1024;

/**
 * S3's part sizes, for every uploader writing to an S3 bucket (the s3
 * provider, and the runner's upload-grant provider, granted.ts).
 * `min`: S3's minimum for every part but the last. `preferred`: the minimum,
 * as rclone uses: 4 in flight plus the one being filled keep 25 MiB of
 * buffers, which with node's own ~70 MiB and its garbage keeps the uploader
 * under its 150 MB budget (issue 5; docs/adr/0006); bigger parts were not
 * faster against s3rver. 10,000 of them allow ~48 GiB, and bigger files get
 * bigger parts. `unknownSize`: a stream of unknown length may hold up to
 * 10,000 parts: 16 MiB parts allow ~156 GiB, while 4 in flight (plus the one
 * being filled) keep the buffers at 80 MiB.
 */
export const S3_PARTS = { min: 5 * MiB, preferred: 5 * MiB, unknownSize: 16 * MiB, maxParts: 10_000 } as const;

/**
 * The part size of one upload: the provider's configured `fixed` size when
 * it has one; else `preferred`, grown just enough for a declared `size` to
 * fit in `maxParts` parts; else, the size unknown, `unknownSize` (chosen by
 * the provider so that `maxParts` of them hold a large file).
 */
export function choosePartSize(
  size: number | undefined,
  sizes: { fixed: number | undefined; preferred: number; unknownSize: number; maxParts: number },
): number {
  if (sizes.fixed !== undefined) return sizes.fixed;
  return size === undefined ? sizes.unknownSize : Math.max(sizes.preferred, Math.ceil(size / sizes.maxParts));
}

/**
 * One upload, as two of streamUpload()'s steps: `send` reads the stream
 * and uploads it, `abandon` (after a failure) waits for the parts still in
 * flight and aborts the multipart upload. One instance per upload.
 *
 * A stream that fits in one part becomes a single PutObject (cheaper, and
 * atomic). Otherwise each part is a Buffer filled once from the stream and
 * kept until its request settles, so the client can send it again after a
 * transient failure; once sent, its memory takes the next part, so the
 * upload allocates parallel + 1 part buffers whatever the file size and
 * does not wait on the garbage collector to give memory back.
 */
export class MultipartUpload {
  readonly #backend: MultipartBackend;
  readonly #opts: MultipartOptions;
  readonly #inFlight = new Set<Promise<void>>();
  #uploadId: string | undefined;

  constructor(backend: MultipartBackend, opts: MultipartOptions) {
    this.#backend = backend;
    // At least one in flight: with none, send() would wait for a part that was never sent.
    this.#opts = { ...opts, parallel: Math.max(1, Math.floor(opts.parallel)) };
  }

  async send(stream: AsyncIterable<unknown>): Promise<void> {
    const { partSize, parallel, maxParts, provider } = this.#opts;
    const spare: Buffer[] = [];
    const parts = readParts(stream, partSize, spare);
    try {
      // One part read ahead tells a single PutObject from a multipart upload.
      let current = await parts.next();
      let next = current.done ? current : await parts.next();
      if (next.done) {
        await this.#backend.putObject(current.done ? Buffer.alloc(0) : current.value);
        return;
      }
      const uploadId = await this.#backend.create();
      this.#uploadId = uploadId;
      const done: CompletedPart[] = [];
      let failure: { error: unknown } | undefined;
      let number = 0;
      while (!current.done) {
        if (failure) throw failure.error;
        if (number >= maxParts) {
          throw new StorageError('failed', 'too_many_parts', `${provider}: upload exceeds ${maxParts} parts`, { provider });
        }
        const partNumber = ++number;
        const body = current.value;
        const sending: Promise<void> = this.#backend.uploadPart(uploadId, partNumber, body).then(
          (etag) => {
            done.push({ number: partNumber, etag });
            if (body.length === partSize) spare.push(body);
          },
          (error: unknown) => {
            failure ??= { error };
          },
        );
        this.#inFlight.add(sending);
        void sending.finally(() => this.#inFlight.delete(sending));
        // Bounded memory: read no further while `parallel` parts are in flight.
        while (this.#inFlight.size >= parallel) await Promise.race(this.#inFlight);
        current = next;
        next = current.done ? current : await parts.next();
      }
      await Promise.all(this.#inFlight);
      if (failure) throw failure.error;
      done.sort((a, b) => a.number - b.number);
      await this.#backend.complete(uploadId, done);
      this.#uploadId = undefined;
    } finally {
      // Stops reading the source when the upload ends early (a no-op once it was read to the end).
      await parts.return(undefined);
    }
  }

  /** After a failure: let the parts in flight settle, then abort the multipart upload, if one was begun and not completed. */
  async abandon(): Promise<void> {
    await Promise.allSettled(this.#inFlight);
    const uploadId = this.#uploadId;
    this.#uploadId = undefined;
    if (uploadId !== undefined) await abortPatiently(() => this.#backend.abort(uploadId));
  }
}

/**
 * Waits between tries of an abort that met a storage service it could not
 * reach: about 25 s in all, enough for a restart or a failover, so an upload
 * cut by one is not left behind (billed until a lifecycle rule ends it).
 */
export const ABORT_RETRY_DELAYS_MS = [250, 500, 1000, 2000, 4000, 8000, 8000];

/** Whether an abort that failed this way may work later: the service unreachable or failing (5xx), not a refusal. */
function worthRetrying(err: unknown): boolean {
  if (isStorageError(err)) return err.code === 'unreachable';
  const status = (err as { $metadata?: { httpStatusCode?: number }; status?: unknown } | null)?.$metadata?.httpStatusCode
    ?? (err as { status?: unknown } | null)?.status;
  return isUnreachable(err) || (typeof status === 'number' && status >= 500);
}

/**
 * Abort an unfinished multipart upload, trying again while the storage
 * service cannot be reached (ABORT_RETRY_DELAYS_MS). Never throws: what
 * could not be aborted is left to the bucket's lifecycle rule (docs/production.md).
 */
export async function abortPatiently(abort: () => Promise<unknown>, delaysMs: readonly number[] = ABORT_RETRY_DELAYS_MS): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    try {
      await abort();
      return true;
    } catch (err) {
      if (attempt >= delaysMs.length || !worthRetrying(err)) return false;
      await new Promise((r) => setTimeout(r, delaysMs[attempt]));
    }
  }
}

/**
 * Cut a byte stream into parts of exactly `size` bytes (the last one may be
 * shorter), each copied once into its own Buffer as the chunks arrive.
 * Buffers pushed onto `spare` (full-size ones whose part was sent) are
 * filled again instead of allocating new ones.
 */
async function* readParts(stream: AsyncIterable<unknown>, size: number, spare: Buffer[] = []): AsyncGenerator<Buffer, void, undefined> {
  let part: Buffer | undefined;
  let filled = 0;
  for await (const chunk of stream) {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    while (buf.length > 0) {
      part ??= spare.pop() ?? Buffer.allocUnsafe(size);
      const copied = buf.copy(part, filled);
      filled += copied;
      buf = buf.subarray(copied);
      if (filled === size) {
        const full = part;
        part = undefined;
        filled = 0;
        yield full;
      }
    }
  }
  if (part && filled > 0) yield part.subarray(0, filled);
}
