// The gateway's own fetches behind the outbound policy at connect time (ADR
// 0011, "The gateway's own fetches"): the gateway as it runs (startGateway
// with its configuration), Debian's yt-dlp, and loopback standing in for the
// network behind it. OUTBOUND_ALLOWED_CIDRS=127.0.0.1/32 allows the test's
// site on 127.0.0.1 and refuses 127.0.0.2, the "internal" service, whose
// server counts every TCP connection it accepts and would serve real media
// and a real feed to whoever reached it.
//
// A URL on the allowed site that redirects to the internal one is read by
// nothing past the redirect: /metadata, /is-short, a playlist expansion and a
// podcast feed all fail, the internal server accepts no connection (ftp:
// included), and a refused open port answers exactly as a closed one.
import { readFile } from 'node:fs/promises';
import { createServer, type RequestListener, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { buildFeed, lookupResult } from '../../lib/test/batches-support.js';
import { MEDIA, generateMedia } from '../../test/support/media.js';
import { loadGatewayConfig } from '../src/config.js';
import { createApiKey } from '../src/db/api-keys.js';
import { startGateway, type RunningGateway } from '../src/server.js';
import { captureLogger, createTestDatabase, type TestDatabase } from './support.js';

const WATCH = 'https://www.youtube.com/watch?v=';
const LIST_ID = 'PLownfetches0000redirect';
const PLAYLIST = `https://www.youtube.com/playlist?list=${LIST_ID}`;
const SHOW_ID = '1500000042';

interface CountingServer {
  port: number;
  /** TCP connections accepted (not requests: a refused destination must not even be connected to). */
  accepted: number;
  stop(): Promise<void>;
}

async function listen(host: string, handler: RequestListener): Promise<CountingServer> {
  const server: Server = createServer(handler);
  const counted = { port: 0, accepted: 0, stop: () => new Promise<void>((r) => server.close(() => r())) };
  server.on('connection', () => counted.accepted++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  counted.port = (server.address() as AddressInfo).port;
  server.keepAliveTimeout = 100;
  return counted;
}

/** A port on 127.0.0.2 nothing listens on. */
async function closedPort(): Promise<number> {
  const s = await listen('127.0.0.2', () => undefined);
  await s.stop();
  return s.port;
}

describe('api-gateway: its own fetches pass the outbound policy at connect time', function () {
  this.timeout(180_000);
  let db: TestDatabase;
  let dir: string;
  let internal: CountingServer;
  let site: CountingServer;
  let gw: RunningGateway;
  let key: string;
  let closed: number;
  const logs = captureLogger();

  before(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'mj-own-fetches-'));
    const mp4 = await readFile(join(await generateMedia(), MEDIA.mp4.path));
    closed = await closedPort();
    // The internal service: real media and a real feed for whoever gets through.
    internal = await listen('127.0.0.2', (req, res) => {
      if (req.url === '/clip.mp4') return void res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': mp4.length }).end(mp4);
      const feed = buildFeed({ title: 'Internal', items: [{ title: 'Secret', enclosure: { url: `http://127.0.0.2:${internal.port}/clip.mp4` }, guid: 'a' }] });
      res.writeHead(200, { 'content-type': 'application/rss+xml' }).end(feed);
    });
    const redirects: Record<string, string> = {
      '/to-internal': `http://127.0.0.2:${internal.port}/clip.mp4`,
      '/to-closed': `http://127.0.0.2:${closed}/clip.mp4`,
      '/to-ftp': `ftp://127.0.0.2:${internal.port}/clip.mp4`,
      '/feed': `http://127.0.0.2:${internal.port}/feed.xml`,
      '/moved': '/clip.mp4',
    };
    site = await listen('127.0.0.1', (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/lookup') {
        res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' });
        return void res.end(JSON.stringify({ resultCount: 1, results: [lookupResult(SHOW_ID, `http://127.0.0.1:${site.port}/feed`)] }));
      }
      if (url.pathname === '/clip.mp4') return void res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': mp4.length }).end(mp4);
      const location = redirects[url.pathname];
      if (location) return void res.writeHead(302, { location }).end();
      res.writeHead(404).end();
    });
    const at = (path: string) => `http://127.0.0.1:${site.port}${path}`;
    const config = loadGatewayConfig({
      DATABASE_URL: db.url, SECRET_KEYS: SecretBox.generateSpec('t'), FILE_URL_SECRET: 'file-url-secret-0123456789',
      MANAGED_STORAGE_DIR: dir, STORAGE_VAULT: 'disabled', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: '5000',
      OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32',
      PODCAST_LOOKUP_ENDPOINT: at('/lookup'),
      MEDIA_INFO_URL_MAP: JSON.stringify({
        [`${WATCH}toInternal1`]: at('/to-internal'),
        [`${WATCH}toClosed001`]: at('/to-closed'),
        [PLAYLIST]: at('/feed'),
      }),
    });
    gw = await startGateway(config, { logger: logs.logger });
    key = (await createApiKey(gw.pool, { name: 'own-fetches' })).key;
  });

  after(async () => {
    await gw?.close();
    await Promise.all([internal?.stop(), site?.stop()]);
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Connections the internal server accepts while `work` runs. */
  async function reachedDuring<T>(work: () => Promise<T>): Promise<[T, number]> {
    const before = internal.accepted;
    const result = await work();
    return [result, internal.accepted - before];
  }

  async function post(path: string, body: unknown): Promise<{ status: number; body: unknown }> {
    const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: await res.json() };
  }

  const UNREADABLE = { status: 502, body: { error: 'Failed to extract metadata', details: 'Temporary network error, please retry' } };

  it('/metadata: an allowed URL, and a redirect within allowed addresses, are read through the egress', async () => {
    for (const path of ['/clip.mp4', '/moved']) {
      const answer = await post('/metadata', { url: `http://127.0.0.1:${site.port}${path}` });
      expect(answer.status, path).to.equal(200);
      expect(answer.body, path).to.deep.include({ title: 'clip', extractor: 'generic' });
    }
  });

  it('/metadata: a redirect to a refused address is not followed; the internal server accepts no connection', async () => {
    const before = site.accepted;
    const [answer, reached] = await reachedDuring(() => post('/metadata', { url: `http://127.0.0.1:${site.port}/to-internal` }));
    expect(answer).to.deep.equal(UNREADABLE);
    expect(reached).to.equal(0);
    expect(site.accepted).to.be.greaterThan(before);
    expect(logs.text()).to.include('address refused (loopback)');
  });

  it('/metadata: an open port and a closed one on the refused address answer alike', async () => {
    const [open, reached] = await reachedDuring(() => post('/metadata', { url: `http://127.0.0.1:${site.port}/to-internal` }));
    const shut = await post('/metadata', { url: `http://127.0.0.1:${site.port}/to-closed` });
    expect(shut).to.deep.equal(open);
    expect(shut).to.deep.equal(UNREADABLE);
    expect(reached).to.equal(0);
  });

  it('/metadata: a redirect to ftp:// on the refused address is not opened either', async () => {
    const [answer, reached] = await reachedDuring(() => post('/metadata', { url: `http://127.0.0.1:${site.port}/to-ftp` }));
    expect(answer.status).to.equal(502);
    expect(reached).to.equal(0);
  });

  it('/is-short: the same redirect is refused, and open and closed ports answer alike', async () => {
    const [open, reached] = await reachedDuring(() => post('/is-short', { url: `${WATCH}toInternal1` }));
    const shut = await post('/is-short', { url: `${WATCH}toClosed001` });
    expect(shut).to.deep.equal(open);
    expect(open).to.deep.equal({ status: 502, body: { error: 'Temporary network error, please retry' } });
    expect(reached).to.equal(0);
  });

  it('a playlist whose document redirects to a refused address is not expanded, and nothing is created', async () => {
    const [answer, reached] = await reachedDuring(() => post('/jobs', { url: PLAYLIST }));
    expect(reached).to.equal(0);
    expect(answer).to.deep.equal({ status: 502, body: { error: 'Playlist could not be read, please retry' } });
    expect((await gw.pool.query('SELECT count(*)::int AS n FROM jobs')).rows).to.deep.equal([{ n: 0 }]);
  });

  it('a podcast show whose feed redirects to a refused address is not read, and nothing is created', async () => {
    const [answer, reached] = await reachedDuring(() => post('/jobs', { url: `https://podcasts.apple.com/us/podcast/example/id${SHOW_ID}` }));
    expect(reached).to.equal(0);
    expect(answer).to.deep.equal({ status: 502, body: { error: 'Podcast RSS feed could not be read' } });
    expect((await gw.pool.query('SELECT count(*)::int AS n FROM jobs')).rows).to.deep.equal([{ n: 0 }]);
  });
});
