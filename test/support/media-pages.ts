// Test pages for subtitles, thumbnails and DRM, generated with ffmpeg and
// served over local HTTP, so yt-dlp's generic extractor reads them as it
// reads the web: an HTML5 <video> with a poster and a WebVTT <track>, an HLS
// stream with a WebVTT subtitle rendition (EXT-X-MEDIA TYPE=SUBTITLES), and
// HLS masters protected with FairPlay (a SESSION-KEY with an skd:// URI, the
// marker yt-dlp's m3u8 parser sets `has_drm` on), one audio-only and one
// with video.
import { execFile } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';
import { promisify } from 'node:util';
import { cachedFixture } from './fixture-cache.js';

const run = promisify(execFile);

/** The subtitle cues every subtitled page carries, so tests can check the delivered file's text. */
export const CUES = [
  { start: '00:00:00.000', end: '00:00:01.500', text: 'Hello from the first cue' },
  { start: '00:00:01.500', end: '00:00:03.000', text: 'And the second cue' },
] as const;

export const PAGES = {
  durationSeconds: 3,
  width: 320,
  height: 240,
  posterWidth: 160,
  posterHeight: 120,
} as const;

export interface PagesServer {
  baseUrl: string;
  /** HTML page: <video poster> with an MP4 <source> and an English WebVTT <track>. */
  trackPageUrl: string;
  /** HTML page: <video poster> with an MP4 and no subtitles. */
  plainPageUrl: string;
  /** HLS master: one muxed variant and an English WebVTT subtitle rendition. */
  hlsSubtitlesUrl: string;
  /** HLS master, FairPlay-protected, audio only (CODECS says AAC and nothing else). */
  drmAudioUrl: string;
  /** HLS master, FairPlay-protected, with video. */
  drmVideoUrl: string;
  stop(): Promise<void>;
}

function vtt(header = ''): string {
  return `WEBVTT${header ? `\n${header}` : ''}\n\n${CUES.map((c) => `${c.start} --> ${c.end}\n${c.text}\n`).join('\n')}`;
}

async function ffmpeg(args: string[]): Promise<void> {
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', ...args], { maxBuffer: 1 << 20 });
}

let generated: Promise<string> | undefined;

function generatePages(): Promise<string> {
  generated ??= cachedFixture('pages', import.meta.url, generate).catch((err: unknown) => {
    generated = undefined;
    throw err;
  });
  return generated;
}

async function generate(dir: string): Promise<void> {
  const { width, height, durationSeconds: d } = PAGES;
  const x264 = ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-g', '25', '-keyint_min', '25', '-sc_threshold', '0'];
  await ffmpeg([
    '-f', 'lavfi', '-i', `testsrc=size=${width}x${height}:rate=25:duration=${d}`,
    '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=44100:duration=${d}`,
    ...x264, '-c:a', 'aac', '-b:a', '64k', '-shortest', '-movflags', '+faststart', join(dir, 'video.mp4'),
  ]);
  await ffmpeg(['-f', 'lavfi', '-i', `testsrc=size=${PAGES.posterWidth}x${PAGES.posterHeight}:rate=1`, '-frames:v', '1', join(dir, 'poster.png')]);
  await writeFile(join(dir, 'subs.en.vtt'), vtt());
  const video = (track: string) => [
    '<!DOCTYPE html>', '<html><head><title>Extras test page</title></head><body>',
    '<video controls poster="poster.png">', '  <source src="video.mp4" type="video/mp4">', track, '</video>', '</body></html>', '',
  ].join('\n');
  await writeFile(join(dir, 'track.html'), video('  <track kind="subtitles" src="subs.en.vtt" srclang="en" label="English" default>'));
  await writeFile(join(dir, 'plain.html'), video(''));

  // HLS with a subtitle rendition. The WebVTT segment maps its cue times onto
  // the video's MPEG-TS clock (RFC 8216 3.5), here the 1.4 s ffmpeg starts at.
  await mkdir(join(dir, 'hls-subs'), { recursive: true });
  await ffmpeg([
    '-i', join(dir, 'video.mp4'), '-c', 'copy', '-f', 'hls', '-hls_time', '1', '-hls_playlist_type', 'vod',
    '-hls_segment_filename', join(dir, 'hls-subs', 'v%03d.ts'), join(dir, 'hls-subs', 'video.m3u8'),
  ]);
  await writeFile(join(dir, 'hls-subs', 'subs-en.vtt'), vtt('X-TIMESTAMP-MAP=MPEGTS:126000,LOCAL:00:00:00.000'));
  await writeFile(join(dir, 'hls-subs', 'subs-en.m3u8'), [
    '#EXTM3U', '#EXT-X-VERSION:3', `#EXT-X-TARGETDURATION:${d}`, '#EXT-X-MEDIA-SEQUENCE:0', '#EXT-X-PLAYLIST-TYPE:VOD',
    `#EXTINF:${d}.0,`, 'subs-en.vtt', '#EXT-X-ENDLIST', '',
  ].join('\n'));
  await writeFile(join(dir, 'hls-subs', 'master.m3u8'), [
    '#EXTM3U', '#EXT-X-VERSION:3',
    '#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,URI="subs-en.m3u8"',
    `#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=${width}x${height},CODECS="avc1.42c00d,mp4a.40.2",SUBTITLES="subs"`,
    'video.m3u8', '',
  ].join('\n'));

  // FairPlay-marked masters. The media itself is clear: yt-dlp never gets
  // past the master, which is the point (the runner must decide from it).
  const fairplay = '#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI="skd://mediajobs-test-key",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1"';
  await mkdir(join(dir, 'drm-audio'), { recursive: true });
  await ffmpeg([
    '-f', 'lavfi', '-i', `sine=frequency=330:sample_rate=44100:duration=${d}`, '-c:a', 'aac', '-b:a', '64k',
    '-f', 'hls', '-hls_time', '1', '-hls_playlist_type', 'vod', '-hls_segment_filename', join(dir, 'drm-audio', 'a%03d.ts'),
    join(dir, 'drm-audio', 'audio.m3u8'),
  ]);
  await writeFile(join(dir, 'drm-audio', 'master.m3u8'), [
    '#EXTM3U', '#EXT-X-VERSION:5', fairplay, '#EXT-X-STREAM-INF:BANDWIDTH=96000,CODECS="mp4a.40.2"', 'audio.m3u8', '',
  ].join('\n'));
  await mkdir(join(dir, 'drm-video'), { recursive: true });
  await writeFile(join(dir, 'drm-video', 'master.m3u8'), [
    '#EXTM3U', '#EXT-X-VERSION:5', fairplay,
    `#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=${width}x${height},CODECS="avc1.42c00d,mp4a.40.2"`, '../hls-subs/video.m3u8', '',
  ].join('\n'));
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.mp4': 'video/mp4',
  '.png': 'image/png',
  '.vtt': 'text/vtt',
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.ts': 'video/mp2t',
};

export interface PagesServerOptions {
  /**
   * Awaited before each request is answered, with its path: a test holds a
   * file back (a sidecar the runner fetches after storing the media) until
   * it has done what it wants done meanwhile.
   */
  before?: (path: string) => Promise<void>;
}

/** Serve the pages on an ephemeral loopback port. */
export async function startPagesServer(opts: PagesServerOptions = {}): Promise<PagesServer> {
  const root = await generatePages();
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://localhost').pathname);
    const file = normalize(join(root, path));
    const notFound = () => res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    if (!file.startsWith(root + sep) || (req.method !== 'GET' && req.method !== 'HEAD')) return notFound();
    (opts.before?.(path) ?? Promise.resolve()).then(() => stat(file)).then((st) => {
      if (!st.isFile()) return notFound();
      res.writeHead(200, { 'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': st.size });
      if (req.method === 'HEAD') return void res.end();
      createReadStream(file).on('error', () => res.destroy()).pipe(res);
    }, notFound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    baseUrl,
    trackPageUrl: `${baseUrl}/track.html`,
    plainPageUrl: `${baseUrl}/plain.html`,
    hlsSubtitlesUrl: `${baseUrl}/hls-subs/master.m3u8`,
    drmAudioUrl: `${baseUrl}/drm-audio/master.m3u8`,
    drmVideoUrl: `${baseUrl}/drm-video/master.m3u8`,
    stop: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** Parse a WebVTT document's cues (enough to check a delivered subtitle file). */
export function parseVtt(text: string): { start: string; end: string; text: string }[] {
  if (!/^\uFEFF?WEBVTT/.test(text)) throw new Error('not a WebVTT file');
  const cues: { start: string; end: string; text: string }[] = [];
  for (const block of text.replace(/\r\n/g, '\n').split(/\n{2,}/)) {
    const lines = block.split('\n');
    const i = lines.findIndex((l) => l.includes('-->'));
    if (i < 0) continue;
    const [start = '', end = ''] = lines[i]!.split('-->').map((s) => s.trim().split(/\s+/)[0] ?? '');
    cues.push({ start, end, text: lines.slice(i + 1).join('\n').trim() });
  }
  return cues;
}
