// The egress proxy chained to an upstream proxy, as the runner runs it for a
// platform's proxy session (issue 37): http and socks5/socks5h upstreams
// (test/support/upstream-proxies.ts, each connecting out from its own
// loopback address), for CONNECT tunnels and plain forward requests, with
// the outbound policy still deciding: the port and the host as written
// always; the addresses of a name here when the upstream resolves it
// (checkResolved before sending), at connect time through socks5. The
// upstream's credentials never appear in an answer or a log line.
// "Internal" is 127.0.0.2: refused by the policy, where a site counts every
// connection it gets.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { EgressProxy, EGRESS_REFUSED_PHRASE, type EgressAnswer } from '../src/egress-proxy.js';
import { createLogger } from '../src/logger.js';
import { OutboundPolicy, type Resolver } from '../src/outbound.js';
import { startUpstreamProxy, type UpstreamProxy } from '../../test/support/upstream-proxies.js';

const NAMES: Record<string, string> = { 'site.test': '127.0.0.1', 'internal.test': '127.0.0.2' };
const resolve: Resolver = async (hostname) => {
  const address = NAMES[hostname];
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return [{ address, family: 4 }];
};
// 127.0.0.1 is the web; the upstream proxies' source addresses are theirs, not the policy's.
const POLICY = new OutboundPolicy({ allowed: ['127.0.0.1/32'], resolve });
const PASSWORD = 'upstream-pw-7f3a9c1e';

interface Site {
  port: number;
  connections: number;
  /** Remote addresses of the requests it served: which exit each came from. */
  from: string[];
  stop(): Promise<void>;
}

async function startSite(host: string, handler?: http.RequestListener): Promise<Site> {
  const site: Site = { port: 0, connections: 0, from: [], stop: async () => undefined };
  const server = http.createServer((req, res) => {
    site.from.push(req.socket.remoteAddress ?? '');
    if (handler) return handler(req, res);
    res.end(`site ${req.url}`);
  });
  server.keepAliveTimeout = 100;
  server.on('connection', () => site.connections++);
  await new Promise<void>((r) => server.listen(0, host, r));
  site.port = (server.address() as AddressInfo).port;
  site.stop = () => new Promise<void>((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });
  return site;
}

/** Raw bytes the proxy answers to `request`; a tunnel that opens is sent one HTTP/1.0 GET. */
function exchange(proxy: EgressProxy, request: string): Promise<string> {
  const { port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => socket.write(request));
    let text = '';
    let asked = false;
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      text += d;
      if (!asked && /^HTTP\/1\.1 200 Connection Established\r\n\r\n/.test(text)) {
        asked = true;
        const host = /^CONNECT (\S+)/.exec(request)![1]!;
        socket.write(`GET /tunnelled HTTP/1.0\r\nhost: ${host}\r\n\r\n`);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

const forward = (url: string) => `GET ${url} HTTP/1.1\r\nhost: ${new URL(url).host}\r\nconnection: close\r\n\r\n`;
const connect = (authority: string) => `CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\n`;

/** Log lines written while `fn` runs, through a logger handed to the proxy. */
function capturingLogger(): { logger: ReturnType<typeof createLogger>; text: () => string } {
  const lines: string[] = [];
  const logger = createLogger('egress-test', 'info', {}, { write: (line: string) => void lines.push(line) });
  return { logger, text: () => lines.join('') };
}

describe('lib: egress proxy chained to an upstream proxy (ProxyPool sessions)', () => {
  let site: Site;
  let internal: Site;

  before(async () => {
    [site, internal] = await Promise.all([startSite('127.0.0.1'), startSite('127.0.0.2')]);
  });
  after(async () => {
    await Promise.all([site?.stop(), internal?.stop()]);
  });

  for (const scheme of ['http', 'socks5', 'socks5h'] as const) {
    describe(`through a ${scheme} upstream`, () => {
      let upstream: UpstreamProxy;
      let proxy: EgressProxy;
      const answers: EgressAnswer[] = [];
      const log = capturingLogger();
      const withScheme = (url: string) => (scheme === 'socks5h' ? url.replace(/^socks5:/, 'socks5h:') : url);
      // The upstream resolves names itself with http and socks5h: the tests' names exist only here, so those get literals.
      const host = scheme === 'socks5' ? 'site.test' : '127.0.0.1';

      before(async () => {
        upstream = await startUpstreamProxy({ id: 'p1', kind: scheme === 'http' ? 'http' : 'socks5', sourceAddress: '127.0.0.11', auth: { password: PASSWORD } });
        const url = withScheme(upstream.urlWith('user-session-abc123'));
        proxy = await EgressProxy.start({ policy: POLICY, upstream: url, logger: log.logger, observe: (a) => answers.push(a) });
      });
      after(async () => {
        await proxy?.close();
        await upstream?.stop();
      });

      it('a forward request and a tunnel reach the site from the upstream\'s exit address, one request each at the upstream', async () => {
        site.from.length = 0;
        expect(await exchange(proxy, forward(`http://${host}:${site.port}/page`))).to.match(/^HTTP\/1\.1 200 OK\r\n[\s\S]*site \/page$/);
        expect(await exchange(proxy, connect(`${host}:${site.port}`))).to.match(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK[\s\S]*site \/tunnelled$/);
        expect(site.from).to.deep.equal(['127.0.0.11', '127.0.0.11']);
        expect(upstream.requests).to.equal(2);
        // socks5: the name was resolved here and the upstream was given the address.
        expect(upstream.targets).to.deep.equal([`127.0.0.1:${site.port}`, `127.0.0.1:${site.port}`]);
        // One session for every connection of the attempt: the user name the pool pins an exit by.
        expect(upstream.users).to.deep.equal(['user-session-abc123', 'user-session-abc123']);
        expect(upstream.bytesDown).to.be.greaterThan(0);
      });

      it('a refused address, a refused port and a name resolving to a refused address reach neither the upstream nor the address', async () => {
        const [before, asked] = [internal.connections, upstream.requests];
        const answers = await Promise.all([
          exchange(proxy, forward(`http://127.0.0.2:${internal.port}/`)),
          exchange(proxy, connect(`127.0.0.2:${internal.port}`)),
          exchange(proxy, forward(`http://internal.test:${internal.port}/`)),
          exchange(proxy, connect(`internal.test:${internal.port}`)),
          exchange(proxy, connect('site.test:25')),
        ]);
        for (const a of answers.slice(0, 4)) expect(a).to.match(/^HTTP\/1\.1 403 [\s\S]*address refused \(loopback\)\n/);
        expect(answers[0]).to.match(new RegExp(`^HTTP/1\\.1 403 ${EGRESS_REFUSED_PHRASE}\\r\\n`));
        expect(answers[4]).to.match(/^HTTP\/1\.1 403 [\s\S]*port 25 refused\n/);
        expect(internal.connections).to.equal(before);
        expect(upstream.requests).to.equal(asked);
      });

      it('wrong credentials: 502 with a phrase of ours, nothing of the URL in the answer or the log', async () => {
        const wrong = withScheme(upstream.urlWith('user-session-abc123')).replace(PASSWORD, 'not-the-pw-4d2b8e');
        const bad = await EgressProxy.start({ policy: POLICY, upstream: wrong, logger: log.logger });
        try {
          const texts = [await exchange(bad, forward(`http://${host}:${site.port}/x`)), await exchange(bad, connect(`${host}:${site.port}`))];
          for (const t of texts) expect(t).to.match(/^HTTP\/1\.1 502 [\s\S]*upstream proxy refused its credentials\n/);
          for (const t of [...texts, log.text()]) expect(t).not.to.include('not-the-pw-4d2b8e').and.not.to.include(PASSWORD).and.not.to.include(upstream.address);
          expect(log.text()).to.include('upstream proxy refused its credentials');
        } finally {
          await bad.close();
        }
      });

      it('tells the runner a forward request\'s 429 with its Retry-After and a challenge page\'s mark', async () => {
        const limiting = await startSite('127.0.0.1', (req, res) => {
          if (req.url === '/limited') return void res.writeHead(429, { 'retry-after': '37' }).end('slow down');
          res.writeHead(403, { 'cf-mitigated': 'challenge' }).end('<title>Just a moment...</title>');
        });
        try {
          answers.length = 0;
          expect(await exchange(proxy, forward(`http://${host}:${limiting.port}/limited`))).to.match(/^HTTP\/1\.1 429 [\s\S]*slow down/);
          expect(await exchange(proxy, forward(`http://${host}:${limiting.port}/check`))).to.match(/^HTTP\/1\.1 403 Forbidden\r\n/);
          expect(answers).to.deep.equal([
            { url: `http://${host}:${limiting.port}/limited`, status: 429, retryAfter: '37', challenge: false },
            { url: `http://${host}:${limiting.port}/check`, status: 403, challenge: true },
          ]);
        } finally {
          await limiting.stop();
        }
      });
    });
  }

  it('accepts http, https, socks5 and socks5h upstreams and refuses others without echoing the URL', async () => {
    for (const url of ['ftp://user:hunter2-secret@127.0.0.1:21', 'socks4://user:hunter2-secret@127.0.0.1:1080']) {
      const err = await EgressProxy.start({ policy: POLICY, upstream: url }).then(() => undefined, (e: Error) => e);
      expect(err?.message).to.equal('egress upstream: only an http, https, socks5 or socks5h proxy can be chained');
    }
  });
});
