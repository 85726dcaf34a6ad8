// The egress proxy: an HTTP proxy on 127.0.0.1 through which child
// processes that resolve and connect on their own (yt-dlp, ffmpeg) reach the
// web, so the outbound-address policy (outbound.ts, ADR 0011) decides on the
// address actually connected to, redirects and manifests included. It
// forwards plain HTTP requests in absolute form and opens CONNECT tunnels
// (TLS stays end to end). Two users, one proxy:
// - the runner, one per job (runner-image/src/egress-proxy.ts, ADR 0014):
//   refusals answered 403 with a short reason;
// - the gateway, one per process for the yt-dlp runs of /metadata,
//   /is-short and playlist expansions (media-info/egress.ts, ADR 0011 "The
//   gateway's own fetches"): every refusal and every failed connection
//   answered alike, by closing the client's connection, so a client who
//   chose the URL cannot tell a refused address from a closed port; a
//   secret in Proxy-Authorization, whose user name carries the run's
//   session; and, when the deployment has one (MEDIA_INFO_PROXY), an
//   upstream proxy every connection goes through.
// The runner chains it too: a platform's proxy session (ProxyPool, issue
// 37), http, https, socks5 or socks5h, for every connection of the attempt.
// What is checked before a connection through an upstream, and what cannot
// be: ADR 0014 "Chained to an upstream proxy".
// The client side is here too (requestThrough): the runner's own reads go
// through its egress as yt-dlp's and ffmpeg's do, so every request of an
// attempt leaves by the same path, upstream session and source address.
// Why a proxy of our own rather than a library: ADR 0014.
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { SocksClient } from 'socks';
import type { Logger } from './logger.js';
import { OutboundRefusedError, type OutboundDecision, type OutboundPolicy, type RefusedCategory } from './outbound.js';

/** Inclusive port ranges a target may have. */
export type PortRanges = readonly (readonly [number, number])[];

/** The web's ports plus every unprivileged one; 1-1023 (SSH, SMTP, ...) except 80 and 443 are refused. */
export const DEFAULT_EGRESS_PORTS = '80,443,1024-65535';

/** `80,443,8000-8999`; undefined when an entry is not a port or a range of ports. */
export function parsePortRanges(text: string): PortRanges | undefined {
  const ranges: [number, number][] = [];
  for (const entry of text.split(',').map((e) => e.trim()).filter(Boolean)) {
    const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(entry);
    const from = Number(m?.[1]);
    const to = m?.[2] !== undefined ? Number(m[2]) : from;
    if (!m || from < 1 || to > 65535 || from > to) return undefined;
    ranges.push([from, to]);
  }
  return ranges.length ? ranges : undefined;
}

export function portAllowed(ports: PortRanges, port: number): boolean {
  return ports.some(([from, to]) => port >= from && port <= to);
}

export interface EgressOptions {
  policy: OutboundPolicy;
  ports?: PortRanges;
  logger?: Logger;
  /**
   * How a refusal or a failed connection is answered. `explained` (default,
   * the runner): 403 with the reason, 502/504 with a phrase. `unreachable`
   * (the gateway, whose answers end up with the client who chose the URL):
   * the client's connection is closed without an answer, whatever the cause,
   * so a refused address, a closed port and a name that does not resolve
   * look the same. The log says which it was.
   */
  refusals?: 'explained' | 'unreachable';
  /**
   * Clients must send it as the password of Proxy-Authorization (Basic);
   * without it, 407. The user name is the client's session (`upstream`).
   */
  secret?: string;
  /**
   * A proxy every connection goes through (http, https, socks5, socks5h),
   * `{session}` replaced by the client's proxy user name (MEDIA_INFO_PROXY's
   * rotating sessions; the runner's URL comes rendered). Where the upstream
   * resolves the target (http, https, socks5h) a name is checked on what it
   * resolves to here just before (checkResolved), not at its connect; with
   * socks5 the name is resolved and checked here and the upstream is given
   * the address.
   */
  upstream?: string;
  /**
   * Told of every answer of 400 or more to a forward (plain http) request:
   * what the runner's defence table reads (HTTP 429 and its Retry-After, a
   * 403, a challenge page). Tunnels carry TLS: their answers are not seen.
   */
  observe?: (answer: EgressAnswer) => void;
  /**
   * The local address every outgoing connection (to a target, or to the
   * upstream) is bound to: a platform's per-attempt source address
   * (MediaPlatform sourceAddress), for nodes that route a prefix.
   */
  localAddress?: string;
}

/** An error answer a forward request got from the site (or through the upstream). */
export interface EgressAnswer {
  url: string;
  status: number;
  /** The Retry-After header as sent (delta-seconds or an HTTP date). */
  retryAfter?: string;
  /** `cf-mitigated: challenge`: Cloudflare's mark of a challenge page. */
  challenge: boolean;
}

/** The reason phrase of the proxy's own 403: yt-dlp prints it ("HTTP Error 403: Refused by egress policy"), so a refusal of ours never reads as the platform's. */
export const EGRESS_REFUSED_PHRASE = 'Refused by egress policy';

const UPSTREAM_PROTOCOLS = new Set(['http:', 'https:', 'socks5:', 'socks5h:']);

/** Why a target is refused, in words short enough for a 403 body and a log line. */
export type Refusal = { status: 400 | 403 | 407 | 502 | 504; reason: string };

export const refusedBy = (d: OutboundDecision): Refusal | undefined =>
  d.ok ? undefined : { status: 403, reason: `address refused (${d.category})` };

/**
 * A failure of the upstream hop, in a phrase of our own: the upstream's
 * URL carries its credentials, and neither it nor the upstream's words go
 * into an answer, an error or a log line.
 */
class UpstreamError extends Error {
  readonly code = 'ERR_UPSTREAM';
  constructor(readonly reason: string) {
    super(reason);
  }
}

/** An OutboundRefusedError from connectLookup, or a connection error worth a short 502 reason. */
function connectFailure(err: unknown): Refusal {
  const e = err as { code?: unknown; category?: unknown };
  if (err instanceof UpstreamError) return { status: 502, reason: err.reason };
  if (e?.code === 'ERR_OUTBOUND_REFUSED') return { status: 403, reason: `address refused (${String(e.category)})` };
  if (e?.code === 'ENOTFOUND' || e?.code === 'EAI_AGAIN') return { status: 502, reason: 'host not found' };
  if (e?.code === 'ETIMEDOUT') return { status: 504, reason: 'connection timed out' };
  return { status: 502, reason: 'connection failed' };
}

/** A session id as it may stand in an upstream proxy's user name. */
const SESSION = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_UPSTREAM_HEAD = 16 * 1024;

/**
 * The proxy: 127.0.0.1, a port of the system's choosing. Every target is
 * checked twice: its host and port as written (an IP literal never reaches
 * a lookup), and at connect time every address its name resolves to
 * (policy.connectLookup), so a name that answers differently the second
 * time gains nothing.
 */
export class EgressProxy {
  readonly policy: OutboundPolicy;
  readonly ports: PortRanges;
  private readonly logger: Logger | undefined;
  private readonly refusals: 'explained' | 'unreachable';
  private readonly secret: string | undefined;
  private readonly upstream: string | undefined;
  private readonly observe: ((answer: EgressAnswer) => void) | undefined;
  private readonly localAddress: { localAddress?: string };
  private readonly server: http.Server;
  private readonly sockets = new Set<Duplex>();
  private readonly lookup: net.LookupFunction;
  private readonly agent: http.Agent;
  private port = 0;

  private constructor(o: EgressOptions) {
    this.policy = o.policy;
    this.ports = o.ports ?? parsePortRanges(DEFAULT_EGRESS_PORTS)!;
    this.logger = o.logger;
    this.refusals = o.refusals ?? 'explained';
    this.secret = o.secret;
    if (o.upstream !== undefined) {
      const protocol = URL.canParse(o.upstream.replaceAll('{session}', 'x')) ? new URL(o.upstream.replaceAll('{session}', 'x')).protocol : '';
      // The message never holds the URL: it carries the upstream's credentials.
      if (!UPSTREAM_PROTOCOLS.has(protocol)) throw new Error('egress upstream: only an http, https, socks5 or socks5h proxy can be chained');
      this.upstream = o.upstream;
    }
    this.observe = o.observe;
    this.localAddress = o.localAddress ? { localAddress: o.localAddress } : {};
    this.lookup = this.policy.connectLookup();
    this.agent = new http.Agent({ keepAlive: true, lookup: this.lookup });
    this.server = http.createServer((req, res) => void this.forward(req, res));
    this.server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.tunnel(req, socket, head));
    this.server.on('connection', (socket: net.Socket) => this.track(socket));
  }

  static async start(o: EgressOptions): Promise<EgressProxy> {
    const proxy = new EgressProxy(o);
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => resolve());
    });
    proxy.port = (proxy.server.address() as AddressInfo).port;
    return proxy;
  }

  /** `http://127.0.0.1:<port>`: what yt-dlp's --proxy and ffmpeg's -http_proxy take. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The proxy URL for one client run: its session as the user name and the secret as the password. */
  urlFor(session: string): string {
    if (!SESSION.test(session)) throw new Error('egress session: 1-64 of [A-Za-z0-9_-]');
    return `http://${session}:${encodeURIComponent(this.secret ?? '')}@127.0.0.1:${this.port}`;
  }

  /** Whether host:port may be contacted as written (names are checked again when they resolve). */
  checkTarget(hostname: string, port: number): Refusal | undefined {
    if (!hostname) return { status: 400, reason: 'no target host' };
    if (!portAllowed(this.ports, port)) return { status: 403, reason: `port ${port} refused` };
    return refusedBy(this.policy.checkHost(hostname));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private track(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  /** The client's session, or a 407 when the secret is wrong. */
  private authorize(req: http.IncomingMessage): { session: string } | Refusal {
    const [scheme, encoded = ''] = String(req.headers['proxy-authorization'] ?? '').split(' ');
    const [user = '', ...rest] = scheme?.toLowerCase() === 'basic' ? Buffer.from(encoded, 'base64').toString('utf8').split(':') : [];
    if (this.secret !== undefined && rest.join(':') !== this.secret) return { status: 407, reason: 'proxy authentication required' };
    return { session: SESSION.test(user) ? user : 'default' };
  }

  /** Log a refusal; in `unreachable` mode every failure but a 407 is answered alike (by closing). */
  private silent(r: Refusal, target: string): boolean {
    this.logger?.warn({ target, status: r.status, reason: r.reason }, 'egress refused');
    return this.refusals === 'unreachable' && r.status !== 407;
  }

  private refuse(req: http.IncomingMessage, res: http.ServerResponse, r: Refusal, target: string): void {
    if (this.silent(r, target) || res.headersSent) return void req.socket.destroy();
    res.writeHead(r.status, r.status === 403 ? EGRESS_REFUSED_PHRASE : http.STATUS_CODES[r.status]!, {
      'content-type': 'text/plain; charset=utf-8', connection: 'close', ...(r.status === 407 && { 'proxy-authenticate': 'Basic realm="egress"' }),
    }).end(`${r.reason}\n`);
  }

  /**
   * The checks before a connection: the literal host and port, and with an
   * upstream that resolves names itself (http, https, socks5h) the name's
   * addresses now. Without an upstream, and through socks5, the addresses
   * are checked as the connection opens (connectLookup).
   */
  private async precheck(hostname: string, port: number): Promise<Refusal | undefined> {
    const refused = this.checkTarget(hostname, port);
    if (refused || !this.upstream || this.upstream.startsWith('socks5:')) return refused;
    try {
      return refusedBy(await this.policy.checkResolved(hostname));
    } catch (err) {
      return connectFailure(err);
    }
  }

  /** A plain-HTTP forward request: `GET http://host/path HTTP/1.1`. */
  private async forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const auth = this.authorize(req);
    if ('status' in auth) return this.refuse(req, res, auth, '(unauthenticated)');
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      return this.refuse(req, res, { status: 400, reason: 'not a proxy request' }, '(none)');
    }
    if (target.protocol !== 'http:') return this.refuse(req, res, { status: 400, reason: 'only http:// is forwarded; https goes through CONNECT' }, target.origin);
    const port = Number(target.port || 80);
    const refused = await this.precheck(target.hostname, port);
    if (refused) return this.refuse(req, res, refused, target.host);
    const headers = endToEnd(req.headers);
    const upstream = this.upstreamUrl(auth.session);
    let options: http.RequestOptions;
    if (upstream && isSocks(upstream)) {
      // SOCKS carries bytes, not requests: the request goes in origin form over a tunnel to the target.
      let socket: Duplex;
      try {
        socket = await this.viaSocks(upstream, target.hostname.replace(/^\[|\]$/g, ''), port);
      } catch (err) {
        return this.refuse(req, res, connectFailure(err), target.host);
      }
      options = { path: `${target.pathname}${target.search}`, createConnection: () => socket, headers };
    } else if (upstream) {
      options = {
        host: upstream.hostname, port: upstreamPort(upstream), path: target.href, agent: false, headers: { ...headers, ...proxyAuthorization(upstream) }, ...this.localAddress,
      };
    } else {
      options = { host: target.hostname.replace(/^\[|\]$/g, ''), port, path: `${target.pathname}${target.search}`, agent: this.agent, headers, ...this.localAddress };
    }
    const request = upstream?.protocol === 'https:' ? https.request : http.request;
    const outgoing = request({ ...options, method: req.method }, (up) => {
      const status = up.statusCode ?? 502;
      // The upstream's own refusal of its credentials: a phrase of ours, not its page (which may echo them).
      if (status === 407 && upstream && !isSocks(upstream)) {
        up.resume();
        return this.refuse(req, res, { status: 502, reason: UPSTREAM_AUTH_REFUSED }, target.host);
      }
      if (status >= 400) this.tell(target.href, status, up.headers);
      res.writeHead(status, up.statusMessage, endToEnd(up.headers));
      up.pipe(res);
    });
    outgoing.on('error', (err) => this.refuse(req, res, connectFailure(err), target.host));
    res.on('close', () => outgoing.destroy());
    req.pipe(outgoing);
  }

  /** `CONNECT host:443`: a TCP tunnel (TLS stays end to end, between the client and the site). */
  private async tunnel(req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.track(client);
    client.on('error', () => client.destroy());
    const answer = (r: Refusal) => {
      if (this.silent(r, req.url ?? '')) return void client.destroy();
      const body = `${r.reason}\n`;
      const challenge = r.status === 407 ? 'proxy-authenticate: Basic realm="egress"\r\n' : '';
      client.end(`HTTP/1.1 ${r.status} ${http.STATUS_CODES[r.status]}\r\ncontent-type: text/plain\r\n${challenge}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    };
    const auth = this.authorize(req);
    if ('status' in auth) return answer(auth);
    const { hostname, port } = authority(req.url ?? '');
    const refused = port ? await this.precheck(hostname, port) : { status: 400, reason: 'not host:port' } as const;
    if (refused) return answer(refused);
    const upstream = this.upstreamUrl(auth.session);
    let socket: Duplex;
    try {
      if (!upstream) socket = await this.connectDirect(hostname, port!);
      else socket = isSocks(upstream) ? await this.viaSocks(upstream, hostname, port!) : await this.viaUpstream(upstream, req.url!);
    } catch (err) {
      return answer(connectFailure(err));
    }
    if (client.destroyed) return void socket.destroy();
    this.track(socket);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length) socket.write(head);
    socket.pipe(client);
    client.pipe(socket);
    socket.on('error', () => client.destroy());
    client.once('close', () => socket.destroy());
    socket.once('close', () => client.destroy());
  }

  /** A TCP connection to host:port, every address checked as it resolves. */
  private connectDirect(host: string, port: number): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port, lookup: this.lookup, ...this.localAddress });
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(socket);
      });
    });
  }

  private tell(url: string, status: number, headers: http.IncomingHttpHeaders): void {
    if (!this.observe) return;
    const retryAfter = headers['retry-after'];
    this.observe({ url, status, ...(retryAfter ? { retryAfter } : {}), challenge: headers['cf-mitigated'] === 'challenge' });
  }

  /**
   * A tunnel to host:port through a SOCKS5 upstream. socks5: the name is
   * resolved here, every address checked (connectLookup), and the upstream
   * gets the address; socks5h: the upstream gets the name (checked on its
   * addresses in precheck) and resolves it itself.
   */
  private async viaSocks(upstream: URL, host: string, port: number): Promise<Duplex> {
    let destination = host;
    if (upstream.protocol === 'socks5:' && !net.isIP(host)) {
      destination = await new Promise<string>((resolve, reject) => this.lookup(host, {}, (err, address) => {
        if (err) reject(err);
        else resolve(typeof address === 'string' ? address : address[0]!.address);
      }));
    }
    try {
      const { socket } = await SocksClient.createConnection({
        command: 'connect',
        destination: { host: destination, port },
        proxy: {
          host: upstream.hostname.replace(/^\[|\]$/g, ''), port: Number(upstream.port || 1080), type: 5,
          ...(upstream.username || upstream.password ? { userId: decodeURIComponent(upstream.username), password: decodeURIComponent(upstream.password) } : {}),
        },
        timeout: UPSTREAM_TIMEOUT_MS,
        ...(this.localAddress.localAddress ? { socket_options: { localAddress: this.localAddress.localAddress } as net.TcpSocketConnectOpts } : {}),
      });
      return socket;
    } catch (err) {
      // socks' messages name the failed step, never the URL; ours is shorter still.
      throw new UpstreamError(/authentication/i.test((err as Error)?.message ?? '') ? UPSTREAM_AUTH_REFUSED : 'upstream proxy refused the connection');
    }
  }

  private upstreamUrl(session: string): URL | undefined {
    return this.upstream === undefined ? undefined : new URL(this.upstream.replaceAll('{session}', session));
  }

  /** A tunnel to `target` (host:port) opened by the upstream proxy with its own CONNECT. */
  private viaUpstream(upstream: URL, target: string): Promise<Duplex> {
    return new Promise((resolve, reject) => {
      const options = { host: upstream.hostname.replace(/^\[|\]$/g, ''), port: upstreamPort(upstream), ...this.localAddress };
      const socket: net.Socket = upstream.protocol === 'https:' ? tls.connect({ ...options, servername: options.host }) : net.connect(options);
      const auth = proxyAuthorization(upstream)['proxy-authorization'];
      let received = Buffer.alloc(0);
      const fail = (err: Error) => {
        socket.destroy();
        reject(err);
      };
      socket.once('error', fail);
      socket.once(upstream.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${auth ? `proxy-authorization: ${auth}\r\n` : ''}\r\n`);
      });
      const onData = (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        const end = received.indexOf('\r\n\r\n');
        if (end === -1) {
          if (received.length > MAX_UPSTREAM_HEAD) fail(new Error('upstream proxy answer too long'));
          return;
        }
        socket.off('data', onData);
        socket.off('error', fail);
        const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(received.subarray(0, end).toString('latin1'))?.[1]);
        if (status === 407) return fail(new UpstreamError(UPSTREAM_AUTH_REFUSED));
        if (status !== 200) return fail(new UpstreamError(`upstream proxy answered ${status || 'nonsense'}`));
        const rest = received.subarray(end + 4);
        if (rest.length) socket.unshift(rest);
        resolve(socket);
      };
      socket.on('data', onData);
    });
  }
}

const UPSTREAM_AUTH_REFUSED = 'upstream proxy refused its credentials';
/** How long the SOCKS handshake may take. */
const UPSTREAM_TIMEOUT_MS = 30_000;

function isSocks(url: URL): boolean {
  return url.protocol === 'socks5:' || url.protocol === 'socks5h:';
}

function upstreamPort(url: URL): number {
  return Number(url.port || (url.protocol === 'https:' ? 443 : 80));
}

/** The upstream proxy's credentials (its URL's user and password), as a header. */
function proxyAuthorization(url: URL): Record<string, string> {
  if (!url.username && !url.password) return {};
  const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  return { 'proxy-authorization': `Basic ${Buffer.from(credentials).toString('base64')}` };
}

/** `host:port` or `[v6]:port` of a CONNECT request. */
function authority(text: string): { hostname: string; port?: number } {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(text);
  if (!m) return { hostname: '' };
  const port = Number(m[2]);
  return { hostname: m[1]!.replace(/^\[|\]$/g, ''), ...(port >= 1 && port <= 65535 ? { port } : {}) };
}

/** Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own stay here; the rest passes. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

function endToEnd(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const named = new Set(String(headers.connection ?? '').toLowerCase().split(',').map((s) => s.trim()));
  return Object.fromEntries(Object.entries(headers).filter(([k, v]) => v !== undefined && !HOP_BY_HOP.has(k) && !named.has(k)));
}

/**
 * One GET of `target` through the HTTP proxy at `proxy` (an egress proxy's
 * `url`), sent as yt-dlp and ffmpeg send theirs: an http target as a forward
 * request in absolute form, an https one through a CONNECT tunnel with TLS to
 * the target inside (its certificate checked against its name). A process's
 * own reads take it so that they leave by the proxy's path: its policy, its
 * upstream session, its source address. The proxy's own refusal (a forward
 * request's 403 with EGRESS_REFUSED_PHRASE, any answer but 200 to CONNECT)
 * rejects, never passing for the site's answer: an address refused as
 * OutboundRefusedError, any other refusal with code ERR_OUTBOUND_REFUSED, a
 * failed tunnel with code ERR_EGRESS_TUNNEL. The site's answers, errors
 * included, resolve.
 */
export async function requestThrough(
  proxy: string, target: URL, o: { headers?: http.OutgoingHttpHeaders; signal?: AbortSignal } = {},
): Promise<http.IncomingMessage> {
  const p = new URL(proxy);
  const via = { host: p.hostname.replace(/^\[|\]$/g, ''), port: Number(p.port || 80), agent: false as const, ...(o.signal ? { signal: o.signal } : {}) };
  const hostname = target.hostname.replace(/^\[|\]$/g, '');
  let secure: tls.TLSSocket | undefined;
  if (target.protocol === 'https:') {
    const raw = await openTunnel(via, `${target.hostname}:${target.port || 443}`);
    // SNI carries names only; an IP literal is checked against the certificate's IP entries (host).
    secure = tls.connect({ socket: raw, host: hostname, ...(net.isIP(hostname) ? {} : { servername: hostname }), ALPNProtocols: ['http/1.1'] });
  } else if (target.protocol !== 'http:') {
    throw new Error('only http(s) URLs are fetched');
  }
  return new Promise((resolve, reject) => {
    const req = secure
      ? https.request(target, { method: 'GET', headers: o.headers, createConnection: () => secure, ...(o.signal ? { signal: o.signal } : {}) }, resolve)
      : http.request({ ...via, method: 'GET', path: target.href, headers: { ...o.headers, host: target.host } }, (res) => {
        if (res.statusCode !== 403 || res.statusMessage !== EGRESS_REFUSED_PHRASE) return resolve(res);
        void refusalBody(res, Buffer.alloc(0)).then((body) => reject(proxyRefusal(403, body)));
      });
    req.once('error', (err) => {
      secure?.destroy();
      reject(err);
    });
    req.end();
  });
}

/** A CONNECT tunnel to `authority` through the proxy at `via`; rejects with the proxy's refusal. */
function openTunnel(via: http.RequestOptions, authority: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const req = http.request({ ...via, method: 'CONNECT', path: authority, headers: { host: authority } });
    req.once('connect', (res, socket, head) => {
      if (res.statusCode === 200) {
        if (head.length) socket.unshift(head);
        return resolve(socket);
      }
      void refusalBody(socket, head).then((body) => reject(proxyRefusal(res.statusCode ?? 0, body)));
    });
    req.once('error', reject);
    req.end();
  });
}

/** The first line of a refusal's short body (the proxy's reason), read until the proxy closes; at most 1 KiB. */
function refusalBody(stream: NodeJS.ReadableStream & { destroy(): void }, head: Buffer): Promise<string> {
  return new Promise((resolve) => {
    let body = head;
    const done = () => {
      stream.destroy();
      resolve(body.toString('utf8', 0, Math.min(body.length, 1024)).split('\n')[0]!.trim());
    };
    stream.on('data', (c: Buffer) => {
      body = Buffer.concat([body, c]);
      if (body.length >= 1024) done();
    });
    stream.once('end', done);
    stream.once('error', done);
    stream.once('close', done);
  });
}

const REFUSED_CATEGORIES: readonly RefusedCategory[] = ['link-local', 'metadata', 'loopback', 'unspecified', 'multicast', 'reserved', 'private', 'localhost-name', 'invalid'];

/** The proxy's refusal as an error: its status and its reason (a phrase of the proxy's own, never a URL). */
function proxyRefusal(status: number, reason: string): Error {
  const category = /^address refused \(([a-z-]+)\)$/.exec(reason)?.[1] as RefusedCategory | undefined;
  if (category && REFUSED_CATEGORIES.includes(category)) return new OutboundRefusedError(category);
  const err = new Error(`egress proxy answered ${status}${reason ? `: ${reason.slice(0, 200)}` : ''}`);
  return Object.assign(err, { code: status === 403 ? 'ERR_OUTBOUND_REFUSED' : 'ERR_EGRESS_TUNNEL', status });
}
