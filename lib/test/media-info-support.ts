// Local servers for the media-info tests (lib and gateway), all on loopback:
// a static server that records every path it serves (to prove nothing but
// manifests was read), a page that never finishes (for the hard bounds), a
// forward proxy that records sessions, and a look at running processes.
import { execFile } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, normalize, sep } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closer(server: Server, sockets: Set<Socket>): () => Promise<void> {
  return () => new Promise<void>((resolve) => {
    for (const s of sockets) s.destroy();
    server.close(() => resolve());
  });
}

function track(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return sockets;
}

/** A scratch directory for generated media. */
export function scratchDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'mediajobs-media-info-'));
}

/**
 * An HLS ladder made with ffmpeg under `<root>/<name>/`: a master playlist
 * (with RESOLUTION, which is where yt-dlp's generic extractor gets
 * dimensions) over 1 s segments of each rendition. Returns the master
 * playlist's path relative to `root`.
 */
export async function makeHls(root: string, name: string, renditions: { width: number; height: number }[], seconds = 2): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  const maxW = Math.max(...renditions.map((r) => r.width));
  const maxH = Math.max(...renditions.map((r) => r.height));
  const split = renditions.map((_r, i) => `[s${i}]`).join('');
  const scales = renditions.map((r, i) => `[s${i}]scale=${r.width}:${r.height}[v${i}]`).join(';');
  await run('ffmpeg', [
    '-hide_banner', '-loglevel', 'error', '-nostdin', '-y',
    '-f', 'lavfi', '-i', `testsrc2=size=${maxW}x${maxH}:rate=25:duration=${seconds}`,
    '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${seconds}`,
    '-filter_complex', `[0:v]split=${renditions.length}${split};${scales}`,
    ...renditions.flatMap((_r, i) => ['-map', `[v${i}]`, '-map', '1:a']),
    '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', '25', '-sc_threshold', '0', '-c:a', 'aac', '-b:a', '64k',
    '-f', 'hls', '-hls_time', '1', '-hls_playlist_type', 'vod',
    '-hls_segment_filename', join(dir, '%v_%03d.ts'),
    '-master_pl_name', 'master.m3u8',
    '-var_stream_map', renditions.map((r, i) => `v:${i},a:${i},name:${r.width}x${r.height}`).join(' '),
    join(dir, '%v.m3u8'),
  ]);
  return `${name}/master.m3u8`;
}

export interface StaticServer {
  baseUrl: string;
  /** Paths requested so far, in order. */
  paths: string[];
  stop(): Promise<void>;
}

/** Serve a directory, recording each request path. */
export async function startStaticServer(root: string): Promise<StaticServer> {
  const paths: string[] = [];
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    paths.push(path);
    const file = normalize(join(root, path));
    if (!file.startsWith(root + sep)) return void res.writeHead(404).end();
    stat(file).then((st) => {
      if (!st.isFile()) throw new Error('not a file');
      const type = extname(file) === '.m3u8' ? 'application/vnd.apple.mpegurl' : extname(file) === '.ts' ? 'video/mp2t' : 'application/octet-stream';
      res.writeHead(200, { 'content-type': type, 'content-length': st.size });
      createReadStream(file).pipe(res);
    }).catch(() => res.writeHead(404).end('not found'));
  });
  const sockets = track(server);
  const baseUrl = await listen(server);
  return { baseUrl, paths, stop: closer(server, sockets) };
}

export interface NeverEndingPage {
  url: string;
  /** Connections opened, and how many are still open. */
  readonly opened: number;
  readonly open: number;
  /** Resolves when no connection is open (or after `ms`, with false). */
  allClosed(ms: number): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * An HTML page that trickles a byte every 200 ms and never ends. yt-dlp's
 * generic extractor reads the whole page, and a byte arriving regularly
 * never trips its socket timeout: only a wall-clock bound stops it.
 */
export async function startNeverEndingPage(): Promise<NeverEndingPage> {
  let opened = 0;
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.write('<!DOCTYPE html><html><head><title>slow</title></head><body>');
    const timer = setInterval(() => res.write(' '), 200);
    res.on('close', () => clearInterval(timer));
  });
  server.on('connection', () => opened++);
  const sockets = track(server);
  const url = `${await listen(server)}/page.html`;
  return {
    url,
    get opened() {
      return opened;
    },
    get open() {
      return sockets.size;
    },
    async allClosed(ms) {
      const deadline = Date.now() + ms;
      while (sockets.size > 0) {
        if (Date.now() > deadline) return false;
        await new Promise((r) => setTimeout(r, 20));
      }
      return true;
    },
    stop: closer(server, sockets),
  };
}

export interface RecordingProxy {
  /** `http://user-session-{session}:secret@127.0.0.1:<port>`, for MEDIA_INFO_PROXY. */
  proxyTemplate: string;
  /** Session id of each request, in order. */
  sessions: string[];
  /** Absolute URLs requested through the proxy. */
  urls: string[];
  stop(): Promise<void>;
}

/**
 * A plain-HTTP forward proxy that reads the session id from the proxy user
 * name, as rotating-proxy pools do, and refuses every request of the first
 * session it sees with 403: an exit address the platform has blocked.
 */
export async function startRecordingProxy(): Promise<RecordingProxy> {
  const sessions: string[] = [];
  const urls: string[] = [];
  let burned: string | undefined;
  const server = createServer((req, res) => {
    const auth = req.headers['proxy-authorization'] ?? '';
    const user = Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString().split(':')[0] ?? '';
    const session = /^user-session-(\w+)$/.exec(user)?.[1] ?? '(none)';
    sessions.push(session);
    urls.push(req.url ?? '');
    burned ??= session;
    if (session === burned) return void res.writeHead(403, { 'content-type': 'text/plain' }).end('blocked');
    const target = new URL(req.url ?? '');
    const upstream = request({ host: target.hostname, port: target.port, path: target.pathname + target.search, method: req.method, headers: { ...req.headers, host: target.host } }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  const sockets = track(server);
  const base = await listen(server);
  return { proxyTemplate: base.replace('http://', 'http://user-session-{session}:secret@'), sessions, urls, stop: closer(server, sockets) };
}

/** Processes (other than this one) whose command line contains `marker`. Linux /proc. */
export async function processesWith(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8');
      if (cmdline.includes(marker)) found.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
