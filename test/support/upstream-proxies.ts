// Loopback upstream proxies for the tests of proxy pools (issue 37): the
// residential or datacenter proxies a ProxyPool names, as a provider runs
// them. Each one has an id and connects out from its own loopback address
// (127.0.0.N, N ≥ 10), which is how the platform simulator
// (platform-sim.ts) tells the exits apart; each counts what passes. It owns
// the proxy protocols only; where the service chains them is the runner's
// egress (lib/src/egress-proxy.ts).
//
// Two kinds:
// - http: forward requests in absolute form (`GET http://host/path`, the
//   answer's status line passed on as it came, reason phrase included) and
//   CONNECT tunnels; with `tls`, the client speaks TLS to the proxy first
//   (an https:// proxy);
// - socks5: RFC 1928 CONNECT with an IPv4, IPv6 or domain target (socks5h
//   sends the name, socks5 the address), no-auth or RFC 1929 user/password.
// Optional Basic (http) or user/password (socks5) auth: the password must
// match; the user name is recorded, as providers read a session from it
// (ProxyPool session.usernameTemplate). A wrong password gets 407 (http) or
// RFC 1929 status 1 (socks5), and is counted.
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

export type UpstreamKind = 'http' | 'socks5';

export interface UpstreamProxyOptions {
  id: string;
  kind?: UpstreamKind;
  /** The address its outgoing connections come from: 127.0.0.N, N ≥ 10. */
  sourceAddress: string;
  /** Required credentials; a user name matching `user` (any, when absent) with this password. */
  auth?: { password: string; user?: RegExp };
  /** An https proxy (http kind only): the key and certificate it presents. */
  tls?: { key: string | Buffer; cert: string | Buffer };
}

export interface UpstreamProxy {
  readonly id: string;
  readonly kind: UpstreamKind;
  readonly sourceAddress: string;
  /** 127.0.0.1:<port> */
  readonly address: string;
  /** Its URL without credentials (`http://127.0.0.1:<port>`, `https://…`, `socks5://…`). */
  readonly url: string;
  /** Its URL with `user` and its password in the userinfo (what a urlSecretRef's Secret holds). */
  urlWith(user: string): string;
  /** Forward requests, tunnels and SOCKS connects accepted (authenticated, well-formed). */
  readonly requests: number;
  /** Bytes from the client to targets, and from targets to the client. */
  readonly bytesUp: number;
  readonly bytesDown: number;
  /** Connections to targets open now, and the most open at once. */
  readonly active: number;
  readonly maxActive: number;
  /** Requests refused for their credentials. */
  readonly authFailures: number;
  /** The user name of every accepted request, in order (the sessions). */
  readonly users: readonly string[];
  /** The target (host:port) of every accepted request, in order. */
  readonly targets: readonly string[];
  stop(): Promise<void>;
}

/** Start one upstream proxy on 127.0.0.1, an ephemeral port. */
export async function startUpstreamProxy(o: UpstreamProxyOptions): Promise<UpstreamProxy> {
  const kind = o.kind ?? 'http';
  if (!/^127\.\d+\.\d+\.\d+$/.test(o.sourceAddress) || o.sourceAddress === '127.0.0.1') {
    throw new Error('an upstream proxy connects out from its own loopback address (127.0.0.N, N ≥ 10)');
  }
  if (o.tls && kind !== 'http') throw new Error('tls is for http proxies');
  const counters = { requests: 0, bytesUp: 0, bytesDown: 0, active: 0, maxActive: 0, authFailures: 0 };
  const users: string[] = [];
  const targets: string[] = [];
  const sockets = new Set<Duplex>();
  const track = (s: Duplex) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  const accept = (user: string, target: string) => {
    counters.requests++;
    users.push(user);
    targets.push(target);
  };
  const opened = (out: Duplex) => {
    counters.active++;
    counters.maxActive = Math.max(counters.maxActive, counters.active);
    out.once('close', () => counters.active--);
  };
  const checkAuth = (user: string, password: string | undefined): boolean => {
    if (!o.auth) return true;
    const ok = password === o.auth.password && (!o.auth.user || o.auth.user.test(user));
    if (!ok) counters.authFailures++;
    return ok;
  };
  /** A TCP connection to the target from the proxy's own address. */
  const connectOut = (host: string, port: number): Promise<net.Socket> => new Promise((resolve, reject) => {
    const out = net.connect({ host, port, localAddress: o.sourceAddress });
    track(out);
    out.once('error', reject);
    out.once('connect', () => {
      out.off('error', reject);
      opened(out);
      resolve(out);
    });
  });
  const splice = (client: Duplex, out: Duplex) => {
    client.on('data', (c: Buffer) => (counters.bytesUp += c.length));
    out.on('data', (c: Buffer) => (counters.bytesDown += c.length));
    client.pipe(out);
    out.pipe(client);
    client.on('error', () => out.destroy());
    out.on('error', () => client.destroy());
    client.once('close', () => out.destroy());
    out.once('close', () => client.destroy());
  };

  const server: net.Server = kind === 'socks5'
    ? net.createServer((socket) => void socks5(socket, { checkAuth, accept, connectOut, splice, auth: !!o.auth }))
    : httpProxy(o.tls, { sourceAddress: o.sourceAddress, checkAuth, accept, connectOut, splice, opened, track, counters });
  server.on('connection', (s: net.Socket) => track(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const scheme = kind === 'socks5' ? 'socks5' : o.tls ? 'https' : 'http';
  return {
    id: o.id, kind, sourceAddress: o.sourceAddress, address,
    url: `${scheme}://${address}`,
    urlWith: (user) => `${scheme}://${encodeURIComponent(user)}:${encodeURIComponent(o.auth?.password ?? '')}@${address}`,
    get requests() { return counters.requests; },
    get bytesUp() { return counters.bytesUp; },
    get bytesDown() { return counters.bytesDown; },
    get active() { return counters.active; },
    get maxActive() { return counters.maxActive; },
    get authFailures() { return counters.authFailures; },
    users, targets,
    stop: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

/** Proxies `p1`…`pN` of one kind, connecting out from 127.0.0.10, .11, … (`firstHost` moves the start). */
export async function startUpstreamProxies(
  n: number, o: Omit<UpstreamProxyOptions, 'id' | 'sourceAddress'> & { firstHost?: number } = {},
): Promise<UpstreamProxy[]> {
  const first = o.firstHost ?? 10;
  if (first < 10 || first + n > 255) throw new Error('source addresses run from 127.0.0.10 to 127.0.0.254');
  return Promise.all(Array.from({ length: n }, (_, i) => startUpstreamProxy({ ...o, id: `p${i + 1}`, sourceAddress: `127.0.0.${first + i}` })));
}

interface Shared {
  checkAuth(user: string, password: string | undefined): boolean;
  accept(user: string, target: string): void;
  connectOut(host: string, port: number): Promise<net.Socket>;
  splice(client: Duplex, out: Duplex): void;
}

/** The user and password of a Basic Proxy-Authorization header. */
function basic(header: string | undefined): { user: string; password?: string } {
  const [scheme, encoded = ''] = (header ?? '').split(' ');
  if (scheme?.toLowerCase() !== 'basic') return { user: '' };
  const text = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? { user: text } : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

/** Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own never pass. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const endToEnd = (h: http.IncomingHttpHeaders) => Object.fromEntries(Object.entries(h).filter(([k, v]) => v !== undefined && !HOP_BY_HOP.has(k)));

function httpProxy(
  tlsOptions: UpstreamProxyOptions['tls'],
  s: Shared & { sourceAddress: string; opened(out: Duplex): void; track(s: Duplex): void; counters: { bytesUp: number; bytesDown: number } },
): net.Server {
  const challenge = { 'proxy-authenticate': 'Basic realm="upstream"' };
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const { user, password } = basic(req.headers['proxy-authorization']);
    if (!s.checkAuth(user, password)) return void res.writeHead(407, challenge).end();
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      return void res.writeHead(400).end('not a proxy request\n');
    }
    if (target.protocol !== 'http:') return void res.writeHead(400).end('only http:// is forwarded\n');
    const port = Number(target.port || 80);
    s.accept(user, `${target.hostname}:${port}`);
    const out = http.request({
      host: target.hostname.replace(/^\[|\]$/g, ''), port, path: `${target.pathname}${target.search}`, method: req.method,
      headers: endToEnd(req.headers), localAddress: s.sourceAddress, agent: false,
    }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.statusMessage, endToEnd(up.headers));
      up.on('data', (c: Buffer) => (s.counters.bytesDown += c.length));
      up.pipe(res);
    });
    out.on('socket', (sock) => {
      s.track(sock);
      s.opened(sock);
    });
    out.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end('upstream connection failed\n')));
    req.on('data', (c: Buffer) => (s.counters.bytesUp += c.length));
    res.once('close', () => out.destroy());
    req.pipe(out);
  };
  const server = tlsOptions ? https.createServer(tlsOptions, onRequest) : http.createServer(onRequest);
  server.on('connect', (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
    client.on('error', () => client.destroy());
    const { user, password } = basic(req.headers['proxy-authorization']);
    if (!s.checkAuth(user, password)) {
      return void client.end('HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic realm="upstream"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    }
    const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(req.url ?? '');
    if (!m) return void client.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    const host = m[1]!.replace(/^\[|\]$/g, '');
    const port = Number(m[2]);
    s.accept(user, `${host}:${port}`);
    s.connectOut(host, port).then((out) => {
      if (client.destroyed) return void out.destroy();
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) {
        s.counters.bytesUp += head.length;
        out.write(head);
      }
      s.splice(client, out);
    }, () => client.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n'));
  });
  return server;
}

/** Reads exactly n bytes at a time from a socket that is not yet piped. */
function reader(socket: net.Socket): (n: number) => Promise<Buffer> {
  let buffered = Buffer.alloc(0);
  let waiting: { n: number; resolve: (b: Buffer) => void; reject: (e: Error) => void } | undefined;
  const settle = () => {
    if (!waiting || buffered.length < waiting.n) return;
    const { n, resolve } = waiting;
    waiting = undefined;
    const out = buffered.subarray(0, n);
    buffered = buffered.subarray(n);
    resolve(out);
  };
  const onData = (c: Buffer) => {
    buffered = Buffer.concat([buffered, c]);
    settle();
  };
  socket.on('data', onData);
  const fail = () => waiting?.reject(new Error('socks client went away'));
  socket.once('close', fail);
  socket.once('error', fail);
  return (n: number) => {
    if (n === 0) {
      // Done reading: what came early belongs to the tunnel.
      socket.off('data', onData);
      if (buffered.length) socket.unshift(buffered);
      buffered = Buffer.alloc(0);
      return Promise.resolve(Buffer.alloc(0));
    }
    return new Promise((resolve, reject) => {
      waiting = { n, resolve, reject };
      settle();
    });
  };
}

const SOCKS = { version: 5, noAuth: 0, userPass: 2, noMethod: 0xff, connect: 1, ipv4: 1, domain: 3, ipv6: 4 } as const;
const REPLY = { ok: 0, failure: 1, refused: 5, command: 7, addressType: 8 } as const;

function socksReply(code: number): Buffer {
  return Buffer.from([SOCKS.version, code, 0, SOCKS.ipv4, 0, 0, 0, 0, 0, 0]);
}

async function socks5(socket: net.Socket, s: Shared & { auth: boolean }): Promise<void> {
  socket.on('error', () => socket.destroy());
  const read = reader(socket);
  try {
    const [version, count = 0] = await read(2);
    if (version !== SOCKS.version) return void socket.destroy();
    const methods = [...(await read(count))];
    const method = s.auth ? SOCKS.userPass : SOCKS.noAuth;
    if (!methods.includes(method)) return void socket.end(Buffer.from([SOCKS.version, SOCKS.noMethod]));
    socket.write(Buffer.from([SOCKS.version, method]));
    let user = '';
    let password: string | undefined;
    if (s.auth) {
      const [, ulen = 0] = await read(2);
      user = (await read(ulen)).toString('utf8');
      const [plen = 0] = await read(1);
      password = (await read(plen)).toString('utf8');
    }
    if (!s.checkAuth(user, password)) return void socket.end(Buffer.from([1, 1]));
    if (s.auth) socket.write(Buffer.from([1, 0]));
    const [, cmd, , atyp] = await read(4);
    let host: string;
    if (atyp === SOCKS.ipv4) host = [...(await read(4))].join('.');
    else if (atyp === SOCKS.ipv6) host = ((await read(16)).toString('hex').match(/.{4}/g) ?? []).join(':');
    else if (atyp === SOCKS.domain) host = (await read((await read(1))[0] ?? 0)).toString('latin1');
    else return void socket.end(socksReply(REPLY.addressType));
    const port = (await read(2)).readUInt16BE(0);
    if (cmd !== SOCKS.connect) return void socket.end(socksReply(REPLY.command));
    await read(0);
    s.accept(user, `${host}:${port}`);
    let out: net.Socket;
    try {
      out = await s.connectOut(host, port);
    } catch (err) {
      return void socket.end(socksReply((err as { code?: string }).code === 'ECONNREFUSED' ? REPLY.refused : REPLY.failure));
    }
    if (socket.destroyed) return void out.destroy();
    socket.write(socksReply(REPLY.ok));
    s.splice(socket, out);
  } catch {
    socket.destroy();
  }
}
