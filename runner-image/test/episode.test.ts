// Show episodes (spec rule 6 and job_completed): the runner reports the
// feed's title and exact release date and no description, and
// download_thumbnail delivers the feed's artwork as a JPEG beside the media;
// the artwork fetch is bounded in time and size and never fails the job.
// Real yt-dlp and ffmpeg against media and artwork served on loopback.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import type { NormalisedMediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { artworkUrl, describedAs, fetchArtwork } from '../src/episode.js';
import { runJob } from '../src/pipeline.js';
import { StatusReporter } from '../src/report.js';
import { startMediaServer, type MediaServer } from '../../test/support/media.js';

const run = promisify(execFile);
const logger = pino({ level: 'silent' });

async function codecOf(file: string): Promise<{ codec: string; width: number; height: number }> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_streams', file]);
  const s = (JSON.parse(stdout) as { streams: { codec_name: string; width: number; height: number }[] }).streams[0]!;
  return { codec: s.codec_name, width: s.width, height: s.height };
}

describe('runner: show episodes', function () {
  this.timeout(60_000);
  let dir: string;
  let media: MediaServer;
  let art: Server;
  let artBase: string;
  const images = new Map<string, Buffer>();

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'episode-test-'));
    for (const ext of ['png', 'jpg']) {
      await run('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'color=c=red:s=64x48', '-frames:v', '1', join(dir, `art.${ext}`)]);
      images.set(`/art.${ext}`, readFileSync(join(dir, `art.${ext}`)));
    }
    art = createServer((req, res) => {
      const body = images.get(req.url ?? '');
      if (body) return void res.writeHead(200, { 'content-type': 'image/*', 'content-length': body.length }).end(body);
      if (req.url === '/page.html') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>not an image</html>');
      if (req.url === '/huge') {
        // No length announced: the bound holds on what arrives.
        res.writeHead(200, { 'content-type': 'image/jpeg' });
        const chunk = Buffer.alloc(64 * 1024, 0xff);
        const write = () => {
          while (res.write(chunk)) { /* until the socket pushes back */ }
        };
        res.on('drain', write);
        return write();
      }
      if (req.url === '/slow') return void res.writeHead(200, { 'content-type': 'image/jpeg' }).write(Buffer.from([0xff, 0xd8, 0xff]));
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => art.listen(0, '127.0.0.1', r));
    artBase = `http://127.0.0.1:${(art.address() as AddressInfo).port}`;
    media = await startMediaServer();
  });

  after(async () => {
    art.closeAllConnections();
    art.close();
    await media?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('what a completed episode reports', () => {
    const info = { title: 'ep-1.mp3', description: 'from the file', upload_date: '20240315' };
    const episode = { title: 'Ep. 1: The Feed\'s Title', releaseDate: '2024-03-05T14:30:00.000Z', thumbnailUrl: 'https://img.test/ep1.jpg' };

    it('a show episode: the feed\'s title and exact date, no description (null for podcast sources)', () => {
      expect(describedAs({ showEpisode: true, episode }, info)).to.deep.equal({ title: episode.title, releaseDate: episode.releaseDate });
      // Without the feed's word, the file's, still without a description.
      expect(describedAs({ showEpisode: true }, info)).to.deep.equal({ title: 'ep-1.mp3', releaseDate: '2024-03-15T00:00:00.000Z' });
    });

    it('any other job: what yt-dlp read, whatever spec.episode says', () => {
      expect(describedAs({ episode }, info)).to.deep.equal({ title: 'ep-1.mp3', description: 'from the file', releaseDate: '2024-03-15T00:00:00.000Z' });
    });

    it('artwork only for show episodes, over http(s) only', () => {
      expect(artworkUrl({ showEpisode: true, episode })).to.equal('https://img.test/ep1.jpg');
      expect(artworkUrl({ episode })).to.equal(undefined);
      expect(artworkUrl({ showEpisode: true, episode: { thumbnailUrl: 'file:///etc/passwd' } })).to.equal(undefined);
    });
  });

  describe('fetching the artwork', () => {
    let n = 0;
    const into = () => join(dir, `art-${++n}`);

    it('keeps a JPEG as it is and converts a PNG to JPEG', async () => {
      const jpg = await fetchArtwork(`${artBase}/art.jpg`, into(), { ffmpeg: 'ffmpeg', logger });
      expect(jpg).to.include({ ext: 'jpg' });
      expect(readFileSync(jpg!.path).equals(images.get('/art.jpg')!)).to.equal(true);
      const png = await fetchArtwork(`${artBase}/art.png`, into(), { ffmpeg: 'ffmpeg', logger });
      expect(png).to.include({ ext: 'jpg' });
      expect(await codecOf(png!.path)).to.deep.equal({ codec: 'mjpeg', width: 64, height: 48 });
    });

    it('gives up on what is missing, not an image, too large or too slow, without throwing', async () => {
      expect(await fetchArtwork(`${artBase}/missing.jpg`, into(), { ffmpeg: 'ffmpeg', logger })).to.equal(undefined);
      expect(await fetchArtwork(`${artBase}/page.html`, into(), { ffmpeg: 'ffmpeg', logger })).to.equal(undefined);
      expect(await fetchArtwork(`${artBase}/art.png`, into(), { ffmpeg: 'ffmpeg', logger, maxBytes: 10 })).to.equal(undefined);
      const started = Date.now();
      expect(await fetchArtwork(`${artBase}/huge`, into(), { ffmpeg: 'ffmpeg', logger, maxBytes: 1024 * 1024 })).to.equal(undefined);
      expect(await fetchArtwork(`${artBase}/slow`, into(), { ffmpeg: 'ffmpeg', logger, timeoutMs: 500 })).to.equal(undefined);
      expect(Date.now() - started).to.be.below(5000);
      expect(await fetchArtwork('http://127.0.0.1:1/art.jpg', into(), { ffmpeg: 'ffmpeg', logger })).to.equal(undefined);
    });
  });

  describe('a whole episode job', () => {
    let n = 0;
    async function episodeJob(extra: Partial<NormalisedMediaJobSpec>) {
      n++;
      const store = join(dir, `store-${n}`);
      const spec: NormalisedMediaJobSpec = {
        url: media.mp4Url, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, destination: { type: 'managed' },
        format: 'm4a', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best',
        audioOnly: true, downloadSubtitles: false, downloadThumbnail: true, liveRecording: false, liveFromStart: false,
        waitForVideo: false, enableProgressWebhook: false, ...extra,
      };
      const jobId = `0000000${n}-aaaa-4bbb-8ccc-${String(n).padStart(12, '0')}`;
      const report = await runJob({
        spec, jobId, workDir: mkdtempSync(join(dir, 'work-')), logger,
        reporter: new StatusReporter({ namespace: 'default', name: 'episode', logger, sink: { patch: async () => undefined } }),
        tools: { ytdlp: 'yt-dlp', ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', socketTimeoutSeconds: 10 },
        destination: {
          provider: new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'episode-test-secret-0123456789' }),
          baseFolder: 'videos',
        },
      });
      expect(report, JSON.stringify(report)).to.include({ outcome: 'completed', step: 'Finished' });
      return { result: report.result!, store, jobId };
    }

    it('reports the feed\'s title and date and delivers its artwork as the thumbnail', async () => {
      const { result, store, jobId } = await episodeJob({
        showEpisode: true, folder: 'shows/feed',
        episode: { title: 'Ep. 7: From the feed', releaseDate: '2024-03-05T14:30:00.000Z', thumbnailUrl: `${artBase}/art.png` },
      });
      expect(result).to.include({ storageKey: `videos/shows/feed/${jobId}.m4a`, title: 'Ep. 7: From the feed', releaseDate: '2024-03-05T14:30:00.000Z', thumbnailKey: `videos/shows/feed/${jobId}.jpg` });
      expect(result).not.to.have.property('description');
      expect(await codecOf(join(store, result.thumbnailKey!))).to.deep.equal({ codec: 'mjpeg', width: 64, height: 48 });
    });

    it('completes without a thumbnail when the artwork cannot be fetched, and without one unless asked', async () => {
      const broken = await episodeJob({ showEpisode: true, episode: { title: 'Broken art', thumbnailUrl: `${artBase}/missing.jpg` } });
      expect(broken.result).to.include({ title: 'Broken art' });
      expect(broken.result).not.to.have.property('thumbnailKey');
      const unasked = await episodeJob({ showEpisode: true, downloadThumbnail: false, episode: { title: 'No art', thumbnailUrl: `${artBase}/art.jpg` } });
      expect(unasked.result).not.to.have.property('thumbnailKey');
    });

    it('a job that is no show episode ignores spec.episode: yt-dlp\'s title and date, no thumbnail (rule 6)', async () => {
      const { result } = await episodeJob({ episode: { title: 'Not used', releaseDate: '2020-01-01T00:00:00.000Z', thumbnailUrl: `${artBase}/art.jpg` } });
      expect(result).to.include({ title: 'video', releaseDate: '2024-03-15T00:00:00.000Z' });
      expect(result).not.to.have.property('thumbnailKey');
    });
  });
});
