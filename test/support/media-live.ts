// A live HLS stream produced in real time by ffmpeg (`-re`, lavfi test
// sources, `-f hls` without an end list) and served over local HTTP: the
// playlist grows a segment per `segmentSeconds`, old segments drop out of the
// window (delete_segments), and no EXT-X-ENDLIST ever appears, exactly what a
// recorder meets on the web. The server remembers which segments were
// fetched, so tests can tell a recording from the live point from one from
// the start, and whether a recorder has stopped.
//
// With `variants` the stream is a live ladder, as live platforms serve it: a
// master playlist naming one video-only media playlist per resolution and a
// separate AAC audio rendition (EXT-X-MEDIA), all cut from the same encode so
// the variants stay aligned segment for segment.
import { spawn, type ChildProcess } from 'node:child_process';
import { createReadStream, rmSync } from 'node:fs';
import { mkdtemp, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

export interface LiveStreamOptions {
  /** Target segment duration (HLS -hls_time). */
  segmentSeconds?: number;
  /** Segments the playlist lists (its DVR window); 0 keeps every segment from the start. */
  listSize?: number;
  /** The stream is "scheduled": its playlist answers 404 until this long after start. */
  startDelayMs?: number;
  /** Resolution of the generated video (a single muxed rendition). */
  width?: number;
  height?: number;
  /** A live ladder instead: one video-only rendition per entry, plus one audio rendition. */
  variants?: readonly LiveVariant[];
}

export interface LiveVariant {
  /** Directory and playlist name of the rendition (`240p`). */
  name: string;
  width: number;
  height: number;
}

export interface LiveStream {
  /** The media playlist URL; the master playlist's for a ladder. */
  url: string;
  /** Segment file names fetched so far, in request order (`<variant>/<segment>` for a ladder). */
  readonly segmentRequests: readonly string[];
  /** Resolves once the playlist is served (after startDelayMs and ffmpeg's first segment). */
  readonly ready: Promise<void>;
  /** Seconds of media produced so far (approximately: wall time since ffmpeg started). */
  elapsedSeconds(): number;
  stop(): Promise<void>;
}

export async function startLiveStream(opts: LiveStreamOptions = {}): Promise<LiveStream> {
  const seg = opts.segmentSeconds ?? 1;
  const listSize = opts.listSize ?? 6;
  const width = opts.width ?? 320;
  const height = opts.height ?? 240;
  const variants = opts.variants ?? [];
  const ladder = variants.length > 0;
  const dir = await mkdtemp(join(tmpdir(), 'mediajobs-live-'));
  // What the player opens first: the media playlist, or the ladder's master.
  const entry = join(dir, ladder ? 'master.m3u8' : 'live.m3u8');
  // Every playlist must be there before the stream counts as started.
  const playlists = ladder ? [entry, ...[...variants.map((v) => v.name), 'audio'].map((n) => join(dir, n, 'live.m3u8'))] : [entry];
  const segmentRequests: string[] = [];
  let ffmpeg: ChildProcess | undefined;
  let ffmpegStartedAt = 0;
  let stopped = false;

  const startFfmpeg = () => {
    if (stopped) return;
    ffmpegStartedAt = Date.now();
    const flags = ['append_list', 'omit_endlist', 'temp_file', ...(listSize > 0 ? ['delete_segments'] : [])].join('+');
    // A keyframe at every segment boundary, as live encoders do.
    const x264 = ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', String(25 * seg), '-keyint_min', String(25 * seg), '-sc_threshold', '0'];
    const hls = ['-f', 'hls', '-hls_time', String(seg), '-hls_list_size', String(listSize), '-hls_flags', flags];
    const source = (w: number, h: number) => [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-re',
      '-f', 'lavfi', '-i', `testsrc2=size=${w}x${h}:rate=25`,
      '-f', 'lavfi', '-i', 'sine=frequency=523:sample_rate=44100',
    ];
    const audio = ['-c:a', 'aac', '-b:a', '64k'];
    let args: string[];
    if (ladder) {
      const top = variants.reduce((a, v) => (v.width * v.height > a.width * a.height ? v : a));
      const split = `[0:v]split=${variants.length}${variants.map((_, i) => `[s${i}]`).join('')}`;
      const scales = variants.map((v, i) => `[s${i}]scale=${v.width}:${v.height}[v${i}]`);
      args = [
        ...source(top.width, top.height),
        '-filter_complex', [split, ...scales].join(';'),
        ...variants.flatMap((_, i) => ['-map', `[v${i}]`]), '-map', '1:a',
        ...x264, ...audio, ...hls,
        '-master_pl_name', 'master.m3u8',
        '-var_stream_map', [...variants.map((v, i) => `v:${i},agroup:aud,name:${v.name}`), 'a:0,agroup:aud,name:audio,default:yes'].join(' '),
        '-hls_segment_filename', join(dir, '%v', 's%05d.ts'), join(dir, '%v', 'live.m3u8'),
      ];
    } else {
      args = [
        ...source(width, height),
        '-map', '0:v', '-map', '1:a', ...x264, ...audio, ...hls,
        '-hls_segment_filename', join(dir, 's%05d.ts'), entry,
      ];
    }
    ffmpeg = spawn('ffmpeg', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    ffmpeg.stderr?.resume();
  };
  const killFfmpeg = () => {
    if (ffmpeg && ffmpeg.exitCode === null && ffmpeg.signalCode === null) ffmpeg.kill('SIGKILL');
  };
  const onExit = () => {
    killFfmpeg();
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);

  const startTimer = setTimeout(startFfmpeg, opts.startDelayMs ?? 0);
  // The ladder's renditions live in a directory each; names are checked
  // against these shapes, so a request can never reach outside `dir`.
  const subdirs = new Set(ladder ? [...variants.map((v) => v.name), 'audio'] : []);
  const server: Server = createServer((req, res) => {
    const parts = decodeURIComponent(new URL(req.url ?? '/', 'http://localhost').pathname).split('/').filter(Boolean);
    const notFound = () => res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    const name = parts.at(-1) ?? '';
    const sub = parts.length === 2 && subdirs.has(parts[0]!) ? parts[0]! : undefined;
    if (parts.length > (sub ? 2 : 1)) return notFound();
    const isPlaylist = sub ? name === 'live.m3u8' : name === basename(entry);
    if (!isPlaylist && !(/^s\d{5}\.ts$/.test(name) && (sub || !ladder))) return notFound();
    if (!isPlaylist) segmentRequests.push(sub ? `${sub}/${name}` : name);
    const file = sub ? join(dir, sub, name) : join(dir, name);
    stat(file).then((st) => {
      res.writeHead(200, {
        'content-type': isPlaylist ? 'application/vnd.apple.mpegurl' : 'video/mp2t',
        'content-length': st.size,
        'cache-control': 'no-store',
      });
      if (req.method === 'HEAD') return void res.end();
      createReadStream(file).on('error', () => res.destroy()).pipe(res);
    }, notFound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/${basename(entry)}`;

  const ready = (async () => {
    for (;;) {
      if (stopped) throw new Error('live stream stopped before it was ready');
      const written = await Promise.all(playlists.map((p) => stat(p).then((s) => s.size > 0, () => false)));
      if (written.every(Boolean)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  ready.catch(() => undefined);

  return {
    url,
    get segmentRequests() {
      return segmentRequests;
    },
    ready,
    elapsedSeconds: () => (ffmpegStartedAt ? (Date.now() - ffmpegStartedAt) / 1000 : 0),
    async stop() {
      stopped = true;
      clearTimeout(startTimer);
      killFfmpeg();
      process.removeListener('exit', onExit);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
