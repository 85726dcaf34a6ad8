// lib's egress proxy as the gateway runs it (media-info/egress.ts): every
// refusal and failed connection answered alike by closing the client's
// connection, a secret in Proxy-Authorization, and MEDIA_INFO_PROXY as an
// upstream reached with the run's session. The runner's use (403 with a
// reason) is runner-image/test/egress-proxy.test.ts. "Internal" is modelled
// on loopback: the policy allows 127.0.0.1 and refuses 127.0.0.2, where a
// server counts every connection it accepts.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { EgressProxy } from '../src/egress-proxy.js';
import { assessClassification } from '../src/media-info/assess.js';
import { startLookupEgress } from '../src/media-info/egress.js';
import { MediaInfoExtractor, proxyArgs } from '../src/media-info/extractor.js';
import { OutboundPolicy, type Resolver } from '../src/outbound.js';
import { makeHls, removeDir, scratchDir, startRecordingProxy, startStaticServer, type StaticServer } from './media-info-support.js';

/** Names this test knows (nothing leaves loopback); another is not found. */
const resolve: Resolver = async (hostname) => {
  const address = ({ 'site.test': '127.0.0.1', 'internal.test': '127.0.0.2' } as Record<string, string>)[hostname];
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return [{ address, family: 4 }];
};
const POLICY = new OutboundPolicy({ allowed: ['127.0.0.1/32'], resolve });
const SECRET = 'egress-test-secret';

interface Counting {
  port: number;
  accepted: number;
  stop(): Promise<void>;
}

async function listen(host: string, server: net.Server): Promise<Counting> {
  const c = { port: 0, accepted: 0, stop: () => new Promise<void>((r) => server.close(() => r())) };
  server.on('connection', () => c.accepted++);
  await new Promise<void>((r) => server.listen(0, host, r));
  c.port = (server.address() as AddressInfo).port;
  return c;
}

const site = (host: string) => listen(host, http.createServer((req, res) => res.end(`site ${req.url}`)));

/** Raw bytes the proxy answers to `request`, until it closes the connection. */
function exchange(proxy: EgressProxy, request: string): Promise<string> {
  const { port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => socket.write(request));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      text += d;
      // A tunnel stays open: one answer is enough.
      if (/^HTTP\/1\.1 200 Connection Established\r\n\r\n/.test(text)) socket.end();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

const auth = (session = 'abc123', secret = SECRET) => `proxy-authorization: Basic ${Buffer.from(`${session}:${secret}`).toString('base64')}\r\n`;
const forward = (url: string, headers = auth()) => `GET ${url} HTTP/1.1\r\nhost: ${new URL(url).host}\r\n${headers}connection: close\r\n\r\n`;
const connect = (authority: string, headers = auth()) => `CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n${headers}\r\n`;

describe('lib: egress proxy, as the gateway runs it', () => {
  let allowed: Counting;
  let internal: Counting;
  let closed: number;
  let proxy: EgressProxy;

  before(async () => {
    [allowed, internal] = await Promise.all([site('127.0.0.1'), site('127.0.0.2')]);
    const gone = await site('127.0.0.2');
    await gone.stop();
    closed = gone.port;
    proxy = await EgressProxy.start({ policy: POLICY, refusals: 'unreachable', secret: SECRET });
  });
  after(async () => {
    await proxy?.close();
    await Promise.all([allowed?.stop(), internal?.stop()]);
  });

  it('forwards and tunnels to an allowed address for a client with the secret', async () => {
    expect(await exchange(proxy, forward(`http://127.0.0.1:${allowed.port}/page`))).to.match(/^HTTP\/1\.1 200 OK\r\n[\s\S]*site \/page$/);
    expect(await exchange(proxy, connect(`127.0.0.1:${allowed.port}`))).to.equal('HTTP/1.1 200 Connection Established\r\n\r\n');
    expect(await exchange(proxy, forward(`http://site.test:${allowed.port}/named`))).to.match(/site \/named$/);
  });

  it('a refused address, a closed port, a refused port and an unknown name all end the same way: closed, no byte answered', async () => {
    const answers = await Promise.all([
      exchange(proxy, forward(`http://127.0.0.2:${internal.port}/`)),
      exchange(proxy, forward(`http://127.0.0.2:${closed}/`)),
      exchange(proxy, forward(`http://127.0.0.1:${closed}/`)),
      exchange(proxy, forward('http://127.0.0.1:25/')),
      exchange(proxy, forward('http://name.invalid/')),
      exchange(proxy, forward(`http://internal.test:${internal.port}/`)),
      exchange(proxy, connect(`internal.test:${internal.port}`)),
      exchange(proxy, connect(`127.0.0.2:${internal.port}`)),
      exchange(proxy, connect(`127.0.0.2:${closed}`)),
      exchange(proxy, connect(`127.0.0.1:${closed}`)),
      exchange(proxy, connect('localhost:443')),
    ]);
    expect(answers).to.deep.equal(answers.map(() => ''));
    expect(internal.accepted).to.equal(0);
  });

  it('a client without the secret gets 407 and reaches nothing', async () => {
    const before = allowed.accepted;
    for (const request of [forward(`http://127.0.0.1:${allowed.port}/`, ''), connect(`127.0.0.1:${allowed.port}`, auth('abc123', 'wrong'))]) {
      expect(await exchange(proxy, request)).to.match(/^HTTP\/1\.1 407 Proxy Authentication Required\r\n[\s\S]*proxy-authenticate: Basic realm="egress"/i);
    }
    expect(allowed.accepted).to.equal(before);
  });

  describe('with an upstream proxy (MEDIA_INFO_PROXY)', () => {
    it('sends forward requests to it with the session in its user name; a refused target never reaches it', async () => {
      const pool = await startRecordingProxy();
      const chained = await EgressProxy.start({ policy: POLICY, refusals: 'unreachable', secret: SECRET, upstream: pool.proxyTemplate });
      try {
        // The pool refuses its first session (a blocked exit address), then forwards.
        expect(await exchange(chained, forward(`http://127.0.0.1:${allowed.port}/a`, auth('first')))).to.match(/^HTTP\/1\.1 403 /);
        expect(await exchange(chained, forward(`http://127.0.0.1:${allowed.port}/b`, auth('second')))).to.match(/site \/b$/);
        expect(await exchange(chained, forward(`http://127.0.0.2:${internal.port}/c`, auth('third')))).to.equal('');
        // The upstream resolves names itself: a name is checked on what it resolves to here first.
        expect(await exchange(chained, forward(`http://internal.test:${internal.port}/d`, auth('fourth')))).to.equal('');
        expect(pool.sessions).to.deep.equal(['first', 'second']);
        expect(pool.urls).to.deep.equal([`http://127.0.0.1:${allowed.port}/a`, `http://127.0.0.1:${allowed.port}/b`]);
        expect(internal.accepted).to.equal(0);
      } finally {
        await chained.close();
        await pool.stop();
      }
    });

    it('opens tunnels through its CONNECT, with its credentials', async () => {
      const seen: string[] = [];
      const upstream = await listen('127.0.0.1', net.createServer((socket) => {
        socket.once('data', (head: Buffer) => {
          const text = head.toString('latin1');
          seen.push(text.split('\r\n').filter((l) => /^(CONNECT|proxy-authorization)/i.test(l)).join(' | '));
          const [, host, port] = /^CONNECT ([^:]+):(\d+)/.exec(text)!;
          const target = net.connect({ host: host!, port: Number(port) }, () => {
            socket.write('HTTP/1.1 200 OK\r\n\r\n');
            socket.pipe(target).pipe(socket);
          });
          target.on('error', () => socket.destroy());
        });
      }));
      const chained = await EgressProxy.start({
        policy: POLICY, refusals: 'unreachable', secret: SECRET, upstream: `http://u-{session}:pw@127.0.0.1:${upstream.port}`,
      });
      try {
        expect(await exchange(chained, connect(`127.0.0.1:${allowed.port}`, auth('s1')))).to.equal('HTTP/1.1 200 Connection Established\r\n\r\n');
        expect(await exchange(chained, connect(`127.0.0.2:${internal.port}`, auth('s2')))).to.equal('');
        expect(seen).to.deep.equal([`CONNECT 127.0.0.1:${allowed.port} HTTP/1.1 | proxy-authorization: Basic ${Buffer.from('u-s1:pw').toString('base64')}`]);
        expect(internal.accepted).to.equal(0);
      } finally {
        await chained.close();
        await upstream.stop();
      }
    });

    it('refuses at start an upstream it cannot chain (socks4); http(s) and socks5(h) chain (egress-upstream.test.ts)', async () => {
      let error: unknown;
      await EgressProxy.start({ policy: POLICY, upstream: 'socks4://127.0.0.1:1080' }).catch((err: unknown) => (error = err));
      expect(String(error)).to.include('only an http, https, socks5 or socks5h proxy can be chained');
    });
  });
});

describe('lib: the gateway\'s lookups through the egress (real yt-dlp)', function () {
  this.timeout(60_000);
  let dir: string;
  let media: StaticServer;
  let vertical: string;

  before(async () => {
    dir = await scratchDir();
    media = await startStaticServer(dir);
    vertical = `${media.baseUrl}/${await makeHls(dir, 'vertical', [{ width: 180, height: 320 }, { width: 360, height: 640 }])}`;
  });
  after(async () => {
    await media?.stop();
    if (dir) await removeDir(dir);
  });

  it('the egress\'s --proxy comes last, after MEDIA_INFO_YTDLP_ARGS, and replaces MEDIA_INFO_PROXY', () => {
    const egress = { proxyUrl: (s: string) => `http://${s}:x@127.0.0.1:9`, env: () => ({}) };
    expect(proxyArgs({ extraArgs: ['--proxy', 'http://mine:1'], proxy: 'http://pool-{session}:1', egress }, 's1'))
      .to.deep.equal(['--proxy', 'http://mine:1', '--proxy', 'http://s1:x@127.0.0.1:9']);
    expect(proxyArgs({ extraArgs: ['--cookies', 'c'], proxy: 'http://pool-{session}:1' }, 's1')).to.deep.equal(['--proxy', 'http://pool-s1:1', '--cookies', 'c']);
  });

  it('a blocked pool session: the full run gets a new session through the egress and answers', async () => {
    const pool = await startRecordingProxy();
    const egress = await startLookupEgress({ policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }), upstream: pool.proxyTemplate });
    try {
      const x = new MediaInfoExtractor({ egress, urlMap: new Map([['https://www.youtube.com/watch?v=vertical001', vertical]]) });
      const r = await x.lookup('https://www.youtube.com/watch?v=vertical001', assessClassification);
      expect(r.ok, JSON.stringify(r.attempts)).to.equal(true);
      expect(r.attempts.map((a) => a.stage)).to.deep.equal(['light', 'full']);
      const distinct = [...new Set(pool.sessions)];
      expect(distinct).to.have.length(2);
      expect(distinct.every((s) => /^[0-9a-f]{16}$/.test(s))).to.equal(true);
      expect(pool.urls.every((u) => u.startsWith(media.baseUrl) && u.endsWith('.m3u8'))).to.equal(true);
    } finally {
      await egress.close();
      await pool.stop();
    }
  });
});
