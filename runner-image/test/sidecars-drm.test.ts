// Subtitles, thumbnails and DRM: the pure decisions, and the yt-dlp runs
// against real pages (HTML5 <video> with a WebVTT <track> and a poster, HLS
// with a subtitle rendition, FairPlay-marked HLS masters) served on loopback.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import { runProcess } from '../src/child.js';
import { drmItemIsAudioOnly, hasDrm, isAudioOnly, saysDrmProtected } from '../src/drm.js';
import { fetchSidecars, identifySidecars, sidecarKey, sidecarWants } from '../src/sidecars.js';
import { CUES, PAGES, parseVtt, startPagesServer, type PagesServer } from '../../test/support/media-pages.js';

const run = promisify(execFile);
const logger = pino({ level: 'silent' });
const ytOpts = { bin: 'yt-dlp', socketTimeoutSeconds: 10 };

describe('runner: subtitles, thumbnails and DRM', function () {
  this.timeout(60_000);
  let pages: PagesServer;
  let dir: string;

  before(async () => {
    pages = await startPagesServer();
  });
  after(async () => {
    await pages?.stop();
  });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sidecars-test-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** The probe's info JSON for a URL, as the pipeline keeps it. */
  async function infoJson(url: string): Promise<string> {
    const r = await runProcess('yt-dlp', ['--ignore-config', '--no-cache-dir', '-J', '--', url], { captureStdout: true });
    expect(r.exitCode, r.stderr).to.equal(0);
    const path = join(dir, 'info.json');
    writeFileSync(path, r.stdout);
    return path;
  }

  describe('what a job gets', () => {
    it('subtitles when asked; a thumbnail only for show episodes (rule 6)', () => {
      expect(sidecarWants({ downloadSubtitles: true, downloadThumbnail: false })).to.deep.equal({ subtitles: true, thumbnail: false });
      expect(sidecarWants({ downloadSubtitles: false, downloadThumbnail: true })).to.deep.equal({ subtitles: false, thumbnail: false });
      expect(sidecarWants({ downloadSubtitles: false, downloadThumbnail: true, showEpisode: true })).to.deep.equal({ subtitles: false, thumbnail: true });
    });

    it('keys sit beside the media key, the subtitle language before the extension', () => {
      expect(sidecarKey('videos/talk.mp4', 'vtt', 'en')).to.equal('videos/talk.en.vtt');
      expect(sidecarKey('p/videos/f/talk.mkv', 'jpg')).to.equal('p/videos/f/talk.jpg');
      expect(sidecarKey('videos/talk.mp4', 'vtt', 'x/../../y')).to.equal('videos/talk.vtt');
      expect(sidecarKey('videos/talk.mp4', 'v/t')).to.equal(undefined);
    });

    it('recognises what yt-dlp wrote', () => {
      expect(identifySidecars(['thumbnail.jpg', 'subtitle.en.vtt', 'info.json'])).to.deep.equal({
        subtitle: { path: 'subtitle.en.vtt', lang: 'en', ext: 'vtt' },
        thumbnail: { path: 'thumbnail.jpg', ext: 'jpg' },
      });
      expect(identifySidecars(['x.part'])).to.deep.equal({});
    });
  });

  describe('fetching with yt-dlp', () => {
    it('the HTML5 <track> as WebVTT, and the poster converted to JPEG', async () => {
      const found = await fetchSidecars(await infoJson(pages.trackPageUrl), join(dir, 'sc'), { subtitles: true, thumbnail: true }, { ...ytOpts, logger });
      expect(found.subtitle).to.include({ lang: 'en', ext: 'vtt' });
      expect(parseVtt(readFileSync(found.subtitle!.path, 'utf8')).map((c) => c.text)).to.deep.equal(CUES.map((c) => c.text));
      expect(found.thumbnail).to.include({ ext: 'jpg' });
      const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_streams', found.thumbnail!.path]);
      expect((JSON.parse(stdout) as { streams: { codec_name: string; width: number }[] }).streams[0]).to.include({ codec_name: 'mjpeg', width: PAGES.posterWidth });
    });

    it('the HLS subtitle rendition (EXT-X-MEDIA TYPE=SUBTITLES)', async () => {
      const found = await fetchSidecars(await infoJson(pages.hlsSubtitlesUrl), join(dir, 'sc'), { subtitles: true, thumbnail: false }, { ...ytOpts, logger });
      expect(found.subtitle).to.include({ lang: 'en', ext: 'vtt' });
      expect(parseVtt(readFileSync(found.subtitle!.path, 'utf8')).map((c) => c.text)).to.deep.equal(CUES.map((c) => c.text));
    });

    it('nothing, and no error, when the source has no subtitles', async () => {
      const found = await fetchSidecars(await infoJson(pages.plainPageUrl), join(dir, 'sc'), { subtitles: true, thumbnail: false }, { ...ytOpts, logger });
      expect(found).to.deep.equal({});
    });
  });

  describe('DRM', () => {
    it('reads yt-dlp\'s has_drm in both shapes (2023.03.04 serialises the regex match as a string)', () => {
      expect(hasDrm([{ format_id: 'a', has_drm: "<re.Match object; span=(25, 73), match='#EXT-X-SESSION-KEY'>" }])).to.equal(true);
      expect(hasDrm([{ format_id: 'a', has_drm: true }])).to.equal(true);
      expect(hasDrm([{ format_id: 'a', has_drm: false }, { format_id: 'b' }])).to.equal(false);
    });

    it('audio only means every media format says vcodec none; images and unknown codecs do not count as audio', () => {
      expect(isAudioOnly([{ format_id: 'a', vcodec: 'none', acodec: 'mp4a.40.2' }, { format_id: 'sb0', vcodec: 'none', acodec: 'none' }])).to.equal(true);
      expect(isAudioOnly([{ format_id: 'a', vcodec: 'none', acodec: 'opus' }, { format_id: 'v', vcodec: 'avc1', acodec: 'none' }])).to.equal(false);
      expect(isAudioOnly([{ format_id: '0' }])).to.equal(false);
      expect(isAudioOnly([])).to.equal(false);
    });

    it('recognises yt-dlp\'s DRM errors only on ERROR lines', () => {
      expect(saysDrmProtected('ERROR: [generic] master: This video is DRM protected')).to.equal(true);
      expect(saysDrmProtected('ERROR: This video is DRM protected; Try selecting another format with --format')).to.equal(true);
      expect(saysDrmProtected('WARNING: This video is DRM protected and only images are available for download')).to.equal(false);
    });

    it('a FairPlay audio-only master: yt-dlp refuses it, the second look finds no video', async () => {
      const probe = await runProcess('yt-dlp', ['--ignore-config', '--no-cache-dir', '-J', '--', pages.drmAudioUrl], { captureStdout: true });
      expect(probe.exitCode).to.equal(1);
      expect(saysDrmProtected(probe.stderr), probe.stderr).to.equal(true);
      expect(await drmItemIsAudioOnly(pages.drmAudioUrl, ytOpts)).to.equal(true);
    });

    it('a FairPlay master with video is not audio only', async () => {
      expect(await drmItemIsAudioOnly(pages.drmVideoUrl, ytOpts)).to.equal(false);
    });

    it('says nothing for a source without DRM', async () => {
      expect(await drmItemIsAudioOnly(pages.hlsSubtitlesUrl, ytOpts)).to.equal(undefined);
    });
  });
});
