// A loopback video platform that defends itself, for the tests of platforms
// and proxy pools (issue 37): it owns the platform's side of every defence
// the service must recognise; the exits it tells apart are the loopback
// upstream proxies' (upstream-proxies.ts), the service's answers are the
// operator's and the runner's.
//
// yt-dlp reads its watch pages with the generic extractor. A page carries
// only Open Graph tags (og:title, og:video), no <video> element: with one
// the html5 embed extractor would win and name the video `<page>-1` and
// title it `<title> (1)`; through og:video the id is the media file's name
// (`/media/<id>.mp4?...`, the query kept free of dots so the extractor's
// splitext cannot cut inside it) and the title is og:title, both stable.
//
// Every answer depends on the exit identity: the connecting socket's source
// address. A direct connection comes from 127.0.0.1; each upstream proxy
// connects out from its own 127.0.0.N. What the platform does per identity:
// - rate limits on watch pages (a sliding window), answered 429 with or
//   without Retry-After;
// - flags: a bot check, a captcha or a ban (ANSWERS below);
// - sign-in: with `requireCookie`, a page needs a cookie the platform issued
//   and has not revoked (a cookie file's own expiry makes yt-dlp drop it);
// - signed media URLs (`expire=<epoch>&ei=<nonce>&sig=`), bound to the exit
//   that viewed the page, as the major platform binds its media URLs to an
//   address: another exit, a bad signature or a past `expire` get 403;
// - Range on media; an optional pace per response so downloads overlap.
//
// What reaches the runner. For the generic extractor a page is just HTML:
// yt-dlp prints none of it. What it prints for a page it cannot read is
// `ERROR: [generic] Unable to download webpage: HTTP Error <status>:
// <reason phrase>`, the phrase being the server's own (urllib's HTTPError).
// So every defence is answered with its status and the real platform's
// wording as the reason phrase (ASCII: a status line is Latin-1), the page
// body carrying the full text as the platform shows it. The runner's table
// (runner-image/src/classify.ts, lib's ytdlp-messages.ts) reads these phrases
// as it reads the major platform's extractor messages.
import { createHmac, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { MEDIA, generateMedia, parseRange } from './media.js';

/** The defences the platform answers with: status, the reason phrase yt-dlp prints, and the page's text. */
export const ANSWERS = {
  // The major platform's bot check, word for word (its page uses a typographic apostrophe).
  bot_check: { status: 403, reason: 'Sign in to confirm you\'re not a bot', text: 'Sign in to confirm you’re not a bot. This helps protect our community. Learn more' },
  // A page that needs a signed-in session, asked without one (or with an expired or revoked cookie).
  sign_in: { status: 401, reason: 'Sign in required', text: 'This video is only available for registered users. Sign in to continue.' },
  // The "sorry" interstitial: unusual traffic, solve a captcha.
  captcha: { status: 429, reason: 'Unusual traffic - please solve the CAPTCHA', text: 'Our systems have detected unusual traffic from your computer network. Please solve this CAPTCHA to show you are not a robot.' },
  // A banned exit: pages and media alike.
  forbidden: { status: 403, reason: 'Forbidden', text: 'Your client does not have permission to get this content.' },
  rate_limited: { status: 429, reason: 'Too Many Requests', text: 'Too many requests. Try again later.' },
  // A media URL past its `expire`, signed for another exit, or not signed by us: what the media host answers.
  expired_url: { status: 403, reason: 'Forbidden', text: '' },
} as const;

export type Answer = keyof typeof ANSWERS;
/** What a flagged exit gets on every page (and a ban on media too). */
export type Flag = 'bot_check' | 'captcha' | 'ban';

/** The address a direct (unproxied) connection comes from. */
export const DIRECT = '127.0.0.1';

export interface Video {
  id: string;
  title: string;
  /**
   * Where og:video points instead of the platform's own signed media: a page
   * that sends its reader elsewhere (another host, an address the outbound
   * policy refuses).
   */
  mediaUrl?: string;
}

export interface RateLimit {
  /** Watch pages an exit may view within the window; the next one gets 429. */
  pages: number;
  windowSeconds: number;
  /** Sent as Retry-After (seconds); undefined: no Retry-After header. */
  retryAfterSeconds?: number;
}

export interface IdentityStats {
  /** Every request, answered or not. */
  requests: number;
  pages: number;
  media: number;
  /** Body bytes sent. */
  bytes: number;
  /** Downloads in flight now (a signed URL with an open media response). */
  active: number;
  maxActive: number;
  /** Answers by status. */
  statuses: Record<number, number>;
}

export interface SimRequest {
  /** When it came (ms since the epoch). */
  at: number;
  identity: string;
  kind: 'page' | 'media' | 'other';
  /** Path without the query (the signature stays out of test output). */
  path: string;
  status: number;
  /** The session cookie sent, if any. */
  cookie?: string;
  /** The Range header, if any. */
  range?: string;
}

export interface IssuedCookie {
  /** The session cookie's value. */
  value: string;
  /** The cookie as a Netscape cookie file (what yt-dlp's --cookies reads), for this platform's host. */
  file: string;
}

export interface PlatformSimOptions {
  /** The videos it has; default three (`v1`..`v3`). */
  videos?: readonly Video[];
  /** Pages need a session cookie. */
  requireCookie?: boolean;
  /** How long a signed media URL is valid. */
  urlTtlSeconds?: number;
  /** Media bytes per second per response; default unpaced. */
  bytesPerSecond?: number;
  /** Rate limit for every exit without its own (rateLimit()). */
  rateLimit?: RateLimit;
}

export interface PlatformSim {
  /** `http://127.0.0.1:<port>` */
  readonly baseUrl: string;
  /** `127.0.0.1:<port>`, as a MediaPlatform's match.hosts names it. */
  readonly host: string;
  readonly videos: readonly Video[];
  /** The watch page of a video. */
  pageUrl(id: string): string;
  /** Set (or with undefined clear) an exit's rate limit; '*' is every exit without its own. */
  rateLimit(identity: string, limit: RateLimit | undefined): void;
  flag(identity: string, flag: Flag): void;
  unflag(identity: string): void;
  requireCookie(on: boolean): void;
  /** A session cookie the platform accepts; `expiresInSeconds` is the file's own expiry (negative: already expired). */
  issueCookie(opts?: { expiresInSeconds?: number }): IssuedCookie;
  /** The platform ends a session: its cookie draws the sign-in answer from now on. */
  revokeCookie(value: string): void;
  /**
   * Every media URL issued so far is refused from now on, though its
   * `expire` is still ahead: the platform revoked them (to a reader this
   * looks like a ban, not an expiry).
   */
  expireIssuedUrls(): void;
  /**
   * The next `n` page views carry a media URL whose `expire` has already
   * passed (a cached page with stale signatures): its download gets 403, as
   * an expired URL does, and a reader can tell from the URL why.
   */
  staleViews(n: number): void;
  /** Counters of one exit (zeros for one never seen). */
  stats(identity: string): IdentityStats;
  /** The exits seen, in order of first request. */
  identities(): string[];
  /** Downloads in flight now, and the most ever in flight at once, over all exits. */
  readonly activeDownloads: number;
  readonly maxActiveDownloads: number;
  /** Every request, in order. */
  readonly requests: readonly SimRequest[];
  /** Page views that carried `cookie`. */
  cookieViews(cookie: string): number;
  stop(): Promise<void>;
}

/** The session cookie's name. */
export const COOKIE_NAME = 'SID';

const DEFAULT_VIDEOS: readonly Video[] = [
  { id: 'v1', title: 'Simulated video one' },
  { id: 'v2', title: 'Simulated video two' },
  { id: 'v3', title: 'Simulated video three' },
];

const PACE_CHUNK = 16 * 1024;

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function html(title: string, head: string, body: string): string {
  return `<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>\n${head}</head>\n<body>${body}</body></html>\n`;
}

/** The value of `name` in a Cookie header. */
function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

function emptyStats(): IdentityStats {
  return { requests: 0, pages: 0, media: 0, bytes: 0, active: 0, maxActive: 0, statuses: {} };
}

let media: Promise<Buffer> | undefined;

/** The MP4 every video is, read once per process (a run may outlive the fixture cache's folder). */
function mediaFile(): Promise<Buffer> {
  media ??= generateMedia().then((dir) => readFile(join(dir, MEDIA.mp4.path))).catch((err: unknown) => {
    media = undefined;
    throw err;
  });
  return media;
}

/** Start the platform on 127.0.0.1, an ephemeral port. */
export async function startPlatformSim(opts: PlatformSimOptions = {}): Promise<PlatformSim> {
  const mp4 = await mediaFile();
  const videos = opts.videos ?? DEFAULT_VIDEOS;
  const byId = new Map(videos.map((v) => [v.id, v]));
  const signingKey = randomBytes(32);
  const ttl = opts.urlTtlSeconds ?? 3600;
  let cookieRequired = opts.requireCookie ?? false;
  let staleLeft = 0;

  const limits = new Map<string, RateLimit>(opts.rateLimit ? [['*', opts.rateLimit]] : []);
  const views = new Map<string, number[]>();
  const flags = new Map<string, Flag>();
  const cookies = new Map<string, { revoked: boolean; views: number }>();
  const stats = new Map<string, IdentityStats>();
  const requests: SimRequest[] = [];
  /** Issued media URLs by nonce: the exit they were issued to, whether expired early, their open responses. */
  const issued = new Map<string, { identity: string; expired: boolean; open: number }>();
  let active = 0;
  let maxActive = 0;
  const sockets = new Set<Socket>();

  const statsOf = (identity: string) => {
    let s = stats.get(identity);
    if (!s) stats.set(identity, (s = emptyStats()));
    return s;
  };
  const sign = (id: string, expire: number, nonce: string) =>
    createHmac('sha256', signingKey).update(`${id}|${expire}|${nonce}`).digest('hex').slice(0, 32);

  const answer = (res: ServerResponse, identity: string, which: Answer, headers: Record<string, string> = {}) => {
    const a = ANSWERS[which];
    const body = a.text ? html(a.reason, '', `<p>${escapeHtml(a.text)}</p>`) : '';
    res.writeHead(a.status, a.reason, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body), ...headers });
    res.end(body);
    statsOf(identity).bytes += Buffer.byteLength(body);
  };

  /** Whether the exit is over its page budget now; counts the view when it is not. */
  const overLimit = (identity: string): RateLimit | undefined => {
    const limit = limits.get(identity) ?? limits.get('*');
    if (!limit) return undefined;
    const now = Date.now();
    const recent = (views.get(identity) ?? []).filter((t) => now - t < limit.windowSeconds * 1000);
    if (recent.length >= limit.pages) {
      views.set(identity, recent);
      return limit;
    }
    recent.push(now);
    views.set(identity, recent);
    return undefined;
  };

  const servePage = (res: ServerResponse, identity: string, id: string, record: SimRequest) => {
    const video = byId.get(id);
    if (!video) {
      res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' }).end(html('Not found', '', '<p>This video isn\'t available anymore</p>'));
      return;
    }
    const flag = flags.get(identity);
    if (flag) return answer(res, identity, flag === 'ban' ? 'forbidden' : flag);
    const limit = overLimit(identity);
    if (limit) {
      return answer(res, identity, 'rate_limited', limit.retryAfterSeconds === undefined ? {} : { 'retry-after': String(limit.retryAfterSeconds) });
    }
    if (cookieRequired) {
      const known = record.cookie === undefined ? undefined : cookies.get(record.cookie);
      if (!known || known.revoked) return answer(res, identity, 'sign_in');
      known.views++;
    }
    const stale = staleLeft > 0;
    if (stale) staleLeft--;
    const expire = Math.floor(Date.now() / 1000) + (stale ? -60 : ttl);
    const nonce = randomBytes(8).toString('hex');
    issued.set(nonce, { identity, expired: false, open: 0 });
    const media = video.mediaUrl ?? `${baseUrl}/media/${video.id}.mp4?expire=${expire}&ei=${nonce}&sig=${sign(video.id, expire, nonce)}`;
    const head = [
      `<meta property="og:title" content="${escapeHtml(video.title)}">`,
      `<meta property="og:type" content="video.other">`,
      `<meta property="og:video" content="${escapeHtml(media)}">`,
      `<meta property="og:video:type" content="video/mp4">`,
    ].join('\n');
    const body = html(`${video.title} - Simulated Platform`, head, `<h1>${escapeHtml(video.title)}</h1>`);
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
    statsOf(identity).bytes += Buffer.byteLength(body);
  };

  const serveMedia = async (req: IncomingMessage, res: ServerResponse, identity: string, id: string, query: URLSearchParams, record: SimRequest) => {
    if (flags.get(identity) === 'ban') return answer(res, identity, 'forbidden');
    const expire = Number(query.get('expire'));
    const nonce = query.get('ei') ?? '';
    const grant = issued.get(nonce);
    const valid = byId.has(id) && grant !== undefined && grant.identity === identity
      && query.get('sig') === sign(id, expire, nonce) && expire * 1000 > Date.now() && !grant.expired;
    if (!valid || !grant) return answer(res, identity, 'expired_url');
    const range = parseRange(req.headers.range, mp4.length);
    const headers = { 'content-type': 'video/mp4', 'accept-ranges': 'bytes', 'last-modified': MEDIA.lastModified.toUTCString() };
    if (range === 'invalid') {
      res.writeHead(416, { ...headers, 'content-range': `bytes */${mp4.length}` }).end();
      record.status = 416;
      return;
    }
    const { start, end } = range ?? { start: 0, end: mp4.length - 1 };
    res.writeHead(range ? 206 : 200, {
      ...headers, 'content-length': end - start + 1, ...(range ? { 'content-range': `bytes ${start}-${end}/${mp4.length}` } : {}),
    });
    if (req.method === 'HEAD') return void res.end();
    const s = statsOf(identity);
    // One download per signed URL, however many connections its reader opens (probe, seeks, reconnects).
    if (grant.open++ === 0) {
      active++;
      maxActive = Math.max(maxActive, active);
      s.active++;
      s.maxActive = Math.max(s.maxActive, s.active);
    }
    let closed = false;
    res.once('close', () => {
      closed = true;
      if (--grant.open === 0) {
        active--;
        s.active--;
      }
    });
    const body = mp4.subarray(start, end + 1);
    if (!opts.bytesPerSecond) {
      s.bytes += body.length;
      res.end(body);
      return;
    }
    for (let off = 0; off < body.length && !closed; off += PACE_CHUNK) {
      const chunk = body.subarray(off, off + PACE_CHUNK);
      s.bytes += chunk.length;
      if (!res.write(chunk)) await new Promise((r) => res.once('drain', r).once('close', r));
      await delay((chunk.length / opts.bytesPerSecond) * 1000);
    }
    res.end();
  };

  const server: Server = createServer((req, res) => {
    const identity = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const url = new URL(req.url ?? '/', 'http://platform.invalid');
    const page = /^\/watch\/([\w-]+)$/.exec(url.pathname);
    const media = /^\/media\/([\w-]+)\.mp4$/.exec(url.pathname);
    const cookie = cookieValue(req.headers.cookie, COOKIE_NAME);
    const record: SimRequest = {
      at: Date.now(), identity, kind: page ? 'page' : media ? 'media' : 'other', path: url.pathname, status: 0,
      ...(cookie !== undefined ? { cookie } : {}), ...(req.headers.range ? { range: req.headers.range } : {}),
    };
    requests.push(record);
    const s = statsOf(identity);
    s.requests++;
    res.once('finish', () => {
      record.status ||= res.statusCode;
      s.statuses[res.statusCode] = (s.statuses[res.statusCode] ?? 0) + 1;
    });
    if (req.method !== 'GET' && req.method !== 'HEAD') return void res.writeHead(405, { allow: 'GET, HEAD' }).end();
    if (page) {
      s.pages++;
      return servePage(res, identity, page[1]!, record);
    }
    if (media) {
      s.media++;
      return void serveMedia(req, res, identity, media[1]!, url.searchParams, record).catch(() => res.destroy());
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, DIRECT, resolve));
  const host = `${DIRECT}:${(server.address() as AddressInfo).port}`;
  const baseUrl = `http://${host}`;

  return {
    baseUrl,
    host,
    videos,
    pageUrl: (id) => `${baseUrl}/watch/${id}`,
    rateLimit(identity, limit) {
      if (limit) limits.set(identity, limit);
      else limits.delete(identity);
      views.delete(identity);
    },
    flag: (identity, flag) => void flags.set(identity, flag),
    unflag: (identity) => void flags.delete(identity),
    requireCookie: (on) => void (cookieRequired = on),
    issueCookie({ expiresInSeconds = 30 * 24 * 3600 } = {}) {
      const value = randomBytes(24).toString('hex');
      cookies.set(value, { revoked: false, views: 0 });
      const expires = Math.floor(Date.now() / 1000) + expiresInSeconds;
      // A host-only cookie for the address (no leading dot, subdomains FALSE): cookies ignore the port.
      const file = ['# Netscape HTTP Cookie File', `${DIRECT}\tFALSE\t/\tFALSE\t${expires}\t${COOKIE_NAME}\t${value}`, ''].join('\n');
      return { value, file };
    },
    revokeCookie(value) {
      const c = cookies.get(value);
      if (c) c.revoked = true;
    },
    expireIssuedUrls() {
      for (const grant of issued.values()) grant.expired = true;
    },
    staleViews: (n) => void (staleLeft = n),
    stats: (identity) => structuredClone(stats.get(identity) ?? emptyStats()),
    identities: () => [...stats.keys()],
    get activeDownloads() { return active; },
    get maxActiveDownloads() { return maxActive; },
    requests,
    cookieViews: (cookie) => cookies.get(cookie)?.views ?? 0,
    stop: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
