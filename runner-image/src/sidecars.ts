// Subtitles and thumbnails: files delivered beside the media, under the
// media's own key with another extension (`videos/name.mp4` →
// `videos/name.en.vtt`, `videos/name.jpg`), so a player that looks for
// subtitles next to the video finds them.
//
// One extra yt-dlp run fetches both from the probe's info JSON (no second
// extraction): `--skip-download --write-subs --write-auto-subs` with no
// language list lets yt-dlp pick one track the way it always does
// (YoutubeDL.process_subtitles: "en" among the uploader's subtitles, then any
// "en*", then the same over automatic captions, else the first), which is
// what the spec's single subtitle_key asks for. HTML5 <track> elements and
// HLS subtitle renditions (EXT-X-MEDIA TYPE=SUBTITLES, fetched by yt-dlp's HLS
// downloader, which merges WebVTT fragments) both arrive as "vtt".
//
// A show episode's thumbnail is the feed's artwork for it (episode.ts), not
// what yt-dlp finds for the enclosure file (nothing, usually).
//
// Sidecars are extras: a source without subtitles, or a sidecar that cannot
// be fetched or stored, leaves its key out and the job still completes with
// the media (the log says why). So does one that is not what it claims to be
// (sidecarContentOk): a subtitle that is not WebVTT or SRT, a thumbnail that
// is not an image, such as whatever a redirect led yt-dlp to (ADR 0014).
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '@mediajobs/lib/logger';
import type { MediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { isStorageError } from '@mediajobs/lib/storage/index';
import { runProcess } from './child.js';
import type { ResolvedDestination } from './destination.js';
import { artworkUrl, fetchArtwork } from './episode.js';
import { LOCAL_PROTOCOLS } from './ffmpeg.js';
import { commonArgs, type YtDlpOptions } from './ytdlp.js';

export interface SidecarFile {
  path: string;
  /** File extension as written (vtt, srt, jpg...). */
  ext: string;
  /** Subtitle language as yt-dlp names it (en, de, und...). */
  lang?: string;
}

export interface Sidecars {
  subtitle?: SidecarFile;
  thumbnail?: SidecarFile;
}

export interface SidecarWants {
  subtitles: boolean;
  thumbnail: boolean;
}

/**
 * What a job asks for. Thumbnails only for show episodes (spec rule 6): for
 * any other source download_thumbnail is accepted and produces nothing.
 */
export function sidecarWants(spec: Pick<MediaJobSpec, 'downloadSubtitles' | 'downloadThumbnail' | 'showEpisode'>): SidecarWants {
  return { subtitles: spec.downloadSubtitles === true, thumbnail: spec.downloadThumbnail === true && spec.showEpisode === true };
}

/** yt-dlp's arguments for fetching the wanted sidecars into `dir` from a probed info JSON. */
export function sidecarArgs(infoPath: string, dir: string, wants: SidecarWants): string[] {
  const args = ['--load-info-json', infoPath, '--skip-download', '--no-mtime', '--paths', dir, '--paths', `temp:${dir}`];
  if (wants.subtitles) {
    // vtt first: what players and browsers read; YouTube offers it for every track.
    args.push('--write-subs', '--write-auto-subs', '--sub-format', 'vtt/srt/best', '-o', 'subtitle:subtitle.%(ext)s');
  }
  if (wants.thumbnail) {
    // Sources serve webp, png or jpg; JPEG is what every consumer of a cover image takes.
    // The conversion's ffmpeg reads the downloaded file as ours read theirs: files only.
    args.push('--write-thumbnail', '--convert-thumbnails', 'jpg', '-o', 'thumbnail:thumbnail.%(ext)s',
      '--postprocessor-args', `ThumbnailsConvertor+ffmpeg_i1:-protocol_whitelist ${LOCAL_PROTOCOLS}`);
  }
  return args;
}

/** Name the files yt-dlp wrote: `subtitle.<lang>.<ext>` and `thumbnail.<ext>`. */
export function identifySidecars(names: readonly string[]): Sidecars {
  const out: Sidecars = {};
  for (const name of [...names].sort()) {
    const sub = /^subtitle\.([^.]+)\.([a-z0-9]+)$/i.exec(name);
    if (sub && !out.subtitle) out.subtitle = { path: name, lang: sub[1], ext: sub[2]!.toLowerCase() };
    const thumb = /^thumbnail\.([a-z0-9]+)$/i.exec(name);
    if (thumb && !out.thumbnail) out.thumbnail = { path: name, ext: thumb[1]!.toLowerCase() };
  }
  return out;
}

/** Fetch the wanted sidecars; what could not be fetched is simply absent. */
export async function fetchSidecars(infoPath: string, dir: string, wants: SidecarWants, opts: YtDlpOptions & { logger: Logger }): Promise<Sidecars> {
  if (!wants.subtitles && !wants.thumbnail) return {};
  await mkdir(dir, { recursive: true });
  const run = await runProcess(opts.bin, [...commonArgs(opts), ...sidecarArgs(infoPath, dir, wants)], { signal: opts.signal });
  if (run.exitCode !== 0) {
    opts.logger.warn({ exitCode: run.exitCode, stderr: run.stderr.trim().split('\n').slice(-3).join('\n').slice(-600) }, 'subtitles/thumbnail could not be fetched');
  }
  const found = identifySidecars(await readdir(dir));
  for (const f of [found.subtitle, found.thumbnail]) {
    if (f) f.path = path.join(dir, f.path);
  }
  if (!wants.subtitles) delete found.subtitle;
  if (!wants.thumbnail) delete found.thumbnail;
  if (wants.subtitles && !found.subtitle) opts.logger.info('the source has no subtitles');
  return found;
}

const CONTENT_TYPES: Record<string, string> = {
  vtt: 'text/vtt',
  srt: 'application/x-subrip',
  ttml: 'application/ttml+xml',
  ass: 'text/x-ssa',
  jpg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
};

/**
 * The sidecar's key beside the media: the media key without its extension,
 * an optional suffix (the subtitle language), the sidecar's extension.
 * Undefined when the parts would not make a safe key.
 */
export function sidecarKey(mediaKey: string, ext: string, suffix?: string): string | undefined {
  const base = mediaKey.replace(/\.[a-z0-9]{1,10}$/i, '');
  if (!/^[a-z0-9]{1,10}$/i.test(ext)) return undefined;
  const tag = suffix && /^[A-Za-z0-9-]{1,20}$/.test(suffix) ? `.${suffix}` : '';
  return `${base}${tag}.${ext.toLowerCase()}`;
}

/**
 * Upload a sidecar next to the media. Never overwrites: a key another job's
 * file holds gets the job id's first 8 characters, like the media's name.
 */
export async function uploadSidecar(
  dest: ResolvedDestination, mediaKey: string, file: SidecarFile, jobId: string,
): Promise<string | undefined> {
  const tag = file.lang;
  const candidates = [sidecarKey(mediaKey, file.ext, tag), sidecarKey(`${mediaKey.replace(/\.[a-z0-9]{1,10}$/i, '')}-${jobId.slice(0, 8)}`, file.ext, tag)];
  const { size } = await stat(file.path);
  for (const key of candidates) {
    if (!key) continue;
    try {
      const r = await dest.provider.upload(key, createReadStream(file.path), { contentType: CONTENT_TYPES[file.ext] ?? 'application/octet-stream', size });
      return r.key;
    } catch (err) {
      if (isStorageError(err) && err.code === 'conflict') continue;
      throw err;
    }
  }
  return undefined;
}

/** How much of a sidecar's head is read to tell what it is. */
const HEAD_BYTES = 4096;

async function head(file: string): Promise<Buffer> {
  const fd = await open(file, 'r');
  try {
    const buf = Buffer.alloc(HEAD_BYTES);
    const { bytesRead } = await fd.read(buf, 0, HEAD_BYTES, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fd.close();
  }
}

/** The first bytes of each image format a thumbnail may be stored as (by its extension). */
const IMAGE_MAGIC: Record<string, (b: Buffer) => boolean> = {
  jpg: (b) => b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  png: (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  webp: (b) => b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP',
  gif: (b) => /^GIF8[79]a$/.test(b.toString('latin1', 0, 6)),
};
IMAGE_MAGIC.jpeg = IMAGE_MAGIC.jpg!;

/** Text as a subtitle file holds it: UTF-8 without NUL bytes, a BOM dropped; undefined otherwise. */
function subtitleText(b: Buffer): string | undefined {
  if (b.includes(0)) return undefined;
  const text = new TextDecoder('utf-8', { fatal: false }).decode(b);
  // A head cut inside a multi-byte character leaves one replacement at its end, not an invalid file.
  if (text.slice(0, -1).includes('\uFFFD')) return undefined;
  return text.replace(/^\uFEFF/, '');
}

/** WebVTT: the file starts with "WEBVTT", then a space, a tab or a line end (W3C WebVTT, file structure). */
const WEBVTT = /^WEBVTT(?:[ \t]|\r?\n|\r|$)/;
/** SRT: a cue number, then its timing line (`00:00:01,000 --> 00:00:02,500`). */
const SRT = /^\s*\d+[ \t]*\r?\n\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}[ \t]+-->[ \t]+\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}/;

/**
 * Whether a sidecar is what its name claims: a `.vtt` subtitle parses as
 * WebVTT and an `.srt` one as SRT (other subtitle formats cannot be told
 * apart from any text and are not delivered); a thumbnail starts with its
 * image format's signature (JPEG, PNG, WebP, GIF).
 */
export async function sidecarContentOk(file: SidecarFile, kind: 'subtitle' | 'thumbnail'): Promise<boolean> {
  const b = await head(file.path);
  if (kind === 'thumbnail') return IMAGE_MAGIC[file.ext]?.(b) ?? false;
  const text = subtitleText(b);
  if (text === undefined) return false;
  if (file.ext === 'vtt') return WEBVTT.test(text);
  if (file.ext === 'srt') return SRT.test(text);
  return false;
}

/** The sidecars delivered: their result fields, and the bytes stored (counted in the key's storage usage). */
export interface DeliveredSidecars {
  keys: { subtitleKey?: string; thumbnailKey?: string };
  bytes: number;
}

/** Fetch and upload the sidecars a job asked for. */
export async function deliverSidecars(
  spec: MediaJobSpec,
  ctx: { infoPath: string; workDir: string; jobId: string; mediaKey: string; destination: ResolvedDestination; ytdlp: YtDlpOptions; ffmpeg: string; logger: Logger },
): Promise<DeliveredSidecars> {
  const wants = sidecarWants(spec);
  const artwork = wants.thumbnail ? artworkUrl(spec) : undefined;
  const found = await fetchSidecars(ctx.infoPath, path.join(ctx.workDir, 'sidecars'), { ...wants, thumbnail: wants.thumbnail && !artwork }, { ...ctx.ytdlp, logger: ctx.logger });
  if (artwork) {
    const art = await fetchArtwork(artwork, path.join(ctx.workDir, 'artwork'), { ffmpeg: ctx.ffmpeg, logger: ctx.logger, ...(ctx.ytdlp.signal && { signal: ctx.ytdlp.signal }) });
    if (art) found.thumbnail = art;
  }
  const out: DeliveredSidecars = { keys: {}, bytes: 0 };
  for (const [field, file] of [['subtitleKey', found.subtitle], ['thumbnailKey', found.thumbnail]] as const) {
    if (!file) continue;
    if (!(await sidecarContentOk(file, field === 'subtitleKey' ? 'subtitle' : 'thumbnail').catch(() => false))) {
      ctx.logger.warn({ sidecar: field, ext: file.ext }, 'sidecar is not what it claims to be; the media is delivered without it');
      continue;
    }
    try {
      const key = await uploadSidecar(ctx.destination, ctx.mediaKey, file, ctx.jobId);
      if (!key) continue;
      out.keys[field] = key;
      out.bytes += (await stat(file.path)).size;
    } catch (err) {
      const e = err as { name?: unknown; code?: unknown };
      ctx.logger.warn({ sidecar: field, err: { name: e?.name, code: e?.code } }, 'sidecar upload failed; the media is delivered without it');
    }
  }
  return out;
}
