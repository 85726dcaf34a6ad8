// The two-stage lookup on the real yt-dlp, against media made with ffmpeg
// and served on loopback: the lightweight run answers when it can, the full
// one runs in a fresh process with a new proxy session when it cannot, both
// are killed at their wall-clock bounds, an abort kills the process, and
// nothing but manifests is ever read.
import { expect } from 'chai';
import { assessClassification, assessMetadata } from '../src/media-info/assess.js';
import { MediaInfoExtractor } from '../src/media-info/extractor.js';
import { unreachableUrl } from '../../test/support/media.js';
import {
  makeHls, processesWith, removeDir, scratchDir, startNeverEndingPage, startRecordingProxy, startStaticServer,
  type NeverEndingPage, type StaticServer,
} from './media-info-support.js';

const WATCH = 'https://www.youtube.com/watch?v=';

describe('media-info: lookups with the real yt-dlp', function () {
  this.timeout(60_000);
  let dir: string;
  let media: StaticServer;
  let slow: NeverEndingPage;
  let horizontal: string;
  let vertical: string;

  before(async () => {
    dir = await scratchDir();
    const [h, v] = await Promise.all([
      makeHls(dir, 'horizontal', [{ width: 640, height: 360 }]),
      makeHls(dir, 'vertical', [{ width: 180, height: 320 }, { width: 360, height: 640 }]),
    ]);
    media = await startStaticServer(dir);
    horizontal = `${media.baseUrl}/${h}`;
    vertical = `${media.baseUrl}/${v}`;
    slow = await startNeverEndingPage();
  });

  after(async () => {
    await media?.stop();
    await slow?.stop();
    if (dir) await removeDir(dir);
  });

  it('builds each run from the options: bounds, proxy session, extra args, and the mapped URL last', () => {
    const x = new MediaInfoExtractor({
      command: ['python3', '-m', 'yt_dlp'], extraArgs: ['--cookies', '/c.txt'], proxy: 'http://u-{session}:p@proxy:1',
      urlMap: new Map([[`${WATCH}BaW_jenozKc`, 'http://127.0.0.1:1/x.m3u8']]),
    });
    const light = x.argv('light', `${WATCH}BaW_jenozKc`, 's1');
    expect(light.slice(0, 3)).to.deep.equal(['python3', '-m', 'yt_dlp']);
    expect(light).to.include.members(['--dump-single-json', '--skip-download', '--no-playlist', '--ignore-no-formats-error', '--no-cache-dir', '--ignore-config']);
    expect(light.join(' ')).to.contain('--socket-timeout 3 --extractor-retries 0 --extractor-args youtube:skip=dash,translated_subs;player_skip=configs --proxy http://u-s1:p@proxy:1 --cookies /c.txt -- http://127.0.0.1:1/x.m3u8');
    const full = x.argv('full', `${WATCH}other000000`, 's2');
    expect(full.join(' ')).to.contain('--socket-timeout 10 --extractor-retries 1 --proxy http://u-s2:p@proxy:1 --cookies /c.txt -- https://www.youtube.com/watch?v=other000000');
    expect(full.join(' ')).not.to.contain('player_skip');
  });

  it('horizontal HLS: classified by the lightweight run alone', async () => {
    const x = new MediaInfoExtractor({ urlMap: new Map([[`${WATCH}horizontal1`, horizontal]]) });
    const r = await x.lookup(`${WATCH}horizontal1`, assessClassification);
    expect(r).to.deep.include({ ok: true, value: { isShort: false, videoType: 'video', width: 640, height: 360, aspectRatio: 360 / 640, durationSeconds: 0 } });
    expect(r.attempts.map((a) => [a.stage, a.outcome])).to.deep.equal([['light', 'ok']]);
  });

  it('vertical HLS: short, from the best rendition', async () => {
    const x = new MediaInfoExtractor({ urlMap: new Map([[`${WATCH}vertical001`, vertical]]) });
    const r = await x.lookup(`${WATCH}vertical001`, assessClassification);
    expect(r).to.deep.include({ ok: true, value: { isShort: true, videoType: 'short', width: 360, height: 640, aspectRatio: 640 / 360, durationSeconds: 0 } });
  });

  it('reads manifests only: no media segment is fetched', async () => {
    const before = media.paths.length;
    const x = new MediaInfoExtractor({ urlMap: new Map([[`${WATCH}vertical001`, vertical]]) });
    await x.lookup(`${WATCH}vertical001`, assessClassification);
    const read = media.paths.slice(before);
    expect(read.length).to.be.greaterThan(0);
    expect(read.filter((p) => !p.endsWith('.m3u8'))).to.deep.equal([]);
  });

  it('a blocked proxy session: the full run gets a new session and answers', async () => {
    const proxy = await startRecordingProxy();
    try {
      const x = new MediaInfoExtractor({ proxy: proxy.proxyTemplate, urlMap: new Map([[`${WATCH}vertical001`, vertical]]) });
      const r = await x.lookup(`${WATCH}vertical001`, assessClassification);
      expect(r.ok).to.equal(true);
      expect(r.attempts.map((a) => [a.stage, a.outcome])).to.deep.equal([['light', 'upstream_error'], ['full', 'ok']]);
      const distinct = [...new Set(proxy.sessions)];
      expect(distinct).to.have.length(2);
      expect(distinct.every((s) => /^[0-9a-f]{16}$/.test(s))).to.equal(true);
      // Everything went through the proxy, and only manifests.
      expect(proxy.urls.every((u) => u.startsWith(media.baseUrl) && u.endsWith('.m3u8'))).to.equal(true);
    } finally {
      await proxy.stop();
    }
  });

  it('dimensions unknown after both runs (a direct link tells yt-dlp none): no_dimensions, never a guess', async () => {
    const { startMediaServer } = await import('../../test/support/media.js');
    const server = await startMediaServer();
    try {
      const x = new MediaInfoExtractor({ urlMap: new Map([[`${WATCH}direct00mp4`, server.mp4Url]]) });
      const r = await x.lookup(`${WATCH}direct00mp4`, assessClassification);
      expect(r).to.deep.include({ ok: false, failure: 'no_dimensions' });
      expect(r.attempts.map((a) => a.stage)).to.deep.equal(['light', 'full']);
      // /metadata takes the same info as an answer, without dimensions.
      const m = await x.lookup(`${WATCH}direct00mp4`, assessMetadata);
      expect(m).to.deep.include({ ok: true });
      if (m.ok) expect(m.value).to.deep.include({ title: 'video', extractor: 'generic', uploadDate: '20240315' }).and.not.have.any.keys('width', 'height');
    } finally {
      await server.stop();
    }
  });

  it('a content verdict is final: a 404 page is not retried', async () => {
    const x = new MediaInfoExtractor();
    const r = await x.lookup(`${media.baseUrl}/missing.m3u8`, assessMetadata);
    expect(r).to.deep.include({ ok: false, failure: 'unavailable' });
    expect(r.attempts).to.have.length(1);
  });

  it('nothing listening: a temporary connection error after both runs', async () => {
    const x = new MediaInfoExtractor();
    const r = await x.lookup(await unreachableUrl(), assessMetadata);
    expect(r).to.deep.include({ ok: false, failure: 'connection_error' });
    expect(r.attempts.map((a) => a.outcome)).to.deep.equal(['connection_error', 'connection_error']);
  });

  it('a page that never ends: each run is killed at its bound', async () => {
    // Bounds long enough for yt-dlp (Python) to start and reach the page even on a loaded machine.
    const x = new MediaInfoExtractor({ lightTimeoutMs: 5000, fullTimeoutMs: 6000 });
    const opened = slow.opened;
    const t0 = Date.now();
    const r = await x.lookup(slow.url, assessMetadata);
    const elapsed = Date.now() - t0;
    expect(r).to.deep.include({ ok: false, failure: 'timeout' });
    expect(r.attempts.map((a) => [a.stage, a.outcome])).to.deep.equal([['light', 'timeout'], ['full', 'timeout']]);
    const [light, full] = r.attempts;
    // Each run at least its bound; the upper bounds only show the runs were killed (the page never ends), with room
    // for a loaded machine's late timers: how promptly is make bench's business, not a test's.
    expect(light!.ms).to.be.within(5000, 15_000);
    expect(full!.ms).to.be.within(6000, 15_000);
    expect(elapsed).to.be.below(30_000);
    expect(slow.opened - opened).to.equal(2);
    expect(await slow.allClosed(10_000)).to.equal(true);
    expect(await processesWith(slow.url)).to.deep.equal([]);
  });

  it('an abort kills the running process at once', async () => {
    const x = new MediaInfoExtractor();
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 1500);
    const t0 = Date.now();
    const r = await x.lookup(slow.url, assessMetadata, controller.signal);
    expect(r).to.deep.include({ ok: false, aborted: true });
    expect(Date.now() - t0).to.be.below(2500);
    expect(await slow.allClosed(2000)).to.equal(true);
    expect(await processesWith(slow.url)).to.deep.equal([]);
    expect(x.running).to.equal(0);
  });

  it('over the concurrency limit: busy at once, without starting a process', async () => {
    const x = new MediaInfoExtractor({ maxConcurrent: 1 });
    const controller = new AbortController();
    const first = x.lookup(slow.url, assessMetadata, controller.signal);
    const second = await x.lookup(`${WATCH}horizontal1`, assessClassification);
    expect(second).to.deep.equal({ ok: false, failure: 'busy', attempts: [] });
    controller.abort();
    await first;
    expect(x.running).to.equal(0);
  });

  it('a missing extractor program: extractor_missing, no second run', async () => {
    const x = new MediaInfoExtractor({ command: ['/nonexistent/yt-dlp'] });
    const r = await x.lookup(horizontal, assessMetadata);
    expect(r).to.deep.include({ ok: false, failure: 'extractor_missing' });
    expect(r.attempts).to.have.length(1);
  });
});
