// A clip of an MP4 read from its URL fetches its index and the clip's bytes,
// each with a closed range, and nothing else (issue 37 item 7).
//
// Left to ffmpeg, a clip of a URL costs open-ended requests (`bytes=0-` for
// the index, `bytes=N-` for each seek) by the probe, the keyframe search and
// the mux. A server streams each one until the client's close reaches it:
// on a fast link megabytes per request pushed into socket buffers (two pairs
// of them through the egress proxy), and through a proxy that reads ahead
// for its downstream, up to the rest of the file per request. So here the
// runner reads the top-level boxes and the `moov` itself, writes them at
// their offsets into a sparse local file as long as the source, asks ffprobe
// over that file where the clip's packets lie (the index says; the holes
// are never decoded), fetches exactly those bytes into the same file, and
// the mux reads the file. Every request has an end, so what a server or any
// proxy in between can send is bounded by what was asked.
//
// Only for ISO BMFF (MP4, MOV, M4A) on a server that answers ranges, and
// only when the clip's bytes are a small part of the file; everything else
// is read from the URL as before (source-read.ts).
//
// A server without range support sends the file from its start whatever is
// asked, until the client closes, so each read of the URL costs at least
// the bytes before the clip's end, and on top of them what the path between
// (the server's socket, the egress proxy's two sockets, the reader's) holds
// when the reader is slower than the server: up to ~9 MB per connection on
// loopback through the egress proxy, measured; more the slower the reader
// (a loaded machine). Left to ffmpeg, a clip there took four such reads:
// the runner's look at the head, ffprobe's, the keyframe search's and the
// mux's, the last three by processes that hold the connection while they
// start and probe. For an MP4 with its index in front (the only kind such a
// server lets ffmpeg read, source-read.ts streamsFrontToBack) the runner
// reads the head on to the end of the index in its first look
// (readableFromUrl), finds the clip's span in it as above, and reads the
// file once from its start to the span's end into the window, closing
// there (fetchPrefixWindow): two reads, each by node as fast as it comes.
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { runProcess } from './child.js';
import { egressFetch } from './egress-proxy.js';
import { inputGuard } from './ffmpeg.js';
import type { Clip, YtDlpFormat } from './plan.js';

/** The largest index fetched: a moov of several hours of media is a few tens of MB. */
const MAX_INDEX_BYTES = 64 * 1024 * 1024;
/** Top-level boxes walked to find the index (ftyp, free, mdat, moov... a handful in practice). */
const MAX_BOXES = 64;
/**
 * What the first read of a source's head takes (source-read.ts
 * readableFromUrl, whose bytes the window starts from): ftyp, and for a
 * faststart file often the whole moov.
 */
export const HEAD_BYTES = 64 * 1024;
/**
 * Packets kept past the clip's end, seconds: the mux reads a few packets
 * past the end before it stops, and a packet read outside the window would
 * be a hole (zeros). With this margin every packet the output carries is
 * inside it.
 */
const MARGIN_SECONDS = 2;
/** A window larger than this share of the file saves too little to be worth a local copy: ffmpeg reads the URL. */
const MAX_WINDOW_SHARE = 0.5;

/** Byte ranges, end exclusive. */
export interface ByteSpan {
  start: number;
  end: number;
}

export interface BoxHeader {
  type: string;
  offset: number;
  /** Header and body; to the end of the file for a box of size 0. */
  size: number;
  headerSize: number;
}

/** The top-level box header at `at` in `buf` (which starts at file offset `base`); undefined when `buf` does not hold it all. */
export function boxAt(buf: Buffer, base: number, at: number, fileBytes: number): BoxHeader | undefined {
  const i = at - base;
  if (i < 0 || i + 8 > buf.length) return undefined;
  let size = buf.readUInt32BE(i);
  const type = buf.toString('latin1', i + 4, i + 8);
  let headerSize = 8;
  if (size === 1) {
    if (i + 16 > buf.length) return undefined;
    size = Number(buf.readBigUInt64BE(i + 8));
    headerSize = 16;
  } else if (size === 0) size = fileBytes - at;
  return { type, offset: at, size, headerSize };
}

/**
 * The byte span the mux of `clip` reads, from the packets ffprobe listed
 * after seeking to the clip's start (`stream,pts,dts,size,pos,flags` per
 * line, ffprobe's csv order). Its seek is the mux's (-ss): every stream to
 * the video keyframe at or before the start, as the index marks them. So the
 * span runs from the first packet listed to the last one before the clip's
 * end plus a margin (the mux reads a few packets past the end before it
 * stops). Undefined when the list does not start with the video at or
 * before the clip's start, or a line is unusable.
 */
export function clipSpan(csv: string, clip: Clip, videoIndex: number | undefined, startSeconds = 0): ByteSpan | undefined {
  const packets = csv.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => {
    const [stream, pts, dts, size, pos] = l.split(',');
    return { stream: Number(stream), t: Math.min(num(pts), num(dts)) - startSeconds, pos: Number(pos), size: Number(size) };
  });
  if (!packets.length || packets.some((p) => !Number.isSafeInteger(p.pos) || p.pos < 0 || !Number.isSafeInteger(p.size) || !Number.isFinite(p.t))) return undefined;
  const keyframe = videoIndex === undefined ? undefined : packets.find((p) => p.stream === videoIndex);
  if (videoIndex !== undefined && (!keyframe || keyframe.t > clip.start + 1e-3)) return undefined;
  const until = clip.end ?? Infinity;
  const kept = packets.filter((p) => p.t <= until + MARGIN_SECONDS);
  if (!kept.length) return undefined;
  return { start: Math.min(...kept.map((p) => p.pos)), end: Math.max(...kept.map((p) => p.pos + p.size)) };
}

const num = (s: string | undefined) => (s === undefined || s === '' || s === 'N/A' ? NaN : Number(s));

export interface WindowTools {
  ffprobe: string;
  socketTimeoutSeconds: number;
  /** Where a window given up on an error (not an abort) is told, at debug: the clip is read from the URL instead. */
  logger?: Logger;
}

/** A clip's window: the local file the mux reads instead of the URL, and what was fetched for it. */
export interface ClipWindow {
  path: string;
  /** Bytes fetched from the source: index, box headers and the clip's span. */
  fetchedBytes: number;
}

/**
 * Fetch what `clip` needs of the MP4 at `f.url` (`fileBytes` long) into a
 * sparse file under `dir`, starting from `head` when the caller read the
 * file's first HEAD_BYTES already. Undefined when this source is not for it
 * (not ISO BMFF, no index found, a range not answered as asked, the clip's
 * bytes a large share of the file, any error: a size the disk cannot
 * hold, say): the caller reads the URL as before. Throws only when aborted.
 */
export async function fetchClipWindow(
  f: YtDlpFormat, fileBytes: number, clip: Clip, dir: string, tools: WindowTools, signal?: AbortSignal, head?: Buffer,
): Promise<ClipWindow | undefined> {
  const file = windowPath(dir, f);
  return unlessFailed(file, f, tools, signal, async (fh) => {
    let fetched = 0;
    const fetchInto = async (span: ByteSpan, keep = false): Promise<Buffer | undefined> => {
      const got = await fetchRange(f, span, fh, { keep, fileBytes }, tools.socketTimeoutSeconds, signal);
      if (got) fetched += got.bytes;
      return got && (got.data ?? Buffer.alloc(0));
    };
    await fh.truncate(fileBytes);
    const given = head?.length === Math.min(HEAD_BYTES, fileBytes) ? head : undefined;
    if (given) {
      await fh.write(given, 0, given.length, 0);
      fetched += given.length;
    }
    const index = await fetchIndex(fileBytes, fetchInto, given);
    if (!index) return undefined;
    const probed = await probeIndex(tools.ffprobe, file, clip, signal);
    if (!probed || probed.end - probed.start > MAX_WINDOW_SHARE * fileBytes) return undefined;
    if (!(await fetchInto(probed))) return undefined;
    return { path: file, fetchedBytes: fetched };
  });
}

/**
 * The window of a clip of an MP4 on a server without range support, whose
 * index is in front: `index` is the file's first bytes through the `moov`
 * and the next box's header (frontIndexEnd), as the first look at the
 * source read them. The clip's span comes from the index; then one GET
 * from the file's start, read to the span's end and closed. Undefined when
 * the index does not place the clip, the span's end is past
 * MAX_WINDOW_SHARE of the file (a local copy of most of it saves nothing),
 * the read fails, or it is not of the same file (another length, or other
 * first bytes than `index`: the server's file changed between the reads),
 * or any error: the caller reads the URL as before. Throws only when
 * aborted.
 */
export async function fetchPrefixWindow(
  f: YtDlpFormat, fileBytes: number, clip: Clip, dir: string, tools: WindowTools, index: Buffer, signal?: AbortSignal,
): Promise<ClipWindow | undefined> {
  const file = windowPath(dir, f);
  return unlessFailed(file, f, tools, signal, async (fh) => {
    await fh.truncate(fileBytes);
    await fh.write(index, 0, index.length, 0);
    const probed = await probeIndex(tools.ffprobe, file, clip, signal);
    if (!probed || probed.end > MAX_WINDOW_SHARE * fileBytes) return undefined;
    const got = await fetchRange(f, { start: 0, end: probed.end }, fh, { fileBytes, prefix: index }, tools.socketTimeoutSeconds, signal);
    return got && { path: file, fetchedBytes: index.length + got.bytes };
  });
}

/**
 * `make` over the window's file, open for writing; undefined when it throws
 * but not for an abort (a truncate to a size the disk cannot hold, a write
 * that fails, ffprobe that cannot start): a window is a saving, and without
 * one the clip is read from the URL as before, so its failure must not fail
 * the job.
 */
async function unlessFailed(
  file: string, f: YtDlpFormat, tools: WindowTools, signal: AbortSignal | undefined, make: (fh: FileHandle) => Promise<ClipWindow | undefined>,
): Promise<ClipWindow | undefined> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(file, 'w+');
    return await make(fh);
  } catch (err) {
    if (signal?.aborted) throw err;
    tools.logger?.debug({ err: errFields(err), formatId: f.format_id }, 'clip window given up; the clip is read from the URL');
    return undefined;
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

/**
 * Where the index of an MP4 that has it in front ends: through the `moov`
 * and the next box's header (ffmpeg's mov demuxer reads on to it), as an
 * offset from the file's start. 'more' when `front` (the file's first
 * bytes) does not reach the `moov`'s header yet; undefined when the file is
 * not ISO BMFF, its media comes first, or the index is too large to fetch.
 */
export function frontIndexEnd(front: Buffer, fileBytes: number): number | 'more' | undefined {
  let at = 0;
  for (let n = 0; n < MAX_BOXES && at + 8 <= fileBytes; n++) {
    const box = boxAt(front, 0, at, fileBytes);
    if (!box) return 'more';
    if ((n === 0 && !ISO_BMFF_FIRST_BOXES.has(box.type)) || box.size < box.headerSize || box.type === 'mdat') return undefined;
    if (box.type === 'moov') return box.size > MAX_INDEX_BYTES || at + box.size > fileBytes ? undefined : Math.min(at + box.size + 16, fileBytes);
    at += box.size;
  }
  return undefined;
}

const windowPath = (dir: string, f: YtDlpFormat) => path.join(dir, `window-${f.format_id.replace(/[^A-Za-z0-9_-]/g, '_')}.mp4`);

/**
 * Walk the top-level boxes from the head (`given`, else fetched), fetching each header the head
 * does not hold, until the `moov`; fetch it whole. Undefined when the file
 * is not ISO BMFF or the index cannot be had within the bounds.
 */
async function fetchIndex(
  fileBytes: number, fetchInto: (s: ByteSpan, keep?: boolean) => Promise<Buffer | undefined>, given?: Buffer,
): Promise<true | undefined> {
  const head = given ?? await fetchInto({ start: 0, end: Math.min(HEAD_BYTES, fileBytes) }, true);
  if (!head) return undefined;
  const first = boxAt(head, 0, 0, fileBytes);
  if (!first || !ISO_BMFF_FIRST_BOXES.has(first.type)) return undefined;
  let at = 0;
  for (let n = 0; n < MAX_BOXES && at + 8 <= fileBytes; n++) {
    let box = boxAt(head, 0, at, fileBytes);
    if (!box) {
      const header = await fetchInto({ start: at, end: Math.min(at + 16, fileBytes) }, true);
      box = header && boxAt(header, at, at, fileBytes);
    }
    if (!box || box.size < box.headerSize) return undefined;
    if (box.type === 'moov') {
      if (box.size > MAX_INDEX_BYTES || at + box.size > fileBytes) return undefined;
      if (at + box.size > head.length && !(await fetchInto({ start: Math.max(at, head.length), end: at + box.size }))) return undefined;
      // ffmpeg's mov demuxer reads on to the next box header (the mdat's) after a moov in front.
      const next = at + box.size;
      if (next + 16 <= fileBytes && next + 16 > head.length && !(await fetchInto({ start: Math.max(next, head.length), end: next + 16 }))) return undefined;
      return true;
    }
    at += box.size;
  }
  return undefined;
}

/** Boxes an ISO BMFF file starts with (as source-read.ts streamsFrontToBack knows them). */
const ISO_BMFF_FIRST_BOXES = new Set(['ftyp', 'styp', 'moov', 'mdat', 'free', 'skip', 'wide', 'pnot']);

/**
 * Where the clip's packets lie, from the index alone: ffprobe over the
 * sparse file seeks as the mux will and lists the packets from there
 * (their positions and sizes come from the moov; the holes it reads
 * meanwhile are decoded into nothing that counts, and its complaints about
 * them are not logged). Not the packets' key flags: over holes the H.264
 * parser clears them.
 */
async function probeIndex(bin: string, file: string, clip: Clip, signal?: AbortSignal): Promise<ByteSpan | undefined> {
  const guard = inputGuard(file);
  if (!guard) return undefined;
  const streams = await runProcess(bin, ['-v', 'quiet', ...guard, '-show_entries', 'stream=index,codec_type:stream_disposition=attached_pic:format=start_time', '-of', 'json', '--', file], {
    captureStdout: true, signal, maxStdoutBytes: 1024 * 1024,
  });
  if (streams.exitCode !== 0) return undefined;
  let video: number | undefined;
  let start = 0;
  try {
    const j = JSON.parse(streams.stdout) as { streams?: { index: number; codec_type?: string; disposition?: { attached_pic?: number } }[]; format?: { start_time?: string } };
    video = j.streams?.find((s) => s.codec_type === 'video' && !s.disposition?.attached_pic)?.index;
    start = Number(j.format?.start_time) || 0;
  } catch {
    return undefined;
  }
  const packets = await runProcess(bin, [
    // -read_intervals takes the file's own timestamps; the clip counts from its start time.
    '-v', 'quiet', ...guard, '-read_intervals', `${(start + clip.start).toFixed(3)}%${clip.end !== undefined ? (start + clip.end + MARGIN_SECONDS + 1).toFixed(3) : ''}`,
    '-show_entries', 'packet=stream_index,pts_time,dts_time,pos,size,flags', '-of', 'csv=p=0', '--', file,
  ], { captureStdout: true, signal, maxStdoutBytes: 64 * 1024 * 1024 });
  if (packets.exitCode !== 0 || packets.stdoutTruncated) return undefined;
  return clipSpan(packets.stdout, clip, video, start);
}

/** What fetchRange expects of an answer besides its range. */
interface RangeCheck {
  /** Keep the bytes in memory (the head the boxes are read from). */
  keep?: boolean;
  /** The file's size as the first look found it: an answer for another size is of another file. */
  fileBytes: number;
  /** The file's first bytes as read before (a front index): an answer that starts otherwise is of another file. */
  prefix?: Buffer;
}

/**
 * GET `span` of the format's URL with a closed range, through the job's
 * egress proxy (its upstream session, as every request of the attempt), written at its offset into `fh` as it arrives; its bytes (kept in
 * memory only with `keep`, for the head the boxes are read from), or
 * undefined when the server does not answer exactly that range of the
 * same file (`check`) in time. A span from the file's start may come as the
 * whole file (200, a server without range support), read only to the
 * span's end. Reads no more than asked even from a server that sends more.
 */
async function fetchRange(
  f: YtDlpFormat, span: ByteSpan, fh: FileHandle, check: RangeCheck, timeoutSeconds: number, signal?: AbortSignal,
): Promise<{ bytes: number; data?: Buffer } | undefined> {
  const { keep = false, fileBytes, prefix } = check;
  const want = span.end - span.start;
  const abort = new AbortController();
  const stop = AbortSignal.any([abort.signal, ...(signal ? [signal] : [])]);
  let idle: NodeJS.Timeout | undefined;
  // A stalled server fails the window (and the clip is read from the URL), as ffmpeg's -rw_timeout would.
  const watchdog = () => {
    clearTimeout(idle);
    idle = setTimeout(() => abort.abort(), timeoutSeconds * 1000);
  };
  watchdog();
  try {
    const res = await egressFetch(f.url!, { headers: { ...(f.http_headers ?? {}), Range: `bytes=${span.start}-${span.end - 1}` }, signal: stop });
    const m = /^bytes (\d+)-(\d+)\/(\d+)\s*$/.exec(res.headers.get('content-range') ?? '');
    const exact = res.status === 206 && m && Number(m[1]) === span.start && Number(m[2]) === span.end - 1 && Number(m[3]) === fileBytes;
    const fromStart = res.status === 200 && span.start === 0 && /^(identity)?$/i.test(res.headers.get('content-encoding') ?? '')
      && Number(res.headers.get('content-length') ?? NaN) === fileBytes;
    if (!(exact || fromStart) || !res.body) {
      await res.body?.cancel().catch(() => undefined);
      return undefined;
    }
    const chunks: Buffer[] = [];
    const got = await readAtMost(res.body, want, async (take, at) => {
      watchdog();
      const from = span.start + at;
      // Thrown out of the read, which cancels the rest: undefined below.
      if (prefix && from < prefix.length && !take.subarray(0, prefix.length - from).equals(prefix.subarray(from, from + take.length))) throw new Error('not the file the index came from');
      await fh.write(take, 0, take.length, from);
      if (keep) chunks.push(Buffer.from(take));
    });
    if (got < want) return undefined;
    return { bytes: got, ...(keep ? { data: Buffer.concat(chunks) } : {}) };
  } catch (err) {
    if (signal?.aborted) throw err;
    return undefined;
  } finally {
    clearTimeout(idle);
  }
}

/**
 * Read `body` until `want` bytes or its end, handing each piece to `take`
 * with its offset from the start, and cancel the rest unread: a server that
 * sends more than it was asked for is never read past it. How many bytes
 * were taken.
 */
export async function readAtMost(
  body: ReadableStream<Uint8Array>, want: number, take: (piece: Buffer, at: number) => Promise<void> | void,
): Promise<number> {
  let got = 0;
  const reader = body.getReader();
  try {
    while (got < want) {
      const { done, value } = await reader.read();
      if (done) break;
      const piece = Buffer.from(value.buffer, value.byteOffset, Math.min(value.length, want - got));
      await take(piece, got);
      got += piece.length;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return got;
}
