// boundedGet's options for callers other than the show resolver (whose
// bounds batches-show.test.ts covers through it): a media format's request
// headers and a limit on ports (the runner's playlist reads). Only 127.0.0.1
// is connected to.
import { gzipSync } from 'node:zlib';
import { expect } from 'chai';
import { boundedGet, GetError, type BoundedGetOptions, type GetFailure } from '../src/batches/http-get.js';
import { OutboundPolicy } from '../src/outbound.js';
import { startFakePlatform, type FakePlatform } from './batches-support.js';

describe('boundedGet: request headers and ports', function () {
  this.timeout(10_000);
  let site: FakePlatform;
  const seen: Record<string, string | undefined>[] = [];
  const base: BoundedGetOptions = { policy: new OutboundPolicy({ allowed: ['127.0.0.0/8'] }), timeoutMs: 5000, maxBytes: 1000, maxRedirects: 2 };

  async function failure(read: Promise<unknown>): Promise<GetFailure> {
    try {
      await read;
    } catch (err) {
      expect(err).to.be.instanceOf(GetError);
      return (err as GetError).failure;
    }
    throw new Error('expected a GetError');
  }

  beforeEach(async () => {
    seen.length = 0;
    site = await startFakePlatform();
    site.routes.set('/playlist.m3u8', (req, res) => {
      const { 'user-agent': agent, referer, 'accept-encoding': encoding } = req.headers;
      seen.push({ agent, referer, encoding });
      // Brotli when asked for it: a body boundedGet could not decode.
      if (encoding?.includes('br')) return void res.writeHead(200, { 'content-encoding': 'br' }).end('not really brotli');
      res.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync('#EXTM3U\n'));
    });
    site.routes.set('/moved', (_req, res) => res.writeHead(302, { location: '/playlist.m3u8' }).end());
  });
  afterEach(() => site.stop());

  it('sends the caller\'s headers (names in any case) over its own, on every hop; Accept-Encoding stays what it decodes', async () => {
    const got = await boundedGet(`${site.baseUrl}/moved`, {
      ...base, headers: { 'User-Agent': 'Mozilla/5.0 (the format\'s)', Referer: 'https://example.org/watch', 'Accept-Encoding': 'br, gzip' },
    });
    expect(got.body.toString()).to.equal('#EXTM3U\n');
    expect(seen).to.deep.equal([{ agent: 'Mozilla/5.0 (the format\'s)', referer: 'https://example.org/watch', encoding: 'gzip' }]);
    expect(site.requests).to.deep.equal(['/moved', '/playlist.m3u8']);
  });

  it('without headers of the caller: its own User-Agent', async () => {
    await boundedGet(`${site.baseUrl}/playlist.m3u8`, base);
    expect(seen).to.deep.equal([{ agent: 'mediajobs (podcast feed reader)', referer: undefined, encoding: 'gzip' }]);
  });

  it('a port the caller does not allow is refused before any connection, a redirect\'s too', async () => {
    const port = Number(new URL(site.baseUrl).port);
    expect(await failure(boundedGet(`${site.baseUrl}/playlist.m3u8`, { ...base, allowPort: (p) => p !== port }))).to.deep.equal({ kind: 'port_refused', port });
    site.routes.set('/elsewhere', (_req, res) => res.writeHead(302, { location: 'http://127.0.0.1:25/' }).end());
    expect(await failure(boundedGet(`${site.baseUrl}/elsewhere`, { ...base, allowPort: (p) => p === port }))).to.deep.equal({ kind: 'port_refused', port: 25 });
    expect(site.requests).to.deep.equal(['/elsewhere']);
  });

  it('a URL other than http(s), or one that does not parse: bad_url, nothing opened', async () => {
    for (const url of ['file:///etc/hosts', 'ftp://127.0.0.1/x', 'not a url']) expect(await failure(boundedGet(url, base)), url).to.deep.equal({ kind: 'bad_url' });
  });
});
