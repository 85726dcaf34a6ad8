// The ffmpeg yt-dlp starts as its downloader (FFmpegFD) opens what our own
// ffmpeg runs may open, and nothing else. yt-dlp hands HLS to it when the
// deployment asks (YTDLP_ARGS `--downloader m3u8:ffmpeg`, as here), when an
// extractor says `m3u8`, or when a playlist has features its own HLS
// downloader lacks. The attack: a master playlist on the web whose variant
// is `file:///...`. yt-dlp's own downloaders refuse file URLs; ffmpeg
// without a whitelist reads the file, and the job delivers it. Real yt-dlp
// and ffmpeg, a site on 127.0.0.1 and the job's egress allowing only that.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import type { NormalisedMediaJobSpec, RunnerReport } from '@mediajobs/lib/mediajob/types';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { ffprobe } from '../src/ffmpeg.js';
import { runJob, type Tools } from '../src/pipeline.js';
import { StatusReporter } from '../src/report.js';

const run = promisify(execFile);
const logger = pino({ level: 'silent' });

describe('runner: the ffmpeg yt-dlp starts opens only the network, through the egress', function () {
  this.timeout(120_000);
  let dir: string;
  let site: Server;
  let base: string;
  /** "Internal": 127.0.0.2, which the job's egress refuses; it counts what reaches it. */
  let internal: Server;
  let internalBase: string;
  const internalHits: string[] = [];
  let n = 0;

  /** An MPEG-TS clip: the public one is 160x120, the "secret" local file 320x240. */
  const clip = (size: string, seconds: number, file: string) => run('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', `testsrc=size=${size}:rate=10:duration=${seconds}`,
    '-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`, '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-y', join(dir, file)]);
  const master = (variant: string) => `#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=400000,RESOLUTION=320x240\n${variant}\n`;
  const media = (...segments: string[]) => `#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n${segments.map((s) => `#EXTINF:2.0,\n${s}\n`).join('')}#EXT-X-ENDLIST\n`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ytdlp-ffmpeg-'));
    await Promise.all([clip('160x120', 2, 'public.ts'), clip('320x240', 4, 'secret.ts'), clip('320x240', 4, 'secret.mp4')]);
    const files: Record<string, () => string | Buffer> = {
      '/legit.m3u8': () => master('legit/index.m3u8'),
      '/legit/index.m3u8': () => media(`${base}/public.ts`),
      '/public.ts': () => readFileSync(join(dir, 'public.ts')),
      // The attack: a variant that is a file on the runner's disk.
      '/variant-file.m3u8': () => master(`file://${join(dir, 'secret.mp4')}`),
      // And a segment that is one, after a real one, and one at an address the egress refuses.
      '/segment-file.m3u8': () => media(`${base}/public.ts`, `file://${join(dir, 'secret.ts')}`, `${internalBase}/secret.ts`),
    };
    site = createServer((req, res) => {
      const body = files[req.url ?? '']?.();
      if (body === undefined) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': req.url!.endsWith('.ts') ? 'video/mp2t' : 'application/vnd.apple.mpegurl' }).end(body);
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    internal = createServer((req, res) => {
      internalHits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'video/mp2t' }).end(readFileSync(join(dir, 'secret.ts')));
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.2', r));
    internalBase = `http://127.0.0.2:${(internal.address() as AddressInfo).port}`;
  });
  after(async () => {
    await Promise.all([site, internal].map((s) => new Promise((r) => s?.close(r))));
    rmSync(dir, { recursive: true, force: true });
  });

  async function job(path: string): Promise<{ report: RunnerReport; store: string }> {
    n++;
    const store = join(dir, `store-${n}`);
    const spec: NormalisedMediaJobSpec = {
      url: `${base}${path}`, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, destination: { type: 'managed' },
      format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
      audioOnly: false, downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false,
      waitForVideo: false, enableProgressWebhook: false,
    };
    const tools: Tools = {
      ytdlp: 'yt-dlp', ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', socketTimeoutSeconds: 10,
      ytdlpArgs: ['--downloader', 'm3u8:ffmpeg'],
      egress: { policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }) },
    };
    const report = await runJob({
      spec, jobId: `0000000${n}-aaaa-4bbb-8ccc-${String(n).padStart(12, '0')}`, workDir: mkdtempSync(join(dir, 'work-')), logger, tools,
      reporter: new StatusReporter({ namespace: 'default', name: 'ytdlp-ffmpeg', logger, sink: { patch: async () => undefined } }),
      destination: { provider: new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'ytdlp-ffmpeg-test-secret-012345' }), baseFolder: 'videos' },
    });
    return { report, store };
  }

  /** The delivered file's frame size and duration. */
  async function delivered(report: RunnerReport, store: string): Promise<{ width?: number; seconds: number }> {
    const probed = await ffprobe('ffprobe', join(store, report.result!.storageKey));
    if (!probed.ok) throw new Error(probed.run.stderr);
    return { width: probed.probed.streams.find((s) => s.codec_type === 'video')?.width, seconds: Math.round(probed.probed.durationSeconds ?? 0) };
  }

  const stored = (store: string) => (existsSync(store) ? readdirSync(store, { recursive: true }).filter((f) => String(f).endsWith('.mp4')) : []);

  it('an HLS source yt-dlp hands to ffmpeg still downloads, through the egress proxy', async () => {
    const { report, store } = await job('/legit.m3u8');
    expect(report, JSON.stringify(report)).to.include({ outcome: 'completed' });
    expect(await delivered(report, store)).to.deep.equal({ width: 160, seconds: 2 });
  });

  it('a variant that is a local file is refused: the job fails and nothing is stored', async () => {
    const { report, store } = await job('/variant-file.m3u8');
    expect(report, JSON.stringify(report)).to.include({ outcome: 'failed', step: 'Downloading' });
    expect(stored(store)).to.deep.equal([]);
  });

  // ffmpeg's own default for a playlist read over http (its http protocol's
  // whitelist) already leaves `file` out; the list keeps it out, and the
  // segments take the egress proxy like the playlist.
  it('a segment that is a local file or at a refused address is not read: only the public segment is delivered', async () => {
    const { report, store } = await job('/segment-file.m3u8');
    expect(internalHits).to.deep.equal([]);
    // ffmpeg skips the segments it may not open: none of the secret's 320x240 frames or its seconds.
    expect(report, JSON.stringify(report)).to.include({ outcome: 'completed' });
    expect(await delivered(report, store)).to.deep.equal({ width: 160, seconds: 2 });
  });
});
