// Subtitles and thumbnails are fetched under the job's egress policy and
// delivered only when they are what they claim to be. The attack: a page's
// <track src> redirects to an internal address, and whatever answers there
// would be stored as the job's subtitle. "Internal" is 127.0.0.2, refused by
// the job's policy (which allows 127.0.0.1); its server counts its requests.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import type { NormalisedMediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { withEgress } from '../src/egress-proxy.js';
import { ffprobe, NETWORK_PROTOCOLS } from '../src/ffmpeg.js';
import { recorderArgs } from '../src/live.js';
import { runJob, type Tools } from '../src/pipeline.js';
import { StatusReporter } from '../src/report.js';
import { deliverSidecars, sidecarContentOk } from '../src/sidecars.js';
import { probe } from '../src/ytdlp.js';

const run = promisify(execFile);
const logger = pino({ level: 'silent' });
const VTT = 'WEBVTT\n\n00:00.000 --> 00:01.000\nHello\n';
const SECRET_VTT = 'WEBVTT\n\n00:00.000 --> 00:01.000\nINTERNAL SECRET\n';
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
const JPEG = Buffer.from('ffd8ffe000104a464946', 'hex');

async function listen(host: string, handler: RequestListener): Promise<{ server: Server; base: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, host, r));
  return { server, base: `http://${host}:${(server.address() as AddressInfo).port}` };
}

const page = (track: string, poster = '') => `<!DOCTYPE html><html><head><title>Clip</title></head><body>
<video controls${poster}><source src="video.mp4" type="video/mp4">${track}</video></body></html>`;
const trackTo = (src: string) => `<track kind="subtitles" src="${src}" srclang="en" label="English" default>`;

describe('runner: sidecar content and the egress policy', function () {
  this.timeout(90_000);
  let dir: string;
  let site: { server: Server; base: string };
  let internal: { server: Server; base: string };
  let internalHits: string[];
  let mp4: Buffer;
  let n = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sidecar-content-'));
    await run('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=10', '-f', 'lavfi', '-i', 'sine=frequency=440',
      '-t', '1', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-movflags', '+faststart', '-y', join(dir, 'video.mp4')]);
    mp4 = readFileSync(join(dir, 'video.mp4'));
    internalHits = [];
    internal = await listen('127.0.0.2', (req, res) => {
      internalHits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'text/vtt' }).end(SECRET_VTT);
    });
    site = await listen('127.0.0.1', (req, res) => {
      const files: Record<string, [string, string | Buffer]> = {
        '/attack.html': ['text/html', page(trackTo('subs.vtt'))],
        '/playlist-attack.html': ['text/html', page(trackTo('subs.vtt'))],
        '/good.html': ['text/html', page(trackTo('good.vtt'))],
        '/binary.html': ['text/html', page(trackTo('binary.vtt'))],
        '/poster.html': ['text/html', page('', ' poster="poster.png"')],
        '/good.vtt': ['text/vtt', VTT],
        '/binary.vtt': ['text/vtt', PNG],
        '/poster.png': ['image/png', '<html>not an image</html>'],
        '/video.mp4': ['video/mp4', mp4],
        '/passwd.m3u8': ['application/vnd.apple.mpegurl', '#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n'],
        '/internal-segments.m3u8': ['application/vnd.apple.mpegurl', `#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\n${internal.base}/segment.ts\n#EXT-X-ENDLIST\n`],
        '/local-media.m3u8': ['application/vnd.apple.mpegurl', `#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\nfile://${join(dir, 'video.mp4')}\n#EXT-X-ENDLIST\n`],
      };
      if (req.url === '/subs.vtt') return void res.writeHead(302, { location: `${internal.base}/latest/secret.vtt` }).end();
      const file = files[req.url ?? ''];
      if (!file) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': file[0], 'content-length': Buffer.byteLength(file[1]) }).end(file[1]);
    });
  });
  after(async () => {
    await Promise.all([site, internal].map((s) => s && new Promise((r) => s.server.close(r))));
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => (internalHits = []));

  const egress = { policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }) };

  async function job(url: string, withEgressPolicy: boolean) {
    n++;
    const store = join(dir, `store-${n}`);
    const spec: NormalisedMediaJobSpec = {
      url, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, destination: { type: 'managed' },
      format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
      audioOnly: false, downloadSubtitles: true, downloadThumbnail: false, liveRecording: false, liveFromStart: false,
      waitForVideo: false, enableProgressWebhook: false,
    };
    const tools: Tools = { ytdlp: 'yt-dlp', ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', socketTimeoutSeconds: 10, ...(withEgressPolicy ? { egress } : {}) };
    const report = await runJob({
      spec, jobId: `0000000${n}-aaaa-4bbb-8ccc-${String(n).padStart(12, '0')}`, workDir: mkdtempSync(join(dir, 'work-')), logger, tools,
      reporter: new StatusReporter({ namespace: 'default', name: 'sidecars', logger, sink: { patch: async () => undefined } }),
      destination: { provider: new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'sidecar-test-secret-0123456789' }), baseFolder: 'videos' },
    });
    expect(report, JSON.stringify(report)).to.include({ outcome: 'completed', step: 'Finished' });
    return { result: report.result!, store };
  }

  it('without the egress policy the redirect reaches the internal address and its answer becomes the subtitle (the attack)', async () => {
    const { result, store } = await job(`${site.base}/attack.html`, false);
    expect(internalHits).to.deep.equal(['/latest/secret.vtt']);
    expect(readFileSync(join(store, result.subtitleKey!), 'utf8')).to.contain('INTERNAL SECRET');
  });

  it('with it, the redirect is refused: the internal address is never contacted, and the media is delivered without a subtitle', async () => {
    const { result, store } = await job(`${site.base}/attack.html`, true);
    expect(internalHits).to.deep.equal([]);
    expect(result).to.not.have.property('subtitleKey');
    const probed = await ffprobe('ffprobe', join(store, result.storageKey));
    expect(probed.ok && probed.probed.streams.map((s) => s.codec_type).sort()).to.deep.equal(['audio', 'video']);
  });

  it('a real WebVTT track on an allowed address is still delivered through the egress', async () => {
    const { result, store } = await job(`${site.base}/good.html`, true);
    expect(readFileSync(join(store, result.subtitleKey!), 'utf8')).to.equal(VTT);
  });

  it('a subtitle that is not WebVTT or SRT (image bytes named .vtt) is dropped and the job completes', async () => {
    const { result } = await job(`${site.base}/binary.html`, true);
    expect(result).to.not.have.property('subtitleKey');
  });

  it('a thumbnail that is not an image is dropped', async () => {
    const store = join(dir, 'store-poster');
    const workDir = mkdtempSync(join(dir, 'work-'));
    const out = await withEgress(egress, async () => {
      const ytdlp = { bin: 'yt-dlp', socketTimeoutSeconds: 10 };
      const probed = await probe(`${site.base}/poster.html`, 'best', workDir, ytdlp);
      if (!probed.ok) throw new Error(probed.run.stderr);
      const seen = probed.info as { thumbnail?: string; thumbnails?: unknown[] };
      expect(seen.thumbnail ?? seen.thumbnails, 'yt-dlp saw the poster').to.not.equal(undefined);
      return deliverSidecars({ ...probed.info, url: `${site.base}/poster.html`, downloadThumbnail: true, showEpisode: true } as never, {
        infoPath: probed.infoPath, workDir, jobId: '00000099-aaaa-4bbb-8ccc-000000000099', mediaKey: 'videos/clip.mp4', ytdlp, ffmpeg: 'ffmpeg', logger,
        destination: { provider: new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'sidecar-test-secret-0123456789' }), baseFolder: 'videos' },
      });
    });
    expect(out).to.deep.equal({ keys: {}, bytes: 0 });
    // It was fetched, and dropped for what it is, not missing.
    expect(readdirSync(join(workDir, 'sidecars')).filter((f) => f.startsWith('thumbnail.'))).to.have.length(1);
  });

  it('ffmpeg refuses an HLS playlist whose segment is a local file, and a local playlist whose segment is on the network', async () => {
    await withEgress(egress, async () => {
      const passwd = await ffprobe('ffprobe', `${site.base}/passwd.m3u8`);
      expect(passwd.ok).to.equal(false);
      // A local file with a media extension passes ffmpeg's own segment check: the whitelist refuses it.
      const media = await ffprobe('ffprobe', `${site.base}/local-media.m3u8`);
      expect(media.ok).to.equal(false);
      expect(!media.ok && media.run.stderr).to.contain(`Protocol 'file' not on whitelist '${NETWORK_PROTOCOLS}'`);
      // A playlist on an allowed address cannot lead ffmpeg to a refused one: its segments take the proxy too.
      const led = await ffprobe('ffprobe', `${site.base}/internal-segments.m3u8`);
      expect(led.ok).to.equal(false);
      expect(internalHits).to.deep.equal([]);
      // The live recorder's inputs carry the same list and the proxy.
      const args = recorderArgs({ inputs: [{ url: `${site.base}/passwd.m3u8`, headers: {}, hls: true }], maps: [], fromStart: false, capSeconds: 1, formatIds: ['0'] }, join(dir, 'r.ts'), 5);
      expect(args[args.indexOf('-protocol_whitelist') + 1]).to.equal(NETWORK_PROTOCOLS);
      expect(args[args.indexOf('-http_proxy') + 1]).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    });
    // A file of ours reads nothing but files.
    writeFileSync(join(dir, 'downloaded.m3u8'), `#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\n${internal.base}/segment.ts\n#EXT-X-ENDLIST\n`);
    const local = await ffprobe('ffprobe', join(dir, 'downloaded.m3u8'));
    expect(!local.ok && local.run.stderr).to.contain("Protocol 'http' not on whitelist 'file'");
    expect(internalHits).to.deep.equal([]);
    // And a URL that is not http(s) never reaches ffprobe.
    const other = await ffprobe('ffprobe', 'file:///etc/passwd');
    expect(other.ok || other.run.stderr).to.equal('refused: the input is not an http(s) URL or a local file');
  });

  describe('what a sidecar claims to be', () => {
    const file = (name: string, body: string | Buffer) => {
      const path = join(dir, name);
      writeFileSync(path, body);
      return { path, ext: name.split('.').pop()! };
    };

    it('subtitles: WebVTT (with or without a BOM) and SRT pass; anything else does not', async () => {
      expect(await sidecarContentOk(file('a.vtt', VTT), 'subtitle')).to.equal(true);
      expect(await sidecarContentOk(file('b.vtt', `\uFEFF${VTT}`), 'subtitle')).to.equal(true);
      expect(await sidecarContentOk(file('c.srt', '1\r\n00:00:00,000 --> 00:00:01,000\r\nHello\r\n'), 'subtitle')).to.equal(true);
      for (const [name, body] of [['d.vtt', '{"access_key": "x"}'], ['e.vtt', '<html>WEBVTT</html>'], ['f.vtt', 'WEBVTTX\n'], ['g.vtt', PNG],
        ['h.srt', VTT], ['i.srt', 'root:x:0:0:root:/root:/bin/bash\n'], ['j.ttml', '<tt xmlns="http://www.w3.org/ns/ttml"></tt>'],
        ['k.vtt', Buffer.concat([Buffer.from('WEBVTT\n\n'), Buffer.from([0, 1, 2])])]] as const) {
        expect(await sidecarContentOk(file(name, body), 'subtitle'), name).to.equal(false);
      }
    });

    it('thumbnails: the image signature of their extension', async () => {
      expect(await sidecarContentOk(file('a.jpg', JPEG), 'thumbnail')).to.equal(true);
      expect(await sidecarContentOk(file('b.png', PNG), 'thumbnail')).to.equal(true);
      expect(await sidecarContentOk(file('c.webp', Buffer.from('RIFF\x10\x00\x00\x00WEBPVP8 ', 'latin1')), 'thumbnail')).to.equal(true);
      expect(await sidecarContentOk(file('d.gif', 'GIF89a\x01\x00'), 'thumbnail')).to.equal(true);
      for (const [name, body] of [['e.jpg', PNG], ['f.png', '<html></html>'], ['g.jpg', ''], ['h.txt', JPEG]] as const) {
        expect(await sidecarContentOk(file(name, body), 'thumbnail'), name).to.equal(false);
      }
    });
  });
});
