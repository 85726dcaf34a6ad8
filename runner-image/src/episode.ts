// A show episode (a podcast feed's enclosure, spec rule 6): what its
// job_completed says comes from the feed the batch controller copied into
// spec.episode, not from the media file, which yt-dlp's generic extractor
// knows only by its file name and Last-Modified date:
//   title         the feed's episode title
//   description   none (null for podcast sources)
//   release_date  the feed's exact pubDate
// and download_thumbnail delivers the feed's artwork for the episode (its
// own, else the show's), fetched here with bounded time and size and stored
// as JPEG like every other thumbnail. Any other job reports what yt-dlp read.
import { createWriteStream } from 'node:fs';
import { mkdir, open, rm } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '@mediajobs/lib/logger';
import type { MediaJobResult, MediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { runProcess } from './child.js';
import { egressFetch } from './egress-proxy.js';
import { releaseDateOf, type YtDlpInfo } from './plan.js';
import type { SidecarFile } from './sidecars.js';

/** Bounds of the artwork fetch: show art is at most a few MB (the platform asks for 3000x3000 JPEG or PNG). */
export const ARTWORK_LIMITS = { timeoutMs: 30_000, maxBytes: 20 * 1024 * 1024 } as const;

type Described = Pick<MediaJobResult, 'title' | 'description' | 'releaseDate'>;

/** The title, description and release date a completed job reports. */
export function describedAs(spec: Pick<MediaJobSpec, 'showEpisode' | 'episode'>, info: Pick<YtDlpInfo, 'title' | 'description' | 'upload_date' | 'release_date' | 'timestamp'>): Described {
  const title = (spec.showEpisode ? spec.episode?.title : undefined) ?? info.title ?? undefined;
  const releaseDate = (spec.showEpisode ? spec.episode?.releaseDate : undefined) ?? releaseDateOf(info);
  const description = spec.showEpisode ? undefined : info.description ?? undefined;
  return {
    ...(title !== undefined && { title }),
    ...(description !== undefined && { description }),
    ...(releaseDate !== undefined && { releaseDate }),
  };
}

/** The artwork a show episode's thumbnail comes from, when the feed gave one (http or https only). */
export function artworkUrl(spec: Pick<MediaJobSpec, 'showEpisode' | 'episode'>): string | undefined {
  const url = spec.showEpisode ? spec.episode?.thumbnailUrl : undefined;
  return url && /^https?:\/\//i.test(url) ? url : undefined;
}

const JPEG = [0xff, 0xd8, 0xff];

export interface ArtworkOptions {
  ffmpeg: string;
  logger: Logger;
  signal?: AbortSignal;
  timeoutMs?: number;
  maxBytes?: number;
}

/**
 * Fetch the artwork into `dir` as `thumbnail.jpg`: a JPEG as it is, any
 * other image converted by ffmpeg. Undefined (logged) when it cannot be
 * fetched in time, is larger than the bound, or is not an image: the job
 * completes without a thumbnail, as for any sidecar.
 */
export async function fetchArtwork(url: string, dir: string, o: ArtworkOptions): Promise<SidecarFile | undefined> {
  await mkdir(dir, { recursive: true });
  const raw = path.join(dir, 'artwork.download');
  const out = path.join(dir, 'thumbnail.jpg');
  try {
    const why = await download(url, raw, o);
    if (why) {
      o.logger.warn({ why }, 'episode artwork could not be fetched; the media is delivered without a thumbnail');
      return undefined;
    }
    if (await startsWith(raw, JPEG)) return { path: raw, ext: 'jpg' };
    const run = await runProcess(o.ffmpeg, ['-v', 'error', '-nostdin', '-y', '-protocol_whitelist', 'file', '-i', raw, '-frames:v', '1', '-q:v', '2', '-update', '1', out], o.signal ? { signal: o.signal } : {});
    if (run.exitCode !== 0) {
      o.logger.warn({ exitCode: run.exitCode, stderr: run.stderr.trim().split('\n').slice(-2).join('\n').slice(-300) }, 'episode artwork is not an image ffmpeg reads; no thumbnail');
      return undefined;
    }
    return { path: out, ext: 'jpg' };
  } catch (err) {
    if (o.signal?.aborted) throw err;
    o.logger.warn({ err: { name: (err as Error)?.name, code: (err as { code?: unknown })?.code } }, 'episode artwork could not be fetched; no thumbnail');
    return undefined;
  }
}

/** Download to `file` within the bounds; a reason (for the log) when it did not. */
async function download(url: string, file: string, o: ArtworkOptions): Promise<string | undefined> {
  const maxBytes = o.maxBytes ?? ARTWORK_LIMITS.maxBytes;
  const deadline = AbortSignal.timeout(o.timeoutMs ?? ARTWORK_LIMITS.timeoutMs);
  const signal = o.signal ? AbortSignal.any([o.signal, deadline]) : deadline;
  let res: Response;
  try {
    // Through the job's egress (ADR 0014): the policy is checked on every redirect and resolved address.
    res = await egressFetch(url, { signal, headers: { accept: 'image/*' } });
  } catch (err) {
    if (o.signal?.aborted) throw err;
    return deadline.aborted ? 'timeout' : 'connection failed';
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel().catch(() => undefined);
    return `HTTP ${res.status}`;
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) {
    await res.body.cancel().catch(() => undefined);
    return 'too large';
  }
  let seen = 0;
  const counted = Readable.fromWeb(res.body as never).on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > maxBytes) counted.destroy(new Error('too large'));
  });
  try {
    await pipeline(counted, createWriteStream(file));
  } catch (err) {
    await rm(file, { force: true });
    if (o.signal?.aborted) throw err;
    return seen > maxBytes ? 'too large' : deadline.aborted ? 'timeout' : 'connection failed';
  }
  return undefined;
}

async function startsWith(file: string, magic: readonly number[]): Promise<boolean> {
  const fh = await open(file, 'r');
  try {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(magic.length), 0, magic.length, 0);
    return bytesRead === magic.length && magic.every((b, i) => buffer[i] === b);
  } finally {
    await fh.close();
  }
}
