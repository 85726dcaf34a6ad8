// What a clip costs the source (issue 37 item 7): a clip from the middle of
// an MP4 on a range-capable server, served on loopback as fast as it goes,
// makes the server send a small share of the file, not socket buffers full
// of it per open-ended request. The real pipeline (yt-dlp, ffmpeg, the job's
// egress proxy) on a page that names the MP4, as platforms publish them, so
// every media byte counted is one the runner asked for; and the same bound
// through a platform's upstream proxy session chained behind the egress
// (test/support/upstream-proxies.ts), which every media request takes.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { NormalisedMediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { startMediaServer, type MediaServer } from '../../test/support/media.js';
import { startUpstreamProxy, type UpstreamProxy } from '../../test/support/upstream-proxies.js';
import { runJob } from '../src/pipeline.js';
import { StatusReporter } from '../src/report.js';

const run = promisify(execFile);
const logger = pino({ level: 'silent' });
const SECONDS = 120;
const SESSION = 'user-session-5e6f7a8b9c0d-1';

describe('runner: a clip of an MP4 read from its URL', function () {
  this.timeout(180_000);
  let dir: string;
  let media: MediaServer;
  let page: Server;
  let pageUrl: string;
  let fileBytes: number;
  let upstream: UpstreamProxy;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runner-clip-bytes-'));
    const root = join(dir, 'media');
    mkdirSync(root);
    // The shape of a platform's progressive MP4: H.264 with a keyframe every 2 s, AAC, index in front (faststart);
    // noise, so the bitrate is a real one (about 2 Mbit/s) and every second of it costs its share of the file.
    await run('ffmpeg', [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-y',
      '-f', 'lavfi', '-i', `testsrc2=size=320x180:rate=30:duration=${SECONDS}`, '-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${SECONDS}`,
      '-vf', 'noise=alls=12:allf=t', '-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '2M', '-maxrate', '2M', '-bufsize', '4M',
      '-g', '60', '-keyint_min', '60', '-sc_threshold', '0', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-b:a', '96k', '-movflags', '+faststart',
      join(root, 'long.mp4'),
    ]);
    fileBytes = statSync(join(root, 'long.mp4')).size;
    media = await startMediaServer({ root });
    // /watch names the MP4 on a server that answers ranges, /norange/watch the same file on one that does not.
    page = createServer((req, res) => {
      const src = req.url?.startsWith('/norange/') ? media.noRangeUrl('long.mp4') : `${media.baseUrl}/long.mp4`;
      res.writeHead(200, { 'content-type': 'text/html' })
        .end(`<!DOCTYPE html><html><head><title>A long video</title></head><body><video controls><source src="${src}" type="video/mp4"></video></body></html>`);
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
    pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/watch`;
    upstream = await startUpstreamProxy({ id: 'p1', sourceAddress: '127.0.0.51', auth: { password: 'clip-pool-password', user: /^user-session-/ } });
  });

  after(async () => {
    await Promise.all([media?.stop(), upstream?.stop(), new Promise((r) => page?.close(r))]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A 2 s clip (from the middle unless told), through the job's egress (chained to `session` when given): what the server sent,
   * the requests for the file, and the delivered file's streams and length. `noRange`: the file from the server without range support.
   */
  async function clip(session?: string, o: { noRange?: boolean; clipStart?: string; clipEnd?: string } = {}): Promise<{ sent: number; requests: number; streams: string[]; duration: number }> {
    const store = join(dir, `store-${session ? 'chained' : 'direct'}${o.noRange ? '-norange' : ''}`);
    const key = o.noRange ? '/norange/long.mp4' : '/long.mp4';
    const provider = new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'clip-bytes-test-secret-0123456789' });
    const spec: NormalisedMediaJobSpec = {
      url: o.noRange ? pageUrl.replace('/watch', '/norange/watch') : pageUrl, format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23,
      maxResolution: 'best', audioOnly: false, clipStart: o.clipStart ?? '60', clipEnd: o.clipEnd ?? '62', owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, destination: { type: 'managed' },
    } as NormalisedMediaJobSpec;
    const before = media.bytesSent(key);
    const requestsBefore = media.paths.filter((p) => p === key).length;
    const report = await runJob({
      spec, jobId: '00000001-aaaa-4bbb-8ccc-000000000001', workDir: mkdtempSync(join(dir, 'work-')), logger,
      reporter: new StatusReporter({ namespace: 'default', name: 'clip-bytes', logger, sink: { patch: async () => undefined } }),
      tools: {
        ytdlp: 'yt-dlp', ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', socketTimeoutSeconds: 10,
        egress: { policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }), ...(session ? { upstream: session } : {}) },
      },
      destination: { provider, baseFolder: 'videos' },
    });
    expect(report, JSON.stringify(report)).to.include({ outcome: 'completed' });
    const sent = media.bytesSent(key) - before;
    const requests = media.paths.filter((p) => p === key).length - requestsBefore;
    const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', join(store, report.result!.storageKey)]);
    const probed = JSON.parse(stdout) as { format: { duration: string }; streams: { codec_type: string }[] };
    return { sent, requests, streams: probed.streams.map((s) => s.codec_type).sort(), duration: Number(probed.format.duration) };
  }

  it('a 2 s clip from the middle of a 120 s MP4 served unthrottled makes the server send under 10% of the file, and comes out whole', async () => {
    const { sent, streams, duration } = await clip();
    // Left to ffmpeg, the probe, the keyframe search and the mux each opened the file at 0 and again at the clip,
    // and the server streamed every one until the close landed: most of this file.
    expect(sent / fileBytes, `${sent} of ${fileBytes} bytes`).to.be.below(0.1);
    expect(streams).to.deep.equal(['audio', 'video']);
    expect(duration).to.be.closeTo(2, 0.1);
  });

  it('a clip of the same MP4 from a server without range support reads the file twice: the first look on to the index, and once to the clip\'s end', async () => {
    // Such a server sends from the start whatever is asked, as fast as the reader takes it or the buffers on the way hold
    // (up to ~9 MB per connection through the egress proxy, whatever the reader needs): what a clip costs it is the number of
    // reads. Left to ffmpeg there were four (the first look, ffprobe's, the keyframe search's and the mux's), each from byte 0
    // and each held by a process while it started and probed; on a loaded machine each filled those buffers.
    const { requests, streams, duration } = await clip(undefined, { noRange: true, clipStart: '10', clipEnd: '12' });
    expect(requests, 'GETs of the file').to.equal(2);
    expect(streams).to.deep.equal(['audio', 'video']);
    expect(duration).to.be.closeTo(2, 0.1);
  });

  it('through an upstream proxy session the bound holds, and every request for the media goes through the session', async () => {
    const mediaHost = new URL(media.baseUrl).host;
    const [requests, asked] = [media.requests, upstream.targets.length];
    const { sent, streams, duration } = await clip(upstream.urlWith(SESSION));
    expect(sent / fileBytes, `${sent} of ${fileBytes} bytes`).to.be.below(0.1);
    expect(streams).to.deep.equal(['audio', 'video']);
    expect(duration).to.be.closeTo(2, 0.1);
    // The media server serves nothing else here: each of its requests came through the upstream, under the session's name.
    expect(upstream.targets.slice(asked).filter((t) => t === mediaHost)).to.have.length(media.requests - requests);
    expect(new Set(upstream.users.slice(asked))).to.deep.equal(new Set([SESSION]));
  });
});
