// Loopback fakes for the batch-source tests: the podcast platform's lookup
// API (answering the real API's shape) and a document server whose routes
// each test sets (feeds, errors, redirects, slow or endless bodies), plus a
// builder of realistic podcast RSS feeds.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface FakePlatform {
  baseUrl: string;
  /** `<baseUrl>/lookup`, for PODCAST_LOOKUP_ENDPOINT. */
  lookupEndpoint: string;
  /** Path and query of every request, in order. */
  requests: string[];
  /** The lookup API's knowledge: show id → its result object (as in `results[0]`). */
  shows: Map<string, Record<string, unknown>>;
  /** Other paths → handler; unknown paths answer 404. */
  routes: Map<string, Handler>;
  /** Connections closed by the client while a response was still being written. */
  readonly droppedResponses: number;
  stop(): Promise<void>;
}

/** A lookup result as the real API gives one (`entity=podcast`), with the given feed URL. */
export function lookupResult(id: string, feedUrl: string | undefined, name = 'The Example Show'): Record<string, unknown> {
  return {
    wrapperType: 'track', kind: 'podcast', collectionId: Number(id), trackId: Number(id),
    artistName: 'Example Media', collectionName: name, trackName: name,
    collectionViewUrl: `https://podcasts.apple.com/us/podcast/example/id${id}?uo=4`,
    ...(feedUrl !== undefined && { feedUrl }),
    artworkUrl600: 'https://is1-ssl.mzstatic.com/image/thumb/Podcasts/600x600bb.jpg',
    releaseDate: '2024-03-01T10:00:00Z', trackCount: 3, country: 'USA', primaryGenreName: 'News',
  };
}

export async function startFakePlatform(): Promise<FakePlatform> {
  const requests: string[] = [];
  const shows = new Map<string, Record<string, unknown>>();
  const routes = new Map<string, Handler>();
  let droppedResponses = 0;
  const server = createServer((req, res) => {
    requests.push(req.url ?? '');
    res.on('close', () => {
      if (!res.writableFinished) droppedResponses++;
    });
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/lookup') {
      const show = shows.get(url.searchParams.get('id') ?? '');
      const results = show && url.searchParams.get('entity') === 'podcast' ? [show] : [];
      // The real API answers text/javascript, with leading blank lines.
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' });
      return void res.end(`\n\n\n${JSON.stringify({ resultCount: results.length, results })}`);
    }
    const handler = routes.get(url.pathname);
    if (handler) return handler(req, res);
    res.writeHead(404, { 'content-type': 'text/html' }).end('<html><body>Not Found</body></html>');
  });
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    baseUrl,
    lookupEndpoint: `${baseUrl}/lookup`,
    requests,
    shows,
    routes,
    get droppedResponses() {
      return droppedResponses;
    },
    stop: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

/** A handler answering `body` with `type`. */
export function serve(body: string | Buffer, type = 'application/rss+xml; charset=utf-8', headers: Record<string, string> = {}): Handler {
  return (_req, res) => void res.writeHead(200, { 'content-type': type, ...headers }).end(body);
}

export function redirectTo(location: string, status = 302): Handler {
  return (_req, res) => void res.writeHead(status, { location }).end();
}

export interface FeedItem {
  title?: string;
  /** Inside CDATA, as hosting platforms publish show notes. */
  description?: string;
  pubDate?: string;
  enclosure?: { url: string; type?: string; length?: number };
  /** itunes:image href. */
  image?: string;
  guid?: string;
  link?: string;
}

export interface FeedChannel {
  title: string;
  image?: string;
  /** The prefix the iTunes namespace is bound to. */
  itunesPrefix?: string;
  items: FeedItem[];
}

const escapeXml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** An RSS 2.0 podcast feed shaped like those hosting platforms publish. */
export function buildFeed(channel: FeedChannel): string {
  const it = channel.itunesPrefix ?? 'itunes';
  const items = channel.items.map((item, i) => [
    '    <item>',
    item.title !== undefined ? `      <title>${escapeXml(item.title)}</title>` : '',
    item.title !== undefined ? `      <${it}:title>${escapeXml(item.title)}</${it}:title>` : '',
    item.description !== undefined ? `      <description><![CDATA[${item.description}]]></description>` : '',
    item.link !== undefined ? `      <link>${escapeXml(item.link)}</link>` : '',
    item.guid !== undefined ? `      <guid isPermaLink="false">${escapeXml(item.guid)}</guid>` : '',
    item.pubDate !== undefined ? `      <pubDate>${item.pubDate}</pubDate>` : '',
    item.enclosure !== undefined
      ? `      <enclosure url="${escapeXml(item.enclosure.url)}" length="${item.enclosure.length ?? 1000}" type="${item.enclosure.type ?? 'audio/mpeg'}"/>`
      : '',
    item.image !== undefined ? `      <${it}:image href="${escapeXml(item.image)}"/>` : '',
    `      <${it}:duration>00:${String(10 + (i % 50)).padStart(2, '0')}:00</${it}:duration>`,
    `      <${it}:episode>${channel.items.length - i}</${it}:episode>`,
    `      <${it}:explicit>false</${it}:explicit>`,
    '    </item>',
  ].filter(Boolean).join('\n'));
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<rss version="2.0" xmlns:${it}="http://www.itunes.com/dtds/podcast-1.0.dtd" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:atom="http://www.w3.org/2005/Atom">`,
    '  <channel>',
    `    <title>${escapeXml(channel.title)}</title>`,
    '    <link>https://example.org/show</link>',
    '    <language>en-us</language>',
    '    <atom:link href="https://feeds.example.org/show.xml" rel="self" type="application/rss+xml"/>',
    '    <description><![CDATA[<p>A show about <b>examples</b>.</p>]]></description>',
    `    <${it}:author>Example Media</${it}:author>`,
    `    <${it}:owner><${it}:name>Example Media</${it}:name><${it}:email>feeds@example.org</${it}:email></${it}:owner>`,
    `    <${it}:category text="News"><${it}:category text="Daily News"/></${it}:category>`,
    `    <${it}:type>episodic</${it}:type>`,
    channel.image !== undefined ? `    <${it}:image href="${escapeXml(channel.image)}"/>` : '',
    channel.image !== undefined ? `    <image><url>${escapeXml(channel.image)}</url><title>${escapeXml(channel.title)}</title><link>https://example.org/show</link></image>` : '',
    items,
    '  </channel>',
    '</rss>',
    '',
  ].filter(Boolean).join('\n');
}

/** A feed of `n` episodes, each an enclosure under `mediaBase`, newest first. */
export function feedOfSize(n: number, mediaBase: string): string {
  return buildFeed({
    title: `Show of ${n}`,
    items: Array.from({ length: n }, (_x, i) => ({
      title: `Episode ${n - i}`,
      pubDate: new Date(Date.UTC(2024, 0, 1) - i * 86_400_000).toUTCString(),
      enclosure: { url: `${mediaBase}/episode-${n - i}.mp3` },
    })),
  });
}
