// A show id to its episodes through a fake of the platform's lookup API and
// feeds served on loopback: the calls made, the episodes returned, and each
// way a lookup or feed can fail, with the status the gateway answers. Only
// 127.0.0.1 is ever connected to: refused addresses appear in redirect
// Locations and resolver answers only, and the policy stops them first.
import { expect } from 'chai';
import { gzipSync } from 'node:zlib';
import { BatchSources } from '../src/batches/index.js';
import { BatchSourceError } from '../src/batches/errors.js';
import { resolveShow, type ShowResolverOptions } from '../src/batches/show.js';
import { OutboundPolicy } from '../src/outbound.js';
import { EXAMPLE_FEED } from './batches-fixtures.js';
import { buildFeed, feedOfSize, lookupResult, redirectTo, serve, startFakePlatform, type FakePlatform } from './batches-support.js';

const LOOPBACK = new OutboundPolicy({ allowed: ['127.0.0.0/8'] });

async function failure(promise: Promise<unknown>): Promise<BatchSourceError> {
  try {
    await promise;
  } catch (err) {
    expect(err).to.be.instanceOf(BatchSourceError);
    return err as BatchSourceError;
  }
  throw new Error('expected a BatchSourceError');
}

describe('batches: show resolution through the lookup API and the RSS feed', function () {
  this.timeout(20_000);
  let platform: FakePlatform;
  let options: ShowResolverOptions;

  /** Register show `id` whose feed is served by `handler` at /feeds/<id>.xml. */
  function showWithFeed(id: string, handler: Parameters<FakePlatform['routes']['set']>[1]): void {
    platform.shows.set(id, lookupResult(id, `${platform.baseUrl}/feeds/${id}.xml`));
    platform.routes.set(`/feeds/${id}.xml`, handler);
  }

  beforeEach(async () => {
    platform = await startFakePlatform();
    options = { lookupEndpoint: platform.lookupEndpoint, maxEpisodes: 500, policy: LOOPBACK };
  });
  afterEach(() => platform.stop());

  it('asks the lookup API as the real one is asked, then reads the feed it names', async () => {
    showWithFeed('1200361736', serve(EXAMPLE_FEED));
    const show = await resolveShow('1200361736', options);
    expect(platform.requests).to.deep.equal(['/lookup?id=1200361736&entity=podcast', '/feeds/1200361736.xml']);
    expect(show.podcastId).to.equal('1200361736');
    expect(show.feedUrl).to.equal(`${platform.baseUrl}/feeds/1200361736.xml`);
    expect(show.title).to.equal('The Example Show & Friends');
    expect(show.episodes.map((e) => [e.title, e.releaseDate, e.imageUrl])).to.deep.equal([
      ['Ep. 3: <Tags> & "quotes"', '2024-03-05T14:30:00.000Z', 'https://img.example.org/ep3.jpg'],
      ['Ep. 2 without its own artwork', '2024-03-01T06:00:00.000Z', 'https://img.example.org/show-3000.jpg'],
      ['1984', '2024-03-01T07:15:00.000Z', 'https://img.example.org/ep1.png'],
    ]);
  });

  it('follows redirects of the feed (a moved feed), within the limit', async () => {
    platform.shows.set('7', lookupResult('7', `${platform.baseUrl}/old-feed`));
    platform.routes.set('/old-feed', redirectTo('/moved-feed', 301));
    platform.routes.set('/moved-feed', redirectTo(`${platform.baseUrl}/feeds/7.xml`, 307));
    platform.routes.set('/feeds/7.xml', serve(EXAMPLE_FEED));
    const show = await resolveShow('7', options);
    expect(show.feedUrl).to.equal(`${platform.baseUrl}/feeds/7.xml`);
    expect(show.episodes).to.have.length(3);
  });

  it('reads a gzip-compressed feed', async () => {
    showWithFeed('8', serve(gzipSync(EXAMPLE_FEED), 'application/rss+xml', { 'content-encoding': 'gzip' }));
    expect((await resolveShow('8', options)).episodes).to.have.length(3);
  });

  it('500 episodes: accepted whole', async () => {
    showWithFeed('500', serve(feedOfSize(500, `${platform.baseUrl}/media`)));
    const show = await resolveShow('500', options);
    expect(show.episodes).to.have.length(500);
    expect(show.episodes[0]).to.deep.equal({ url: `${platform.baseUrl}/media/episode-500.mp3`, title: 'Episode 500', releaseDate: '2024-01-01T00:00:00.000Z' });
    expect(show.episodes[499]!.title).to.equal('Episode 1');
  });

  it('501 episodes: 413, never truncated', async () => {
    showWithFeed('501', serve(feedOfSize(501, `${platform.baseUrl}/media`)));
    const err = await failure(resolveShow('501', options));
    expect(err).to.include({ code: 'too_large', status: 413, message: 'Podcast show has more than 500 episodes; batches are limited to 500 and never truncated' });
  });

  it('the limit is MAX_PLAYLIST_SIZE, whatever it is set to', async () => {
    showWithFeed('3', serve(EXAMPLE_FEED));
    const err = await failure(resolveShow('3', { ...options, maxEpisodes: 2 }));
    expect(err).to.include({ code: 'too_large', status: 413 });
    expect(err.message).to.contain('more than 2 episodes');
  });

  describe('the lookup', () => {
    it('an id the platform does not know: 400 Podcast show not found', async () => {
      const err = await failure(resolveShow('999', options));
      expect(err).to.include({ code: 'show_not_found', status: 400, message: 'Podcast show not found' });
      expect(platform.requests).to.deep.equal(['/lookup?id=999&entity=podcast']);
    });

    it('a show without a public feed: 400', async () => {
      platform.shows.set('5', lookupResult('5', undefined));
      expect(await failure(resolveShow('5', options))).to.include({ code: 'show_without_feed', status: 400, message: 'Podcast show has no public RSS feed' });
    });

    it('the lookup service failing: 502, and no feed is fetched', async () => {
      platform.routes.set('/broken/lookup', (_req, res) => void res.writeHead(503).end('maintenance'));
      const err = await failure(resolveShow('1', { ...options, lookupEndpoint: `${platform.baseUrl}/broken/lookup` }));
      expect(err).to.include({ code: 'lookup_failed', status: 502, message: 'Podcast lookup failed, please retry', reason: 'lookup: HTTP 503' });
    });

    it('an endpoint path that does not exist (404) is the lookup failing, not a verdict on the show: 502', async () => {
      const err = await failure(resolveShow('1200361736', { ...options, lookupEndpoint: `${platform.baseUrl}/wrong/path` }));
      expect(err).to.include({ code: 'lookup_failed', status: 502, reason: 'lookup: HTTP 404' });
    });

    it('the lookup service answering something else than JSON: 502', async () => {
      platform.routes.set('/html/lookup', serve('<html>Sorry</html>', 'text/html'));
      const err = await failure(resolveShow('1', { ...options, lookupEndpoint: `${platform.baseUrl}/html/lookup` }));
      expect(err).to.include({ code: 'lookup_failed', status: 502, reason: 'lookup: answer is not JSON' });
    });

    it('an answer over the lookup bound (1 MB by default): 502', async () => {
      platform.routes.set('/big/lookup', serve(`{"resultCount":1,"results":[{"pad":"${'x'.repeat(1024 * 1024)}"}]}`, 'text/javascript'));
      const err = await failure(resolveShow('1', { ...options, lookupEndpoint: `${platform.baseUrl}/big/lookup` }));
      expect(err).to.include({ code: 'lookup_failed', reason: 'lookup: too large' });
    });

    it('the lookup endpoint is held to the outbound policy too', async () => {
      const err = await failure(resolveShow('1', { ...options, policy: new OutboundPolicy() }));
      expect(err).to.include({ code: 'lookup_failed', status: 502, reason: 'lookup: address refused (loopback)' });
      expect(platform.requests).to.deep.equal([]);
    });

    it('unreachable: 502', async () => {
      const port = Number(new URL(platform.baseUrl).port);
      await platform.stop();
      const err = await failure(resolveShow('1', { ...options, lookupEndpoint: `http://127.0.0.1:${port}/lookup` }));
      expect(err).to.include({ code: 'lookup_failed', status: 502, reason: 'lookup: network error (ECONNREFUSED)' });
      platform = await startFakePlatform();
    });
  });

  describe('the feed', () => {
    const cases: [string, Parameters<FakePlatform['routes']['set']>[1], string][] = [
      ['gone (404)', (_req, res) => void res.writeHead(404).end('not found'), 'feed: HTTP 404'],
      ['an HTML page instead of XML', serve('<!DOCTYPE html><html><body><h1>Podcast</h1><p>Listen on<br>our site</body></html>', 'text/html'), 'feed: feed is not well-formed XML'],
      ['well-formed XML that is not RSS', serve('<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"/>', 'application/atom+xml'), 'feed: document is not an RSS feed'],
      ['truncated XML', serve(EXAMPLE_FEED.slice(0, Math.floor(EXAMPLE_FEED.length * 0.6))), 'feed: feed is not well-formed XML'],
      ['a body cut short of its Content-Length', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/rss+xml', 'content-length': String(EXAMPLE_FEED.length) });
        res.write(EXAMPLE_FEED.slice(0, 200));
        setTimeout(() => res.destroy(), 50);
      }, 'feed: network error (ECONNRESET)'],
      ['a redirect loop', redirectTo('/feeds/loop.xml'), 'feed: too many redirects'],
      ['a redirect to another scheme', redirectTo('file:///etc/passwd'), 'feed: bad redirect'],
      ['an unknown content encoding', serve('x', 'application/rss+xml', { 'content-encoding': 'br' }), 'feed: encoding'],
    ];
    for (const [what, handler, reason] of cases) {
      it(`${what}: 502 with a clear message`, async () => {
        platform.shows.set('9', lookupResult('9', `${platform.baseUrl}/feeds/loop.xml`));
        platform.routes.set('/feeds/loop.xml', handler);
        const err = await failure(resolveShow('9', options));
        expect(err).to.include({ code: 'feed_failed', status: 502, message: 'Podcast RSS feed could not be read', reason });
      });
    }

    it('no episodes at all: 400', async () => {
      showWithFeed('10', serve(buildFeed({ title: 'Empty', items: [{ title: 'Trailer (text)', link: 'https://example.org' }] })));
      expect(await failure(resolveShow('10', options))).to.include({ code: 'empty', status: 400, message: 'Podcast show has no episodes' });
    });

    it('larger than the feed bound, declared: refused from Content-Length', async () => {
      showWithFeed('11', serve(EXAMPLE_FEED));
      const err = await failure(resolveShow('11', { ...options, maxFeedBytes: 1000 }));
      expect(err).to.include({ code: 'feed_failed', reason: 'feed: too large' });
    });

    it('larger than the feed bound, streamed without a length: the connection is dropped at the bound', async () => {
      let sent = 0;
      showWithFeed('12', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/rss+xml' });
        res.write('<?xml version="1.0"?><rss version="2.0"><channel><title>Endless</title>');
        const chunk = `<item><title>${'x'.repeat(1000)}</title></item>`;
        const timer = setInterval(() => {
          for (let i = 0; i < 16; i++) {
            sent += chunk.length;
            res.write(chunk);
          }
        }, 5);
        res.on('close', () => clearInterval(timer));
      });
      const err = await failure(resolveShow('12', { ...options, maxFeedBytes: 256 * 1024 }));
      expect(err).to.include({ code: 'feed_failed', reason: 'feed: too large' });
      await new Promise((r) => setTimeout(r, 100));
      expect(platform.droppedResponses).to.equal(1);
      expect(sent).to.be.below(20 * 256 * 1024);
    });

    it('larger than the feed bound after gzip: the decompressed size counts', async () => {
      const bomb = gzipSync(`<?xml version="1.0"?><rss version="2.0"><channel><title>${' '.repeat(4 * 1024 * 1024)}</title></channel></rss>`);
      expect(bomb.length).to.be.below(10_000);
      showWithFeed('13', serve(bomb, 'application/rss+xml', { 'content-encoding': 'gzip' }));
      const err = await failure(resolveShow('13', { ...options, maxFeedBytes: 1024 * 1024 }));
      expect(err).to.include({ code: 'feed_failed', reason: 'feed: too large' });
    });

    it('a server that never finishes: cut at the time bound, the connection closed then, not only the wait given up', async () => {
      let closedAt: number | undefined;
      showWithFeed('14', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/rss+xml' });
        res.write('<?xml version="1.0"?><rss version="2.0"><channel>');
        const timer = setInterval(() => res.write(' '), 50);
        res.on('close', () => {
          clearInterval(timer);
          closedAt = Date.now();
        });
      });
      const started = Date.now();
      const err = await failure(resolveShow('14', { ...options, feedTimeoutMs: 600 }));
      expect(err).to.include({ code: 'feed_failed', status: 502, reason: 'feed: timeout' });
      expect(Date.now() - started).to.be.within(550, 2000);
      await new Promise((r) => setTimeout(r, 100));
      expect(closedAt, 'the feed server saw its connection closed').to.be.a('number');
      expect(closedAt! - started).to.be.within(550, 2000);
    });

    it('a redirect to the cloud metadata address: refused before any connection', async () => {
      showWithFeed('15', redirectTo('http://169.254.169.254/latest/meta-data/iam/security-credentials/'));
      const err = await failure(resolveShow('15', options));
      expect(err).to.include({ code: 'feed_failed', status: 502, reason: 'feed: address refused (link-local)' });
    });

    it('a redirect to a name that resolves to a refused address: refused at connect time, before any byte', async () => {
      const resolved: string[] = [];
      const policy = new OutboundPolicy({
        allowed: ['127.0.0.0/8'],
        resolve: async (host) => {
          resolved.push(host);
          return [{ address: '169.254.169.254', family: 4 }];
        },
      });
      showWithFeed('16', redirectTo('http://metadata.internal.example/computeMetadata/v1/'));
      const err = await failure(resolveShow('16', { ...options, policy }));
      expect(err).to.include({ code: 'feed_failed', reason: 'feed: address refused (link-local)' });
      expect(resolved).to.deep.equal(['metadata.internal.example']);
    });

    it('a feed at a private address the policy does not allow: refused', async () => {
      platform.shows.set('17', lookupResult('17', 'http://10.0.0.5/feed.xml'));
      const err = await failure(resolveShow('17', options));
      expect(err).to.include({ code: 'feed_failed', reason: 'feed: address refused (private)' });
    });
  });

  it('an aborted request (client gone) stops the fetch: aborted, nothing to answer', async () => {
    showWithFeed('18', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/rss+xml' });
      res.write('<rss>');
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const err = await failure(resolveShow('18', options, controller.signal));
    expect(err).to.include({ code: 'aborted' });
  });

  it('BatchSources: a show source expands into its episodes; more expansions than slots at once are refused with 503', async () => {
    showWithFeed('19', serve(EXAMPLE_FEED));
    platform.shows.set('20', lookupResult('20', `${platform.baseUrl}/feeds/slow.xml`));
    let release: () => void = () => undefined;
    platform.routes.set('/feeds/slow.xml', (_req, res) => {
      release = () => res.writeHead(200, { 'content-type': 'application/rss+xml' }).end(EXAMPLE_FEED);
    });
    const sources = new BatchSources({ lookupEndpoint: platform.lookupEndpoint, maxEntries: 500, policy: LOOPBACK, mediaInfo: { maxConcurrent: 1 } });
    const expanded = await sources.expand({ kind: 'show', podcastId: '19' });
    expect(expanded).to.deep.include({ kind: 'show', podcastId: '19', title: 'The Example Show & Friends' });
    expect(expanded.episodes.map((e) => e.url)).to.have.length(3);

    const slow = sources.expand({ kind: 'show', podcastId: '20' });
    while (platform.requests.at(-1) !== '/feeds/slow.xml') await new Promise((r) => setTimeout(r, 10));
    const busy = await failure(sources.expand({ kind: 'show', podcastId: '19' }));
    expect(busy).to.include({ code: 'busy', status: 503 });
    release();
    expect((await slow).episodes).to.have.length(3);
    expect(sources.running).to.equal(0);
  });
});
