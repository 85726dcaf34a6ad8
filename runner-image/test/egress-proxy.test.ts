// The runner's egress proxy: plain HTTP forwarding and CONNECT tunnels to
// what the outbound policy allows, 403 with a short reason for the rest.
// "Internal" is modelled on loopback: the policy allows 127.0.0.1 and
// refuses 127.0.0.2, where a server counts every connection it gets.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { OutboundPolicy, type Resolver } from '@mediajobs/lib/outbound';
import { GetError } from '@mediajobs/lib/batches/http-get';
import { EgressProxy, egressFetch, parsePortRanges, withEgress } from '../src/egress-proxy.js';
import { fetchText } from '../src/live.js';

interface Site {
  port: number;
  /** Connections accepted so far (a refused target must see none). */
  connections: number;
  stop(): Promise<void>;
}

async function startSite(host: string, handler: http.RequestListener = (_req, res) => res.end('hello from the site')): Promise<Site> {
  const server = http.createServer(handler);
  const site = { port: 0, connections: 0, stop: () => new Promise<void>((r) => server.close(() => r())) };
  server.on('connection', () => site.connections++);
  await new Promise<void>((r) => server.listen(0, host, r));
  site.port = (server.address() as AddressInfo).port;
  server.keepAliveTimeout = 100;
  return site;
}

/** A resolver that knows a few names; a name it does not know is not found. */
function resolver(names: Record<string, string[]>): Resolver {
  return async (hostname) => {
    const addresses = names[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: net.isIP(address) }));
  };
}

/** One forward request through the proxy (absolute-form URI, as yt-dlp and ffmpeg send for http://). */
function viaProxy(proxy: EgressProxy, url: string): Promise<{ status: number; body: string }> {
  const p = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: p.hostname, port: p.port, path: url, headers: { host: new URL(url).host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** CONNECT through the proxy, then (when the tunnel opens) one HTTP/1.0 GET through it; the proxy's answer or the site's. */
function tunnel(proxy: EgressProxy, authority: string): Promise<string> {
  const p = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: p.hostname, port: Number(p.port) });
    let text = '';
    let asked = false;
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`));
    socket.on('data', (d: string) => {
      text += d;
      if (!asked && text.startsWith('HTTP/1.1 200') && text.includes('\r\n\r\n')) {
        asked = true;
        socket.write(`GET / HTTP/1.0\r\nHost: ${authority}\r\n\r\n`);
      }
    });
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('runner: egress proxy', () => {
  let allowed: Site;
  let internal: Site;
  let proxy: EgressProxy;
  const names = { 'media.test': ['127.0.0.1'], 'rebound.test': ['127.0.0.2'], 'split.test': ['127.0.0.1', '127.0.0.2'] };

  before(async () => {
    [allowed, internal] = await Promise.all([startSite('127.0.0.1'), startSite('127.0.0.2')]);
    proxy = await EgressProxy.start({ policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'], resolve: resolver(names) }) });
  });
  after(async () => {
    await proxy?.close();
    await Promise.all([allowed?.stop(), internal?.stop()]);
  });
  afterEach(() => expect(internal.connections, 'connections that reached the internal address').to.equal(0));

  it('listens on 127.0.0.1 and forwards plain HTTP to an allowed address, by literal or by name', async () => {
    expect(proxy.url).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await viaProxy(proxy, `http://127.0.0.1:${allowed.port}/x`)).to.deep.equal({ status: 200, body: 'hello from the site' });
    expect(await viaProxy(proxy, `http://media.test:${allowed.port}/x`)).to.deep.equal({ status: 200, body: 'hello from the site' });
  });

  it('tunnels CONNECT to an allowed address', async () => {
    const answer = await tunnel(proxy, `media.test:${allowed.port}`);
    expect(answer).to.match(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.[01] 200 OK/);
    expect(answer).to.match(/hello from the site$/);
  });

  it('refuses an address the policy refuses with 403 and a short reason: as written, or as a name resolves at connect time', async () => {
    for (const url of [`http://127.0.0.2:${internal.port}/secret`, `http://rebound.test:${internal.port}/secret`, `http://split.test:${internal.port}/secret`]) {
      expect(await viaProxy(proxy, url), url).to.deep.equal({ status: 403, body: 'address refused (loopback)\n' });
    }
    for (const authority of [`127.0.0.2:${internal.port}`, `rebound.test:${internal.port}`, `[::ffff:127.0.0.2]:${internal.port}`]) {
      expect(await tunnel(proxy, authority), authority).to.match(/^HTTP\/1\.1 403 Forbidden\r\n[^]*\r\n\r\naddress refused \(loopback\)\n$/);
    }
    // Metadata addresses stay refused whatever is allowed.
    expect(await viaProxy(proxy, 'http://169.254.169.254/latest/meta-data/')).to.deep.equal({ status: 403, body: 'address refused (link-local)\n' });
  });

  it('refuses ports outside the allowed ones, before any lookup or connection', async () => {
    const ssh = await startSite('127.0.0.1');
    try {
      const narrow = await EgressProxy.start({ policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }), ports: parsePortRanges('80,443')! });
      try {
        expect(await viaProxy(narrow, `http://127.0.0.1:${ssh.port}/`)).to.deep.equal({ status: 403, body: `port ${ssh.port} refused\n` });
        expect(await tunnel(narrow, `127.0.0.1:${ssh.port}`)).to.match(new RegExp(`^HTTP/1\\.1 403 Forbidden\\r\\n[^]*\\r\\n\\r\\nport ${ssh.port} refused\\n$`));
      } finally {
        await narrow.close();
      }
      expect(ssh.connections).to.equal(0);
      // The default: the web's ports and the unprivileged ones.
      expect(await viaProxy(proxy, 'http://127.0.0.1:25/')).to.deep.equal({ status: 403, body: 'port 25 refused\n' });
    } finally {
      await ssh.stop();
    }
  });

  it('reads its ports setting: ports and ranges, nothing else', () => {
    expect(parsePortRanges('80, 443,1024-65535')).to.deep.equal([[80, 80], [443, 443], [1024, 65535]]);
    for (const bad of ['', '0', '65536', '9-1', 'http', '80;443', '1-2-3']) expect(parsePortRanges(bad), bad).to.equal(undefined);
  });

  it('answers what it cannot forward without an errno: not a proxy request, an unknown name, nothing listening', async () => {
    const direct = await new Promise<number>((resolve, reject) => {
      const p = new URL(proxy.url);
      http.get({ host: p.hostname, port: p.port, path: '/', agent: false }, (res) => resolve(res.resume().statusCode!)).on('error', reject);
    });
    expect(direct).to.equal(400);
    expect(await viaProxy(proxy, `http://nowhere.test:${allowed.port}/`)).to.deep.equal({ status: 502, body: 'host not found\n' });
    const closed = await startSite('127.0.0.1');
    await closed.stop();
    expect(await viaProxy(proxy, `http://127.0.0.1:${closed.port}/`)).to.deep.equal({ status: 502, body: 'connection failed\n' });
  });

  it('the runner\'s own reads (playlists) take the same policy and ports, check every redirect, and send the format\'s headers', async () => {
    const agents: (string | undefined)[] = [];
    const redirecting = await startSite('127.0.0.1', (req, res) => {
      agents.push(req.headers['user-agent']);
      if (req.url === '/ok.m3u8') return void res.end('#EXTM3U\n');
      if (req.url === '/gone.m3u8') return void res.writeHead(404).end('not here');
      res.writeHead(302, { location: `http://127.0.0.2:${internal.port}/secret.m3u8` }).end();
    });
    const failure = (read: Promise<unknown>) => read.then(() => undefined, (err: unknown) => (err instanceof GetError ? err.failure : err));
    try {
      await withEgress({ policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }) }, async () => {
        const read = { timeoutMs: 5000, maxBytes: 1000 };
        const ok = `http://127.0.0.1:${redirecting.port}/ok.m3u8`;
        expect(await fetchText(ok, { 'User-Agent': 'the format\'s agent' }, read)).to.equal('#EXTM3U\n');
        expect(agents).to.deep.equal(['the format\'s agent']);
        expect(await fetchText(`http://127.0.0.1:${redirecting.port}/gone.m3u8`, {}, read)).to.equal(undefined);
        const res = await egressFetch(ok, { signal: AbortSignal.timeout(5000) });
        expect([res.status, await res.text()]).to.deep.equal([200, '#EXTM3U\n']);
        expect(await egressFetch(`http://127.0.0.2:${internal.port}/`).catch((err: unknown) => err)).to.include({ code: 'ERR_OUTBOUND_REFUSED' });
        expect(await failure(fetchText(`http://127.0.0.1:${redirecting.port}/moved.m3u8`, {}, read))).to.deep.equal({ kind: 'refused', category: 'loopback' });
        expect(await failure(fetchText('file:///etc/hosts', {}, read))).to.deep.equal({ kind: 'bad_url' });
      });
      // The egress's ports hold for these reads as for the proxy.
      await withEgress({ policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }), ports: parsePortRanges('80,443') }, async () => {
        const before = redirecting.connections;
        expect(await failure(fetchText(`http://127.0.0.1:${redirecting.port}/ok.m3u8`, {}, { timeoutMs: 5000 })))
          .to.deep.equal({ kind: 'port_refused', port: redirecting.port });
        expect(redirecting.connections).to.equal(before);
      });
    } finally {
      await redirecting.stop();
    }
  });
});
