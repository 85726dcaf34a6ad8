// Test media made with ffmpeg and served over local HTTP, so the runner and
// the end-to-end tests exercise the real yt-dlp generic extractor and ffmpeg
// without any network beyond loopback.
//
// Generation runs once per checkout (a few seconds of CPU: tiny sizes,
// ultrafast x264), kept by content hash (fixture-cache.ts), and every server
// started afterwards shares the files.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Transform } from 'node:stream';
import { promisify } from 'node:util';
import { cachedFixture } from './fixture-cache.js';

const run = promisify(execFile);

/** What the generated media is, so tests can assert against it. */
export const MEDIA = {
  mp4: { path: 'video.mp4', durationSeconds: 3, width: 320, height: 240 },
  hls: {
    path: 'hls/master.m3u8',
    durationSeconds: 4,
    // Video-only renditions plus one separate audio rendition (EXT-X-MEDIA),
    // so a download has a real video+audio mux to do.
    renditions: [
      { name: '144p', width: 256, height: 144 },
      { name: '360p', width: 640, height: 360 },
      { name: '720p', width: 1280, height: 720 },
    ],
  },
  /**
   * Adaptive ladders for the format, codec, resolution and clipping rules,
   * each served as DASH (`manifest.mpd`) and HLS (`master.m3u8`, fragmented
   * MP4) over the same segments, both read by yt-dlp's generic extractor.
   * Video renditions are video-only; the audio renditions are separate and
   * tell each other apart by codec, bitrate and channel count.
   */
  ladder: {
    durationSeconds: 6,
    fps: 25,
    /** A keyframe every second: a clip starting on a whole second can be copied exactly, any other start cannot. */
    keyframeSeconds: 1,
    horizontal: {
      dir: 'ladder-h',
      width: 1920, height: 1080,
      renditions: [
        { width: 256, height: 144 }, { width: 426, height: 240 }, { width: 640, height: 360 },
        { width: 854, height: 480 }, { width: 1280, height: 720 }, { width: 1920, height: 1080 },
      ],
    },
    // Vertical, and with gaps on purpose: no 144 (so `144` finds every
    // format above it) and no 480 (so `480` must settle for 360x640, which a
    // runner comparing heights instead of the shorter side would skip).
    vertical: {
      dir: 'ladder-v',
      width: 1080, height: 1920,
      renditions: [{ width: 240, height: 426 }, { width: 360, height: 640 }, { width: 720, height: 1280 }, { width: 1080, height: 1920 }],
    },
    audio: [
      { codec: 'aac', kbps: 64, channels: 1 },
      { codec: 'aac', kbps: 128, channels: 2 },
      { codec: 'opus', kbps: 48, channels: 1 },
    ],
  },
  /** Last-Modified of every file: yt-dlp's generic extractor turns it into upload_date. */
  lastModified: new Date(Date.UTC(2024, 2, 15, 12, 30, 0)),
} as const;

export type LadderName = 'horizontal' | 'vertical';

export interface MediaServer {
  baseUrl: string;
  /** A 3 s 320x240 H.264 + AAC MP4. */
  mp4Url: string;
  /** An HLS master playlist: 144p/360p/720p video-only renditions and one AAC audio rendition. */
  hlsUrl: string;
  /** The DASH manifest and HLS master playlist of each ladder (MEDIA.ladder). */
  ladders: Record<LadderName, { dash: string; hls: string }>;
  /** A URL on this server that answers 404. */
  notFoundUrl: string;
  /** A URL that answers 500. */
  serverErrorUrl: string;
  /** A URL whose response trickles out slowly (for cancellation tests); `seconds` long. */
  slowUrl(seconds: number): string;
  /**
   * The MP4 from a server that answers ffmpeg's requests (which carry
   * `Icy-MetaData: 1`; yt-dlp's do not) with 403 after the first `allowed`
   * of them, and yt-dlp's as usual: a source only yt-dlp's downloader gets.
   */
  refusesFfmpegUrl(allowed: number): string;
  /** Number of requests served so far. */
  readonly requests: number;
  /** The path of every file request so far, in order (`/norange/` prefix included). */
  readonly paths: readonly string[];
  /** Body bytes sent so far for file paths starting with `prefix` (all when absent). */
  bytesSent(prefix?: string): number;
  /** The same file at `/norange/<path>`: served as a server without range support does (no Accept-Ranges, Range ignored). */
  noRangeUrl(path: string): string;
  /** The same file at `/unsized/<path>`: without range support and without its size (no Content-Length: chunked), so nobody knows it beforehand. */
  unsizedUrl(path: string): string;
  stop(): Promise<void>;
}

let generated: Promise<string> | undefined;

/** The generated media (made at most once per checkout); resolves to the directory holding it, never to be written. */
export function generateMedia(): Promise<string> {
  generated ??= cachedFixture('media', import.meta.url, generate).catch((err: unknown) => {
    generated = undefined;
    throw err;
  });
  return generated;
}

async function ffmpeg(args: string[]): Promise<void> {
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', ...args], { maxBuffer: 1 << 20 });
}

async function generate(dir: string): Promise<void> {
  const { mp4, hls } = MEDIA;
  // Keyframe every second so HLS segments cut cleanly at 1 s.
  const x264 = ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', '25', '-keyint_min', '25', '-sc_threshold', '0'];
  await ffmpeg([
    '-f', 'lavfi', '-i', `testsrc=size=${mp4.width}x${mp4.height}:rate=25:duration=${mp4.durationSeconds}`,
    '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=44100:duration=${mp4.durationSeconds}`,
    ...x264, '-c:a', 'aac', '-b:a', '64k', '-shortest', '-movflags', '+faststart',
    join(dir, mp4.path),
  ]);

  await mkdir(join(dir, 'hls'), { recursive: true });
  const [r0, r1, r2] = hls.renditions;
  await ffmpeg([
    '-f', 'lavfi', '-i', `testsrc2=size=${r2.width}x${r2.height}:rate=25:duration=${hls.durationSeconds}`,
    '-f', 'lavfi', '-i', `sine=frequency=660:sample_rate=48000:duration=${hls.durationSeconds}`,
    '-filter_complex', `[0:v]split=3[a][b][c];[a]scale=${r0.width}:${r0.height}[v0];[b]scale=${r1.width}:${r1.height}[v1];[c]copy[v2]`,
    '-map', '[v0]', '-map', '[v1]', '-map', '[v2]', '-map', '1:a',
    ...x264, '-b:v:0', '150k', '-b:v:1', '500k', '-b:v:2', '1500k', '-c:a', 'aac', '-b:a', '96k',
    '-f', 'hls', '-hls_time', '1', '-hls_playlist_type', 'vod',
    '-hls_segment_filename', join(dir, 'hls', '%v', 'seg%03d.ts'),
    '-master_pl_name', 'master.m3u8',
    '-var_stream_map', `v:0,agroup:aud,name:${r0.name} v:1,agroup:aud,name:${r1.name} v:2,agroup:aud,name:${r2.name} a:0,agroup:aud,name:audio,default:yes`,
    join(dir, 'hls', '%v', 'index.m3u8'),
  ]);

  await Promise.all([generateLadder(dir, 'horizontal', x264), generateLadder(dir, 'vertical', x264)]);
}

/**
 * One ladder in one ffmpeg run: ffmpeg's DASH muxer writes the MPD and, with
 * hls_playlist, an HLS master and media playlists over the same fragmented
 * MP4 segments. Opus is forced into MP4 segments too (dash_segment_type),
 * where the muxer would otherwise pick WebM for it.
 */
async function generateLadder(root: string, name: LadderName, x264: string[]): Promise<void> {
  const { durationSeconds: d, fps, [name]: ladder, audio } = MEDIA.ladder;
  const out = join(root, ladder.dir);
  await mkdir(out, { recursive: true });
  const n = ladder.renditions.length;
  const video = ladder.renditions.map((r, i) => `[s${i}]scale=${r.width}:${r.height}[v${i}]`).join(';');
  const sound = audio.map((a, i) => `[t${i}]aformat=channel_layouts=${a.channels === 1 ? 'mono' : 'stereo'}[a${i}]`).join(';');
  const split = (label: string, count: number) => Array.from({ length: count }, (_, i) => `[${label}${i}]`).join('');
  const aac = audio.map((a, i) => (a.codec === 'aac' ? n + i : -1)).filter((i) => i >= 0);
  const opus = audio.map((a, i) => (a.codec === 'opus' ? n + i : -1)).filter((i) => i >= 0);
  await ffmpeg([
    '-f', 'lavfi', '-i', `testsrc2=size=${ladder.width}x${ladder.height}:rate=${fps}:duration=${d}`,
    '-f', 'lavfi', '-i', `sine=frequency=550:sample_rate=48000:duration=${d}`,
    '-filter_complex', `[0:v]split=${n}${split('s', n)};${video};[1:a]asplit=${audio.length}${split('t', audio.length)};${sound}`,
    ...ladder.renditions.map((_, i) => ['-map', `[v${i}]`]).flat(),
    ...audio.map((_, i) => ['-map', `[a${i}]`]).flat(),
    ...x264,
    // Bitrate grows with the frame so yt-dlp's tbr orders the ladder as a real one does.
    ...ladder.renditions.map((r, i) => [`-b:v:${i}`, `${Math.round((r.width * r.height) / 800)}k`]).flat(),
    ...audio.map((a, i) => [`-c:a:${i}`, a.codec === 'opus' ? 'libopus' : 'aac', `-b:a:${i}`, `${a.kbps}k`]).flat(),
    '-f', 'dash', '-dash_segment_type', 'mp4', '-seg_duration', String(MEDIA.ladder.keyframeSeconds),
    '-use_template', '1', '-use_timeline', '0', '-hls_playlist', '1',
    '-adaptation_sets', `id=0,streams=v id=1,streams=${aac.join(',')} id=2,streams=${opus.join(',')}`,
    join(out, 'manifest.mpd'),
  ]);
}

const CONTENT_TYPES: Record<string, string> = {
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.m4a': 'audio/mp4',
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.ts': 'video/mp2t',
  '.vtt': 'text/vtt',
  '.mpd': 'application/dash+xml',
  '.m4s': 'video/iso.segment',
};

/** Parse a single `bytes=a-b` range; undefined when absent, 'invalid' when unsatisfiable. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'invalid' | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'invalid';
  let start: number;
  let end: number;
  if (m[1] === '') {
    // Suffix range: the last N bytes.
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) return 'invalid';
  return { start, end };
}

export interface MediaServerOptions {
  /** Serve the files under this directory instead of the generated media (benchmarks bring larger media). */
  root?: string;
  /**
   * Send file bodies at most this fast, bytes per second, shared by all
   * responses: loopback moves a gigabyte a second, which no media source
   * does, and a benchmark wants to see a job as a network would pace it.
   */
  bytesPerSecond?: number;
}

/** Start a media server on an ephemeral loopback port. */
export async function startMediaServer(opts: MediaServerOptions = {}): Promise<MediaServer> {
  const root = opts.root ?? (await generateMedia());
  const pace = opts.bytesPerSecond ? pacer(opts.bytesPerSecond) : undefined;
  let requests = 0;
  /** ffmpeg's requests per refusing URL (refusesFfmpegUrl). */
  const ffmpegRequests = new Map<string, number>();
  const lastModified = MEDIA.lastModified.toUTCString();

  const paths: string[] = [];
  const sent = new Map<string, number>();
  const serveFile = async (req: IncomingMessage, res: ServerResponse, rel: string, ranges = true, sized = true) => {
    const file = normalize(join(root, rel));
    if (!file.startsWith(root + sep)) return notFound(res);
    let size: number;
    try {
      const st = await stat(file);
      if (!st.isFile()) return notFound(res);
      size = st.size;
    } catch {
      return notFound(res);
    }
    const type = CONTENT_TYPES[extname(file)] ?? 'application/octet-stream';
    const range = ranges ? parseRange(req.headers.range, size) : undefined;
    const headers: Record<string, string | number> = { 'content-type': type, ...(ranges ? { 'accept-ranges': 'bytes' } : {}), 'last-modified': lastModified };
    if (range === 'invalid') {
      res.writeHead(416, { ...headers, 'content-range': `bytes */${size}` }).end();
      return;
    }
    const { start, end } = range ?? { start: 0, end: size - 1 };
    res.writeHead(range ? 206 : 200, {
      ...headers,
      ...(sized ? { 'content-length': end - start + 1 } : {}),
      ...(range ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}),
    });
    if (req.method === 'HEAD') return void res.end();
    const body = createReadStream(file, { start, end }).on('error', () => res.destroy());
    const key = `/${!sized ? 'unsized/' : ranges ? '' : 'norange/'}${rel}`;
    paths.push(key);
    body.on('data', (chunk: Buffer | string) => sent.set(key, (sent.get(key) ?? 0) + chunk.length));
    // A client that stops reading (ffmpeg after a seek) ends the read, as a real server's would.
    res.once('close', () => body.destroy());
    if (pace) body.pipe(pace()).on('error', () => res.destroy()).pipe(res);
    else body.pipe(res);
  };

  // A valid MP4 sent slowly: the full size is announced, then the body
  // trickles out over `seconds`, so a download is reliably in flight.
  const serveSlow = async (req: IncomingMessage, res: ServerResponse, seconds: number) => {
    const file = join(root, MEDIA.mp4.path);
    const { size } = await stat(file);
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': size, 'last-modified': lastModified });
    if (req.method === 'HEAD') return void res.end();
    let closed = false;
    res.on('close', () => (closed = true));
    const ticks = Math.max(1, seconds * 10);
    const chunk = Math.ceil(size / ticks);
    const fh = await open(file, 'r');
    try {
      for (let offset = 0; offset < size && !closed; offset += chunk) {
        const buf = Buffer.alloc(Math.min(chunk, size - offset));
        await fh.read(buf, 0, buf.length, offset);
        res.write(buf);
        await delay(100);
      }
    } finally {
      await fh.close();
    }
    res.end();
  };

  const server: Server = createServer((req, res) => {
    requests++;
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = decodeURIComponent(url.pathname);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
      return;
    }
    if (path === '/error.mp4') {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error');
      return;
    }
    const refusing = /^\/refuses-ffmpeg\/(\d+)\/([^/]+)\/video\.mp4$/.exec(path);
    if (refusing && req.headers['icy-metadata'] !== undefined) {
      const seen = (ffmpegRequests.get(refusing[2]!) ?? 0) + 1;
      ffmpegRequests.set(refusing[2]!, seen);
      if (seen > Number(refusing[1])) {
        res.writeHead(403, { 'content-type': 'text/plain' }).end('forbidden');
        return;
      }
    }
    if (refusing) {
      serveFile(req, res, MEDIA.mp4.path).catch(() => res.destroy());
      return;
    }
    const slow = /^\/slow\/(\d+)\/video\.mp4$/.exec(path);
    const noRange = /^\/norange\/(.+)$/.exec(path);
    const unsized = /^\/unsized\/(.+)$/.exec(path);
    const done = slow ? serveSlow(req, res, Number(slow[1]))
      : noRange ? serveFile(req, res, noRange[1]!, false)
        : unsized ? serveFile(req, res, unsized[1]!, false, false)
          : serveFile(req, res, path.replace(/^\/+/, ''));
    done.catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;

  return {
    baseUrl,
    mp4Url: `${baseUrl}/${MEDIA.mp4.path}`,
    hlsUrl: `${baseUrl}/${MEDIA.hls.path}`,
    ladders: {
      horizontal: { dash: `${baseUrl}/${MEDIA.ladder.horizontal.dir}/manifest.mpd`, hls: `${baseUrl}/${MEDIA.ladder.horizontal.dir}/master.m3u8` },
      vertical: { dash: `${baseUrl}/${MEDIA.ladder.vertical.dir}/manifest.mpd`, hls: `${baseUrl}/${MEDIA.ladder.vertical.dir}/master.m3u8` },
    },
    notFoundUrl: `${baseUrl}/missing/video.mp4`,
    serverErrorUrl: `${baseUrl}/error.mp4`,
    slowUrl: (seconds: number) => `${baseUrl}/slow/${Math.max(1, Math.round(seconds))}/video.mp4`,
    refusesFfmpegUrl: (allowed: number) => `${baseUrl}/refuses-ffmpeg/${allowed}/${randomUUID()}/video.mp4`,
    get requests() {
      return requests;
    },
    get paths() {
      return paths;
    },
    bytesSent: (prefix = '/') => [...sent].filter(([k]) => k.startsWith(prefix)).reduce((n, [, b]) => n + b, 0),
    noRangeUrl: (path: string) => `${baseUrl}/norange/${path.replace(/^\/+/, '')}`,
    unsizedUrl: (path: string) => `${baseUrl}/unsized/${path.replace(/^\/+/, '')}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A shared rate limit: each response's chunks wait for their turn on one
 * clock, so concurrent downloads share the bandwidth as they would a link.
 */
function pacer(bytesPerSecond: number): () => Transform {
  let freeAt = performance.now();
  return () =>
    new Transform({
      transform(chunk: Buffer, _enc, cb) {
        const now = performance.now();
        freeAt = Math.max(freeAt, now) + (chunk.length / bytesPerSecond) * 1000;
        setTimeout(() => cb(null, chunk), Math.max(0, freeAt - now));
      },
    });
}

function notFound(res: ServerResponse): void {
  res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
}

/**
 * A URL nothing listens on: bind an ephemeral port, note it, close it. The
 * kernel does not hand the same port out again at once, so connecting is
 * refused.
 */
export async function unreachableUrl(path = '/video.mp4'): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}${path}`;
}
