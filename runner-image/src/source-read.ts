// Reading the chosen formats straight from their URLs (ADR 0007): ffmpeg
// fetches, muxes and feeds the upload in one pass, instead of yt-dlp writing
// every byte to disk and ffmpeg reading it back. Only for what ffmpeg fetches
// exactly as yt-dlp's own HTTP downloader would: one plain HTTP(S) file per
// format, with the headers the extractor gave it, certificates checked.
import { mkdir } from 'node:fs/promises';
import type { Logger } from '@mediajobs/lib/logger';
import { fetchClipWindow, fetchPrefixWindow, frontIndexEnd, HEAD_BYTES, readAtMost } from './clip-window.js';
import { egressFetch } from './egress-proxy.js';
import { ffprobe, httpInputArgs, type MuxInput } from './ffmpeg.js';
import type { Clip, FormatChoice, YtDlpFormat } from './plan.js';

export interface SourceReadTools {
  ffprobe: string;
  socketTimeoutSeconds: number;
  /** The deployment's extra yt-dlp options (YTDLP_ARGS). */
  ytdlpArgs?: readonly string[];
  /** Where a clip's window given up on an error is told (debug). */
  logger?: Logger;
}

/**
 * The largest front index the first look holds in memory for a clip's
 * window (two formats' at once, each with a copy while it is joined): a
 * moov of a few hours of media is a few MB; one larger is left to ffmpeg,
 * which reads the URL as before.
 */
const MAX_HELD_INDEX_BYTES = 8 * 1024 * 1024;

/** How many times ffmpeg reconnects to a source that drops the connection, at most this many seconds apart. */
const RECONNECT_DELAY_MAX_SECONDS = 5;

/**
 * yt-dlp options that change how its downloader connects, which ffmpeg
 * would not follow: with any of them in YTDLP_ARGS, yt-dlp downloads.
 * (Headers, user agent and cookies given to yt-dlp reach ffmpeg through
 * the formats' http_headers.)
 */
const TRANSPORT_OPTIONS = [
  '--proxy', '--geo-verification-proxy', '--source-address', '-4', '-6', '--force-ipv4', '--force-ipv6', '--no-check-certificate',
  '--no-check-certificates', '--legacy-server-connect', '--prefer-insecure', '--client-certificate', '--impersonate', '--limit-rate', '-r',
  '--throttled-rate', '--downloader', '--external-downloader', '--hls-use-mpegts', '--http-chunk-size',
];

/** Whether the deployment's yt-dlp options leave the transport to yt-dlp alone. */
export function transportIsDefault(ytdlpArgs: readonly string[]): boolean {
  return !ytdlpArgs.some((a) => TRANSPORT_OPTIONS.some((o) => a === o || a.startsWith(`${o}=`) || (o.startsWith('--client-certificate') && a.startsWith(o))));
}

/**
 * A format ffmpeg can read as yt-dlp would. Left to yt-dlp: segmented
 * protocols (HLS, DASH: its downloader retries each fragment), formats with
 * downloader options (YouTube's chunked ranges, which its servers need to
 * serve at full speed) or cookies kept apart from the headers (newer
 * yt-dlp).
 */
export function readsDirectly(f: YtDlpFormat): boolean {
  return Boolean(f.url) && (f.protocol === 'http' || f.protocol === 'https')
    && f.fragments === undefined && f.downloader_options === undefined && f.cookies === undefined;
}

/** ffmpeg input options for a format's URL: its headers, a socket timeout, reconnects, HTTP(S) only. */
export function sourceInputArgs(f: YtDlpFormat, timeoutSeconds: number): string[] {
  return [
    // With the network protocols only: the URL comes from a web page, and must not make ffmpeg open a local file.
    ...httpInputArgs(f.http_headers ?? {}, timeoutSeconds),
    // ffmpeg does not check certificates unless told (yt-dlp does); the system's CAs then apply.
    ...(f.protocol === 'https' ? ['-tls_verify', '1'] : []),
    // A dropped connection resumes with a range request, as yt-dlp's --retries would.
    '-reconnect', '1', '-reconnect_on_network_error', '1', '-reconnect_delay_max', String(RECONNECT_DELAY_MAX_SECONDS),
  ];
}

/** What the first request for a source's head tells: how ffmpeg can read it, and how large it is when the server says. */
export interface SourceHead {
  readable: 'seekable' | 'front-to-back' | false;
  /** The whole file's size: a partial answer's Content-Range total, a full answer's Content-Length. */
  bytes?: number;
  /** A seekable source's first HEAD_BYTES (or all of a smaller file), as its server sent them: a clip's window starts from them. */
  head?: Buffer;
  /**
   * With `index` asked, a front-to-back MP4's first bytes through its index
   * (clip-window.ts frontIndexEnd): a clip's window on a server without
   * range support starts from them.
   */
  index?: Buffer;
}

/**
 * Whether ffmpeg can read this source from its URL: the server answers
 * range requests (ffmpeg then seeks: to an MP4's index wherever it is, to a
 * clip's start), or, when it does not, the file can be read front to back
 * in one go. That rules out an MP4 or MOV whose index (`moov`) comes after
 * its media (`mdat`), as ffmpeg writes them unless told to `+faststart`:
 * without seeking, ffmpeg's demuxer finds the index only at the end, cannot
 * go back for the media, logs "partial file" and ends as if at the end of
 * the file, so a stream copy exits 0 with no frames. Such a source is
 * downloaded whole by yt-dlp instead. One request for the first 64 KiB,
 * with the format's headers; readable false when it cannot be made. The
 * same answer gives the file's size, which extractors of plain files do
 * not (the job's storage reservation, plan.ts expectedDeliveryBytes).
 * With `index` (a clip's read), a front-to-back MP4's answer is read on to
 * the end of its index (up to MAX_HELD_INDEX_BYTES), kept as `index`: the
 * window of a clip from a server without range support starts from it
 * instead of a read of its own. `timeoutSeconds` bounds each wait for the
 * server (the answer, then each piece of the body), not the whole read: an
 * index of some MB from a slow server takes longer than one wait.
 */
export async function readableFromUrl(f: YtDlpFormat, timeoutSeconds: number, signal?: AbortSignal, index = false): Promise<SourceHead> {
  const silence = new AbortController();
  let idle: NodeJS.Timeout | undefined;
  const heard = () => {
    clearTimeout(idle);
    idle = setTimeout(() => silence.abort(), timeoutSeconds * 1000);
  };
  heard();
  const abort = AbortSignal.any([silence.signal, ...(signal ? [signal] : [])]);
  try {
    // Through the job's egress (ADR 0014): the policy is checked on every redirect and resolved address.
    const res = await egressFetch(f.url!, { headers: { ...(f.http_headers ?? {}), Range: `bytes=0-${HEAD_BYTES - 1}` }, signal: abort });
    heard();
    const bytes = sizeFromHeaders(res.status, res.headers);
    const head = (readable: SourceHead['readable']): SourceHead => ({ readable, ...(bytes !== undefined ? { bytes } : {}) });
    if (res.status === 206) {
      // Its bytes were sent anyway (the range is closed): kept, a clip's window does not ask for them again.
      const first = await headOf(res, bytes, heard);
      return { ...head('seekable'), ...(first ? { head: first } : {}) };
    }
    if (res.status !== 200 || !res.body) {
      await res.body?.cancel();
      return head(false);
    }
    const front = await readFront(res.body, index ? bytes : undefined, heard);
    return { ...head(front.frontToBack && 'front-to-back'), ...(front.index ? { index: front.index } : {}) };
  } catch {
    return { readable: false };
  } finally {
    clearTimeout(idle);
  }
}

/** The body of a 206 to `bytes=0-65535` when it is exactly the file's first bytes; undefined otherwise (the window fetches them). */
async function headOf(res: Response, fileBytes: number | undefined, heard: () => void): Promise<Buffer | undefined> {
  const want = fileBytes === undefined ? 0 : Math.min(HEAD_BYTES, fileBytes);
  const m = /^bytes 0-(\d+)\//.exec(res.headers.get('content-range') ?? '');
  if (!want || !res.body || Number(m?.[1]) !== want - 1) {
    await res.body?.cancel().catch(() => undefined);
    return undefined;
  }
  const chunks: Buffer[] = [];
  const got = await readAtMost(res.body, want, (piece) => {
    heard();
    chunks.push(Buffer.from(piece));
  }).catch(() => 0);
  return got === want ? Buffer.concat(chunks) : undefined;
}

/**
 * The whole file's size from an answer to a range request: 206's
 * Content-Range total (`bytes 0-65535/1234567`; `*` is unknown), 200's
 * Content-Length unless the body is encoded (then it counts the encoding).
 */
export function sizeFromHeaders(status: number, headers: Headers): number | undefined {
  let n: number | undefined;
  if (status === 206) n = Number(/\/(\d+)\s*$/.exec(headers.get('content-range') ?? '')?.[1]);
  else if (status === 200 && /^(identity)?$/i.test(headers.get('content-encoding') ?? '')) n = Number(headers.get('content-length') ?? NaN);
  return n !== undefined && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/**
 * streamsFrontToBack on a body, read only as far as it takes to tell (a
 * few dozen bytes for most files); with `indexOf` (the file's size), a
 * front-to-back MP4 on to the end of its index (frontIndexEnd), whose bytes
 * come back as `index` when it is no larger than MAX_HELD_INDEX_BYTES. A
 * failure past the verdict loses the index only. `heard` on each piece.
 */
async function readFront(body: ReadableStream<Uint8Array>, indexOf: number | undefined, heard: () => void): Promise<{ frontToBack: boolean; index?: Buffer }> {
  let front = Buffer.alloc(0);
  let frontToBack: boolean | undefined;
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      heard();
      if (value) front = Buffer.concat([front, value]);
      frontToBack = streamsFrontToBack(front.subarray(0, HEAD_BYTES), !done && front.length < HEAD_BYTES);
      if (frontToBack === undefined) continue;
      if (!frontToBack || indexOf === undefined) return { frontToBack };
      // The moov's header is in the first HEAD_BYTES (streamsFrontToBack found it there).
      const end = frontIndexEnd(front, indexOf);
      if (end === 'more' && !done && front.length < HEAD_BYTES) continue;
      if (typeof end !== 'number' || end > MAX_HELD_INDEX_BYTES) return { frontToBack };
      const chunks: Buffer[] = [front];
      for (let got = front.length; got < end;) {
        const next = await reader.read();
        if (next.done) return { frontToBack };
        heard();
        chunks.push(Buffer.from(next.value.buffer, next.value.byteOffset, next.value.length));
        got += next.value.length;
      }
      return { frontToBack, index: Buffer.concat(chunks).subarray(0, end) };
    }
  } catch (err) {
    if (frontToBack === undefined) throw err;
    return { frontToBack };
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/**
 * Whether a file whose first bytes are `head` can be demuxed without
 * seeking. ISO BMFF (MP4, MOV, M4A; `ftyp` or another box first): only when
 * its index (`moov`) comes before the media (`mdat`), looking at the
 * top-level boxes the head covers; an index not found there counts as
 * behind the media. Anything else (Matroska, WebM, MPEG-TS, MP3, Ogg) is a
 * stream by design. With `more` (more bytes may follow), undefined when the
 * head does not tell yet.
 */
export function streamsFrontToBack(head: Buffer, more = false): boolean | undefined {
  const boxType = (at: number) => head.toString('latin1', at + 4, at + 8);
  if (head.length < 8) return more ? undefined : true;
  if (!ISO_BMFF_FIRST_BOXES.has(boxType(0))) return true;
  for (let at = 0; at + 8 <= head.length;) {
    const type = boxType(at);
    if (type === 'moov' || type === 'moof') return true;
    if (type === 'mdat') return false;
    let size = head.readUInt32BE(at);
    if (size === 1) {
      if (at + 16 > head.length) break;
      size = Number(head.readBigUInt64BE(at + 8));
    }
    if (size < 8) return false; // 0 = to the end of the file: nothing follows
    at += size;
  }
  return more ? undefined : false;
}

/** Boxes an ISO BMFF file starts with (ISO/IEC 14496-12: ftyp first; QuickTime files may open with these). */
const ISO_BMFF_FIRST_BOXES = new Set(['ftyp', 'styp', 'moov', 'mdat', 'free', 'skip', 'wide', 'pnot']);

/** readableInputs' answer: the inputs when ffmpeg reads every format from its URL, and the sizes the servers gave. */
export interface ReadableInputs {
  /** Undefined when the caller downloads with yt-dlp instead. */
  inputs?: MuxInput[];
  /** Each format's size (bytes) by format id, where its server said (SourceHead). */
  bytes: ReadonlyMap<string, number>;
}

/** A clip to read: each seekable MP4 among the formats is fetched as its index and the clip's bytes into `dir` (clip-window.ts). */
export interface ClipRead {
  clip: Clip;
  dir: string;
}

/**
 * The chosen formats as mux inputs read from their URLs (each probed there
 * by ffprobe, in parallel); no inputs when any of them is not for reading
 * directly or cannot be probed, and the caller downloads with yt-dlp. For a
 * clip, a seekable MP4 becomes its window (a local file holding the index
 * and the clip's bytes, every request with an end) where that works.
 */
export async function readableInputs(choice: FormatChoice, tools: SourceReadTools, signal?: AbortSignal, clipRead?: ClipRead): Promise<ReadableInputs> {
  if (!transportIsDefault(tools.ytdlpArgs ?? []) || !choice.formats.length || !choice.formats.every(readsDirectly)) return { bytes: new Map() };
  // Checked before the probe: ffprobe itself would read a whole unseekable MP4 to find its index.
  const heads = await Promise.all(choice.formats.map((f) => readableFromUrl(f, tools.socketTimeoutSeconds, signal, Boolean(clipRead))));
  const bytes = new Map(choice.formats.flatMap((f, i) => (heads[i]!.bytes !== undefined ? [[f.format_id, heads[i]!.bytes!] as const] : [])));
  if (!heads.every((h) => h.readable)) return { bytes };
  if (clipRead) await mkdir(clipRead.dir, { recursive: true });
  const inputs = await Promise.all(choice.formats.map(async (f, i): Promise<MuxInput | undefined> => {
    const head = heads[i]!;
    const carriesAudio = f.format_id === choice.audioFrom;
    const window = !clipRead || head.bytes === undefined ? undefined
      : head.readable === 'seekable' ? await fetchClipWindow(f, head.bytes, clipRead.clip, clipRead.dir, tools, signal, head.head)
        : head.index ? await fetchPrefixWindow(f, head.bytes, clipRead.clip, clipRead.dir, tools, head.index, signal)
          : undefined;
    if (window) {
      const p = await ffprobe(tools.ffprobe, window.path, signal);
      if (p.ok) return { path: window.path, probed: p.probed, carriesAudio, seekable: true };
    }
    const inputArgs = sourceInputArgs(f, tools.socketTimeoutSeconds);
    const p = await ffprobe(tools.ffprobe, f.url!, signal, inputArgs);
    if (!p.ok) return undefined;
    return { path: f.url!, inputArgs, probed: p.probed, carriesAudio, seekable: head.readable === 'seekable' };
  }));
  return inputs.every((i) => i !== undefined) ? { inputs: inputs as MuxInput[], bytes } : { bytes };
}
