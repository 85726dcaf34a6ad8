// The runner's egress: every connection made for the job's source goes
// through here, so the outbound-address policy (lib/src/outbound.ts, ADR
// 0011) decides on the address actually connected to, redirects and
// manifests included. yt-dlp and ffmpeg reach the web through a small HTTP
// proxy on 127.0.0.1 (plain forward requests and CONNECT tunnels), the
// runner's own reads through egressGetOptions and egressFetch. Why a
// proxy of our own and what it refuses: docs/adr/0014-runner-egress-proxy.md.
//
// What is not ours: storage uploads and status patches (the destination and
// the cluster, chosen by the operator) do not pass here.
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import type { BoundedGetOptions } from '@mediajobs/lib/batches/http-get';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { OutboundPolicy, type OutboundDecision } from '@mediajobs/lib/outbound';

/** Inclusive port ranges a job may connect to. */
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

export interface EgressOptions {
  policy: OutboundPolicy;
  ports?: PortRanges;
  logger?: Logger;
}

/** Why a target is refused, in words short enough for a 403 body and a log line; undefined when it may be contacted. */
export type Refusal = { status: 400 | 403 | 502 | 504; reason: string };

const refusedBy = (d: OutboundDecision): Refusal | undefined =>
  d.ok ? undefined : { status: 403, reason: `address refused (${d.category})` };

function portAllowed(ports: PortRanges, port: number): boolean {
  return ports.some(([from, to]) => port >= from && port <= to);
}

/** An OutboundRefusedError from connectLookup, or a connection error worth a short 502 reason. */
function connectFailure(err: unknown): Refusal {
  const e = err as { code?: unknown; category?: unknown };
  if (e?.code === 'ERR_OUTBOUND_REFUSED') return { status: 403, reason: `address refused (${String(e.category)})` };
  if (e?.code === 'ENOTFOUND' || e?.code === 'EAI_AGAIN') return { status: 502, reason: 'host not found' };
  if (e?.code === 'ETIMEDOUT') return { status: 504, reason: 'connection timed out' };
  return { status: 502, reason: 'connection failed' };
}

/**
 * The proxy: 127.0.0.1, a port of the system's choosing, no authentication
 * (only this pod reaches it). Every target is checked twice: its host and
 * port as written (an IP literal never reaches a lookup), and at connect
 * time every address its name resolves to (policy.connectLookup), so a name
 * that answers differently the second time gains nothing.
 */
export class EgressProxy {
  readonly policy: OutboundPolicy;
  readonly ports: PortRanges;
  private readonly logger: Logger | undefined;
  private readonly server: http.Server;
  private readonly sockets = new Set<Duplex>();
  private readonly lookup: net.LookupFunction;
  private readonly agent: http.Agent;
  private port = 0;

  private constructor(o: EgressOptions) {
    this.policy = o.policy;
    this.ports = o.ports ?? parsePortRanges(DEFAULT_EGRESS_PORTS)!;
    this.logger = o.logger;
    this.lookup = this.policy.connectLookup();
    this.agent = new http.Agent({ keepAlive: true, lookup: this.lookup });
    this.server = http.createServer((req, res) => this.forward(req, res));
    this.server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => this.tunnel(req, socket, head));
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

  private refuse(res: http.ServerResponse, r: Refusal, target: string): void {
    this.logger?.warn({ target, status: r.status, reason: r.reason }, 'egress refused');
    if (res.headersSent) return void res.destroy();
    res.writeHead(r.status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' }).end(`${r.reason}\n`);
  }

  /** A plain-HTTP forward request: `GET http://host/path HTTP/1.1`. */
  private forward(req: http.IncomingMessage, res: http.ServerResponse): void {
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      return this.refuse(res, { status: 400, reason: 'not a proxy request' }, '(none)');
    }
    if (target.protocol !== 'http:') return this.refuse(res, { status: 400, reason: 'only http:// is forwarded; https goes through CONNECT' }, target.origin);
    const port = Number(target.port || 80);
    const refused = this.checkTarget(target.hostname, port);
    if (refused) return this.refuse(res, refused, target.host);
    const upstream = http.request({
      host: target.hostname.replace(/^\[|\]$/g, ''), port, method: req.method, path: `${target.pathname}${target.search}`,
      headers: endToEnd(req.headers), agent: this.agent,
    }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.statusMessage, endToEnd(up.headers));
      up.pipe(res);
    });
    upstream.on('error', (err) => this.refuse(res, connectFailure(err), target.host));
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }

  /** `CONNECT host:443`: a TCP tunnel (TLS stays end to end, between the client and the site). */
  private tunnel(req: http.IncomingMessage, client: Duplex, head: Buffer): void {
    this.track(client);
    const { hostname, port } = authority(req.url ?? '');
    const answer = (r: Refusal) => {
      this.logger?.warn({ target: req.url, status: r.status, reason: r.reason }, 'egress refused');
      const body = `${r.reason}\n`;
      client.end(`HTTP/1.1 ${r.status} ${http.STATUS_CODES[r.status]}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    };
    const refused = port ? this.checkTarget(hostname, port) : { status: 400, reason: 'not host:port' } as const;
    if (refused) return answer(refused);
    const upstream = net.connect({ host: hostname, port: port!, lookup: this.lookup });
    this.track(upstream);
    let connected = false;
    upstream.once('error', (err) => (connected ? client.destroy() : answer(connectFailure(err))));
    client.once('error', () => upstream.destroy());
    upstream.once('connect', () => {
      connected = true;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client).once('error', () => upstream.destroy());
      client.pipe(upstream);
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    });
  }
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

// The job's egress while it runs. One job per runner process, and every
// child process and fetch of the job must take it: a process-wide setting
// cannot be forgotten by one call site the way a parameter can.
let active: EgressProxy | undefined;

/** The running job's egress proxy; undefined when the runner runs without one (tests of other parts). */
export function activeEgress(): EgressProxy | undefined {
  return active;
}

/**
 * Run `fn` with an egress proxy for the job, stopped after. NO_PROXY is
 * removed from the environment the children inherit: yt-dlp (urllib) and
 * ffmpeg would connect directly to the hosts it names.
 */
export async function withEgress<T>(o: EgressOptions, fn: () => Promise<T>): Promise<T> {
  const proxy = await EgressProxy.start(o);
  delete process.env.no_proxy;
  delete process.env.NO_PROXY;
  active = proxy;
  try {
    return await fn();
  } finally {
    if (active === proxy) active = undefined;
    await proxy.close().catch((err: unknown) => o.logger?.warn({ err: errFields(err) }, 'egress proxy did not close cleanly'));
  }
}

/** How many redirects the runner's own reads follow (each one checked like the first request). */
const MAX_REDIRECTS = 5;

/** A policy that refuses nothing but what can never be allowed: the runner's own reads when no egress runs (tests of other parts). */
const NO_EGRESS_POLICY = new OutboundPolicy({ allowed: ['0.0.0.0/0', '::/0'] });

/**
 * The job's egress as boundedGet (lib/src/batches/http-get.ts) takes it, for
 * the runner's small reads (playlists): the same policy and ports as the
 * proxy, and the redirects egressFetch follows.
 */
export function egressGetOptions(): Pick<BoundedGetOptions, 'policy' | 'allowPort' | 'maxRedirects'> {
  const egress = active;
  if (!egress) return { policy: NO_EGRESS_POLICY, maxRedirects: MAX_REDIRECTS };
  return { policy: egress.policy, allowPort: (port) => portAllowed(egress.ports, port), maxRedirects: MAX_REDIRECTS };
}

/**
 * GET `url` under the job's egress policy, for the runner's own reads that
 * stream (a format's head, show artwork): the host and port as written,
 * every resolved address at connect time, each redirect as a new request.
 * A fetch-like Response, redirects followed; rejects on network errors and
 * refusals (code ERR_OUTBOUND_REFUSED).
 */
export async function egressFetch(url: string, init: { headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Response> {
  const egress = active;
  const policy = egress?.policy ?? NO_EGRESS_POLICY;
  const lookup = policy.connectLookup();
  let target = new URL(url);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (target.protocol !== 'http:' && target.protocol !== 'https:') throw new Error('only http(s) URLs are fetched');
    const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
    const refused = egress ? egress.checkTarget(target.hostname, port) : refusedBy(policy.checkHost(target.hostname));
    if (refused) throw Object.assign(new Error(`egress refused: ${refused.reason}`), { code: 'ERR_OUTBOUND_REFUSED' });
    const res = await get(target, init.headers ?? {}, lookup, init.signal);
    const status = res.statusCode ?? 502;
    const location = res.headers.location;
    if (status >= 300 && status < 400 && location) {
      res.resume();
      target = new URL(location, target);
      continue;
    }
    const headers = new Headers();
    for (const [k, v] of Object.entries(res.headers)) for (const value of [v ?? []].flat()) headers.append(k, value);
    const empty = status === 204 || status === 304 || init.signal?.aborted;
    if (empty) res.resume();
    return new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, headers });
  }
  throw new Error('too many redirects');
}

function get(target: URL, headers: Record<string, string>, lookup: net.LookupFunction, signal?: AbortSignal): Promise<http.IncomingMessage> {
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.get(target, { headers, lookup, agent: false, ...(signal ? { signal } : {}) }, resolve);
    req.once('error', reject);
  });
}
