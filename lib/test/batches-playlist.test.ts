// A genuine playlist's videos with the real yt-dlp: MEDIA_INFO_URL_MAP sends
// the canonical playlist URL to a document on loopback that yt-dlp's generic
// extractor reads as a playlist (an RSS feed whose items point at HLS media
// made with ffmpeg), the flat extraction reads nothing but that document, and
// a list over MAX_PLAYLIST_SIZE is refused whole.
import { expect } from 'chai';
import { BatchSources } from '../src/batches/index.js';
import { BatchSourceError } from '../src/batches/errors.js';
import { PlaylistExpander } from '../src/batches/playlist.js';
import { OutboundPolicy } from '../src/outbound.js';
import { unreachableUrl } from '../../test/support/media.js';
import { buildFeed, feedOfSize, serve, startFakePlatform, type FakePlatform } from './batches-support.js';
import {
  makeHls, processesWith, removeDir, scratchDir, startNeverEndingPage, startRecordingProxy, startStaticServer,
  type NeverEndingPage, type StaticServer,
} from './media-info-support.js';

const PL = 'PLBCF2DAC6FFB574DE';
const PLAYLIST = `https://www.youtube.com/playlist?list=${PL}`;

async function failure(promise: Promise<unknown>): Promise<BatchSourceError> {
  try {
    await promise;
  } catch (err) {
    expect(err).to.be.instanceOf(BatchSourceError);
    return err as BatchSourceError;
  }
  throw new Error('expected a BatchSourceError');
}

describe('batches: playlist expansion with the real yt-dlp', function () {
  this.timeout(60_000);
  let dir: string;
  let media: StaticServer;
  let pages: FakePlatform;
  let slow: NeverEndingPage;
  let first: string;
  let second: string;

  /** An expander whose canonical playlist URL is mapped to `target`. */
  const expander = (target: string, maxEntries = 500, extra: ConstructorParameters<typeof PlaylistExpander>[0] = {}) =>
    new PlaylistExpander({ urlMap: new Map([[PLAYLIST, target]]), ...extra }, maxEntries);
  /**
   * For the size rules: yt-dlp reads a 500-entry list in 3 s on a quiet machine and took 13 s in a loaded
   * CI run, near the default lookup bound, past which the answer would be a timeout instead of the 413 tested.
   */
  const LONG_LIST = { fullTimeoutMs: 55_000 };

  before(async () => {
    dir = await scratchDir();
    const [a, b] = await Promise.all([
      makeHls(dir, 'first', [{ width: 320, height: 180 }], 1),
      makeHls(dir, 'second', [{ width: 180, height: 320 }], 1),
    ]);
    media = await startStaticServer(dir);
    first = `${media.baseUrl}/${a}`;
    second = `${media.baseUrl}/${b}`;
    pages = await startFakePlatform();
    pages.routes.set('/playlist.rss', serve(buildFeed({
      title: 'A playlist',
      items: [
        { title: 'First video', link: first, guid: 'v-1' },
        { title: 'Second video', enclosure: { url: second, type: 'application/vnd.apple.mpegurl' } },
        // The platform's own entries come back as canonical watch URLs, whatever form they had.
        { title: 'On the platform', link: `https://youtu.be/dQw4w9WgXcQ?list=${PL}&t=5` },
      ],
    })));
    slow = await startNeverEndingPage();
  });

  after(async () => {
    await media?.stop();
    await pages?.stop();
    await slow?.stop();
    if (dir) await removeDir(dir);
  });

  it('builds the run from /metadata\'s settings: flat, one entry past the limit, proxy session, extra args, mapped URL last', () => {
    const x = new PlaylistExpander({
      command: ['python3', '-m', 'yt_dlp'], extraArgs: ['--cookies', '/c.txt'], proxy: 'http://u-{session}:p@proxy:1', fullTimeoutMs: 20_000,
      urlMap: new Map([[PLAYLIST, 'http://127.0.0.1:1/list.rss']]),
    }, 500);
    const argv = x.argv(PLAYLIST, 's1');
    expect(argv.slice(0, 3)).to.deep.equal(['python3', '-m', 'yt_dlp']);
    expect(argv).to.include.members(['--flat-playlist', '--yes-playlist', '--dump-single-json', '--skip-download', '--ignore-config', '--no-cache-dir']);
    expect(argv).not.to.include('--no-playlist');
    expect(argv.join(' ')).to.contain('--playlist-end 501 --socket-timeout 10 --proxy http://u-s1:p@proxy:1 --cookies /c.txt -- http://127.0.0.1:1/list.rss');
    expect(x.argv(`https://www.youtube.com/playlist?list=UU${'x'.repeat(22)}`, 's2').at(-1)).to.equal(`https://www.youtube.com/playlist?list=UU${'x'.repeat(22)}`);
  });

  it('lists the entries in order, reading only the playlist document: no video is extracted', async () => {
    const mediaBefore = media.paths.length;
    const pagesBefore = pages.requests.length;
    const entries = await expander(`${pages.baseUrl}/playlist.rss`).expand(PLAYLIST);
    expect(entries).to.deep.equal([
      { url: first, title: 'First video' },
      { url: second, title: 'Second video' },
      { url: 'https://www.youtube.com/watch?v=dQw4w9WgXcQ', title: 'On the platform' },
    ]);
    expect(pages.requests.slice(pagesBefore)).to.deep.equal(['/playlist.rss']);
    expect(media.paths.slice(mediaBefore)).to.deep.equal([]);
  });

  it('500 entries: accepted whole', async () => {
    pages.routes.set('/500.rss', serve(feedOfSize(500, media.baseUrl)));
    const entries = await expander(`${pages.baseUrl}/500.rss`, 500, LONG_LIST).expand(PLAYLIST);
    expect(entries).to.have.length(500);
    expect(entries[0]).to.deep.equal({ url: `${media.baseUrl}/episode-500.mp3`, title: 'Episode 500' });
    expect(entries[499]).to.deep.equal({ url: `${media.baseUrl}/episode-1.mp3`, title: 'Episode 1' });
  });

  it('501 entries: 413, never truncated', async () => {
    pages.routes.set('/501.rss', serve(feedOfSize(501, media.baseUrl)));
    const err = await failure(expander(`${pages.baseUrl}/501.rss`, 500, LONG_LIST).expand(PLAYLIST));
    expect(err).to.include({ code: 'too_large', status: 413, message: 'Playlist has more than 500 videos; batches are limited to 500 and never truncated' });
  });

  it('a much longer list is refused the same way, and MAX_PLAYLIST_SIZE sets the limit', async () => {
    pages.routes.set('/2000.rss', serve(feedOfSize(2000, media.baseUrl)));
    expect(await failure(expander(`${pages.baseUrl}/2000.rss`, 500, LONG_LIST).expand(PLAYLIST))).to.include({ code: 'too_large', status: 413 });
    const small = await failure(expander(`${pages.baseUrl}/playlist.rss`, 2).expand(PLAYLIST));
    expect(small.message).to.equal('Playlist has more than 2 videos; batches are limited to 2 and never truncated');
  });

  it('a playlist that does not exist (404): 400', async () => {
    const err = await failure(expander(`${pages.baseUrl}/missing.rss`).expand(PLAYLIST));
    expect(err).to.include({ code: 'playlist_unavailable', status: 400, message: 'Playlist is private, unavailable or does not exist' });
  });

  it('a single video where a playlist was expected: 400', async () => {
    const err = await failure(expander(first).expand(PLAYLIST));
    expect(err).to.include({ code: 'playlist_unavailable', status: 400, reason: 'playlist: yt-dlp found no playlist' });
  });

  it('an empty playlist: 400', async () => {
    pages.routes.set('/empty.rss', serve(buildFeed({ title: 'Nothing yet', items: [] })));
    expect(await failure(expander(`${pages.baseUrl}/empty.rss`).expand(PLAYLIST))).to.include({ code: 'empty', status: 400, message: 'Playlist has no videos' });
  });

  it('the platform unreachable: 502, retry', async () => {
    const err = await failure(expander(await unreachableUrl('/list.rss')).expand(PLAYLIST));
    expect(err).to.include({ code: 'playlist_failed', status: 502, message: 'Playlist could not be read, please retry' });
    expect(err.reason).to.match(/^playlist: connection_error/);
  });

  it('a page that never ends: killed at the full lookup bound', async () => {
    const t0 = Date.now();
    const err = await failure(expander(slow.url, 500, { fullTimeoutMs: 1500 }).expand(PLAYLIST));
    expect(err).to.include({ code: 'playlist_failed', status: 502, reason: 'playlist: timeout' });
    // Not before its bound; after it only as late as a loaded machine's timers (a page that never ends never ends).
    expect(Date.now() - t0).to.be.within(1400, 15_000);
    expect(await slow.allClosed(10_000)).to.equal(true);
    expect(await processesWith(slow.url)).to.deep.equal([]);
  });

  it('an abort kills the process: aborted', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 800);
    const err = await failure(expander(slow.url).expand(PLAYLIST, controller.signal));
    expect(err).to.include({ code: 'aborted' });
    expect(await processesWith(slow.url)).to.deep.equal([]);
  });

  it('through the proxy, with a fresh session per run', async () => {
    const proxy = await startRecordingProxy();
    try {
      const x = expander(`${pages.baseUrl}/playlist.rss`, 500, { proxy: proxy.proxyTemplate });
      // The proxy refuses its first session (a blocked exit address): that run fails, the next one has a new session.
      expect(await failure(x.expand(PLAYLIST))).to.include({ code: 'playlist_failed', status: 502 });
      expect(await x.expand(PLAYLIST)).to.have.length(3);
      expect(new Set(proxy.sessions).size).to.equal(2);
      expect(proxy.urls.every((u) => u === `${pages.baseUrl}/playlist.rss`)).to.equal(true);
    } finally {
      await proxy.stop();
    }
  });

  it('a missing extractor program: 500', async () => {
    const err = await failure(expander(`${pages.baseUrl}/playlist.rss`, 500, { command: ['/nonexistent/yt-dlp'] }).expand(PLAYLIST));
    expect(err).to.include({ code: 'extractor_missing', status: 500 });
  });

  it('BatchSources: a detected playlist expands with the gateway\'s extractor settings', async () => {
    const sources = new BatchSources({
      lookupEndpoint: 'https://itunes.apple.com/lookup', maxEntries: 500, policy: new OutboundPolicy(),
      mediaInfo: { urlMap: new Map([[PLAYLIST, `${pages.baseUrl}/playlist.rss`]]) },
    });
    const expanded = await sources.expand({ kind: 'playlist', listId: PL, canonicalUrl: PLAYLIST });
    expect(expanded).to.deep.include({ kind: 'playlist', listId: PL, canonicalUrl: PLAYLIST });
    expect(expanded.episodes.map((e) => e.title)).to.deep.equal(['First video', 'Second video', 'On the platform']);
  });
});
