// A live HLS stream produced in real time by ffmpeg (`-re`, lavfi test
// sources, `-f hls` without an end list) and served over local HTTP: the
// playlist grows a segment per `segmentSeconds`, old segments drop out of the
// window (delete_segments), and no EXT-X-ENDLIST ever appears, exactly what a
// recorder meets on the web. The server remembers which segments were
// fetched, so tests can tell a recording from the live point from one from
// the start, and whether a recorder has stopped.
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
  /** Resolution of the generated video. */
  width?: number;
  height?: number;
}

export interface LiveStream {
  /** The media playlist URL. */
  url: string;
  /** Segment file names fetched so far, in request order. */
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
  const dir = await mkdtemp(join(tmpdir(), 'mediajobs-live-'));
  const playlist = join(dir, 'live.m3u8');
  const segmentRequests: string[] = [];
  let ffmpeg: ChildProcess | undefined;
  let ffmpegStartedAt = 0;
  let stopped = false;

  const startFfmpeg = () => {
    if (stopped) return;
    ffmpegStartedAt = Date.now();
    const flags = ['append_list', 'omit_endlist', 'temp_file', ...(listSize > 0 ? ['delete_segments'] : [])].join('+');
    ffmpeg = spawn('ffmpeg', [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-re',
      '-f', 'lavfi', '-i', `testsrc2=size=${width}x${height}:rate=25`,
      '-f', 'lavfi', '-i', 'sine=frequency=523:sample_rate=44100',
      '-map', '0:v', '-map', '1:a',
      // A keyframe at every segment boundary, as live encoders do.
      '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', String(25 * seg), '-keyint_min', String(25 * seg), '-sc_threshold', '0',
      '-c:a', 'aac', '-b:a', '64k',
      '-f', 'hls', '-hls_time', String(seg), '-hls_list_size', String(listSize), '-hls_flags', flags,
      '-hls_segment_filename', join(dir, 's%05d.ts'), playlist,
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
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
  const server: Server = createServer((req, res) => {
    const name = basename(decodeURIComponent(new URL(req.url ?? '/', 'http://localhost').pathname));
    const file = join(dir, name);
    const notFound = () => res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    const isPlaylist = name === 'live.m3u8';
    if (!isPlaylist && !/^s\d{5}\.ts$/.test(name)) return notFound();
    if (!isPlaylist) segmentRequests.push(name);
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
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/live.m3u8`;

  const ready = (async () => {
    for (;;) {
      if (stopped) throw new Error('live stream stopped before it was ready');
      const first = await stat(playlist).then((s) => s.size > 0, () => false);
      if (first) return;
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
