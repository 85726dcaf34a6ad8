// The runner's own reads (live detection's playlists, a format's head, an
// MP4 clip's window) leave by the same path as yt-dlp's and ffmpeg's: the
// job's egress proxy, and through it the attempt's upstream proxy session
// and source address (issue 37). Without an upstream they reach the site as
// before. The upstream proxies (test/support/upstream-proxies.ts) connect
// out from their own loopback addresses, which is how the site tells the
// exit each request came from; "internal" is 127.0.0.2, refused by the
// policy, where a site counts every connection it gets.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { GetError } from '@mediajobs/lib/batches/http-get';
import { OutboundPolicy, type Resolver } from '@mediajobs/lib/outbound';
import { parseRange } from '../../test/support/media.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { startUpstreamProxy, type UpstreamProxy } from '../../test/support/upstream-proxies.js';
import { egressFetch, withEgress, type EgressOptions } from '../src/egress-proxy.js';
import { fetchText, isLiveSource } from '../src/live.js';
import { readableInputs } from '../src/source-read.js';

const run = promisify(execFile);
const PASSWORD = 'pool-password-5d0e2a';
const SESSION = 'user-session-0a1b2c3d4e5f-1';
// The upstreams resolve what they are given themselves (the real resolver): the site goes by its address.
const NAMES: Record<string, string> = { 'internal.test': '127.0.0.2' };
const resolve: Resolver = async (hostname) => {
  const address = NAMES[hostname];
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return [{ address, family: 4 }];
};
const POLICY = new OutboundPolicy({ allowed: ['127.0.0.1/32'], resolve });

interface Seen {
  from: string;
  path: string;
  range?: string;
}

interface Site {
  port: number;
  seen: Seen[];
  connections: number;
  stop(): Promise<void>;
}

/** A platform's media host: a live HLS playlist behind a master, and an MP4 served with ranges; over TLS with `tls`. */
async function startSite(host: string, mp4?: Buffer, tls?: { key: Buffer; cert: Buffer }): Promise<Site> {
  const site: Site = { port: 0, seen: [], connections: 0, stop: async () => undefined };
  const handler: http.RequestListener = (req, res) => {
    site.seen.push({ from: req.socket.remoteAddress ?? '', path: req.url ?? '', ...(req.headers.range ? { range: req.headers.range } : {}) });
    if (req.url === '/master.m3u8') return void res.end('#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nlive/index.m3u8\n');
    // No EXT-X-ENDLIST: a live playlist.
    if (req.url === '/live/index.m3u8') return void res.end('#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n#EXTINF:2,\nseg7.ts\n');
    if (req.url === '/clip.mp4' && mp4) {
      const range = parseRange(req.headers.range, mp4.length);
      if (range === 'invalid') return void res.writeHead(416, { 'content-range': `bytes */${mp4.length}` }).end();
      const { start, end } = range ?? { start: 0, end: mp4.length - 1 };
      res.writeHead(range ? 206 : 200, {
        'content-type': 'video/mp4', 'accept-ranges': 'bytes', 'content-length': end - start + 1, ...(range ? { 'content-range': `bytes ${start}-${end}/${mp4.length}` } : {}),
      });
      return void res.end(mp4.subarray(start, end + 1));
    }
    res.writeHead(404).end();
  };
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
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

describe('runner: its own reads through the job\'s egress and upstream session', function () {
  this.timeout(60_000);
  let dir: string;
  let site: Site;
  let internal: Site;
  let mp4Bytes: number;
  const upstreams: UpstreamProxy[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runner-own-reads-'));
    const file = join(dir, 'clip.mp4');
    // 20 s, a keyframe every second, index in front: a clip of one second is a small share of it.
    await run('ffmpeg', [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=160x90:rate=25:duration=20',
      '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=20', '-vf', 'noise=alls=12:allf=t',
      '-c:v', 'libx264', '-preset', 'ultrafast', '-b:v', '400k', '-g', '25', '-keyint_min', '25', '-sc_threshold', '0', '-pix_fmt', 'yuv420p',
      '-c:a', 'aac', '-b:a', '64k', '-movflags', '+faststart', file,
    ]);
    const mp4 = readFileSync(file);
    mp4Bytes = mp4.length;
    [site, internal] = await Promise.all([startSite('127.0.0.1', mp4), startSite('127.0.0.2')]);
    upstreams.push(
      await startUpstreamProxy({ id: 'p1', kind: 'http', sourceAddress: '127.0.0.31', auth: { password: PASSWORD, user: /^user-session-/ } }),
      await startUpstreamProxy({ id: 'p2', kind: 'socks5', sourceAddress: '127.0.0.32', auth: { password: PASSWORD, user: /^user-session-/ } }),
    );
  });

  after(async () => {
    await Promise.all([site?.stop(), internal?.stop(), ...upstreams.map((u) => u.stop())]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  afterEach(() => expect(internal.connections, 'connections that reached the internal address').to.equal(0));

  /** Live detection on a bare playlist and a 1 s clip's window of the MP4, under the egress `o`; what the site saw of them. */
  async function ownReads(o: Omit<EgressOptions, 'policy'>): Promise<{ live: boolean; window?: string; seen: Seen[] }> {
    const from = site.seen.length;
    const base = `http://127.0.0.1:${site.port}`;
    return withEgress({ policy: POLICY, ...o }, async () => {
      const info = { format_id: 'hls', formats: [{ format_id: 'hls', protocol: 'm3u8_native', url: `${base}/master.m3u8` }] };
      const live = await isLiveSource(info, { liveRecording: false }, { timeoutMs: 10_000 });
      const format = { format_id: 'mp4', protocol: 'http', ext: 'mp4', vcodec: 'avc1', acodec: 'mp4a', url: `${base}/clip.mp4` };
      const clipDir = mkdtempSync(join(dir, 'window-'));
      const read = await readableInputs({ formats: [format], audioFrom: 'mp4' }, { ffprobe: 'ffprobe', socketTimeoutSeconds: 10 }, undefined, { clip: { start: 10, end: 11 }, dir: clipDir });
      const path = read.inputs?.[0]?.path;
      return { live, ...(path ? { window: path } : {}), seen: site.seen.slice(from) };
    });
  }

  for (const kind of ['http', 'socks5'] as const) {
    it(`with a ${kind} upstream: playlists and the clip's index and bytes reach the site from the session's exit, under its user name, each range closed, the head read once`, async () => {
      const upstream = upstreams.find((u) => u.kind === kind)!;
      const before = upstream.requests;
      const { live, window, seen } = await ownReads({ upstream: upstream.urlWith(SESSION) });
      expect(live).to.equal(true);
      // The clip is read from a local window file, not from the URL (which ffmpeg would open without an end).
      expect(window).to.match(/window-mp4\.mp4$/);
      expect(seen.map((s) => s.path)).to.include.members(['/master.m3u8', '/live/index.m3u8', '/clip.mp4']);
      expect(seen.filter((s) => s.from !== upstream.sourceAddress), 'requests from another exit').to.deep.equal([]);
      expect(upstream.requests - before).to.equal(seen.length);
      expect(new Set(upstream.users.slice(before))).to.deep.equal(new Set([SESSION]));
      const media = seen.filter((s) => s.path === '/clip.mp4');
      expect(media.every((s) => /^bytes=\d+-\d+$/.test(s.range ?? '')), JSON.stringify(media)).to.equal(true);
      expect(media.filter((s) => s.range === 'bytes=0-65535')).to.have.length(1);
      const asked = media.reduce((n, s) => n + 1 + Number(/-(\d+)$/.exec(s.range!)![1]) - Number(/=(\d+)-/.exec(s.range!)![1]), 0);
      expect(asked / mp4Bytes, `${asked} of ${mp4Bytes} bytes`).to.be.below(0.5);
    });
  }

  it('without an upstream: the same reads reach the site from the pod\'s own address, or from the attempt\'s source address when it has one; no upstream is used', async () => {
    const before = upstreams.map((u) => u.requests);
    const plain = await ownReads({});
    expect(plain.live).to.equal(true);
    expect(plain.window).to.match(/window-mp4\.mp4$/);
    expect(new Set(plain.seen.map((s) => s.from))).to.deep.equal(new Set(['127.0.0.1']));
    const bound = await ownReads({ localAddress: '127.0.0.41' });
    expect(bound.live).to.equal(true);
    expect(new Set(bound.seen.map((s) => s.from))).to.deep.equal(new Set(['127.0.0.41']));
    expect(upstreams.map((u) => u.requests)).to.deep.equal(before);
  });

  it('with an https upstream (TLS to the proxy, its CA trusted as an image trusts one: NODE_EXTRA_CA_CERTS): an http and an https read leave from its exit under the session', async () => {
    // One certificate for 127.0.0.1, the proxy's and the https site's.
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    await run('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert,
    ]);
    const pair = { key: readFileSync(key), cert: readFileSync(cert) };
    const secureSite = await startSite('127.0.0.1', undefined, pair);
    const upstream = await startUpstreamProxy({ id: 'p3', sourceAddress: '127.0.0.33', tls: pair, auth: { password: PASSWORD, user: /^user-session-/ } });
    try {
      const urls = [`http://127.0.0.1:${site.port}/live/index.m3u8`, `https://127.0.0.1:${secureSite.port}/master.m3u8`];
      const from = site.seen.length;
      const [node, ...args] = tsxCommand(join(import.meta.dirname, 'own-reads-child.ts'));
      const { stdout } = await run(node!, args, {
        env: { PATH: process.env.PATH, NODE_EXTRA_CA_CERTS: cert, UPSTREAM: upstream.urlWith(SESSION), URLS: JSON.stringify(urls) }, timeout: 30_000,
      });
      const live = '#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n#EXTINF:2,\nseg7.ts\n';
      const master = '#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nlive/index.m3u8\n';
      expect(JSON.parse(stdout)).to.deep.equal([
        { url: urls[0], text: live, status: 200, body: live },
        { url: urls[1], text: master, status: 200, body: master },
      ]);
      const seen = [...site.seen.slice(from), ...secureSite.seen];
      expect(seen).to.have.length(4);
      expect(new Set(seen.map((s) => s.from))).to.deep.equal(new Set([upstream.sourceAddress]));
      expect(upstream.requests).to.equal(4);
      expect(new Set(upstream.users)).to.deep.equal(new Set([SESSION]));
    } finally {
      await Promise.all([secureSite.stop(), upstream.stop()]);
    }
  });

  it('a name that resolves to a refused address is refused before the upstream is asked, as the egress\'s refusal, not as the site\'s answer', async () => {
    const upstream = upstreams.find((u) => u.kind === 'http')!;
    const before = upstream.requests;
    for (const o of [{}, { upstream: upstream.urlWith(SESSION) }]) {
      await withEgress({ policy: POLICY, ...o }, async () => {
        for (const url of [`http://internal.test:${internal.port}/clip.mp4`, `https://internal.test:${internal.port}/clip.mp4`]) {
          const err = await egressFetch(url, { signal: AbortSignal.timeout(10_000) }).then(() => undefined, (e: unknown) => e);
          expect(err, url).to.include({ code: 'ERR_OUTBOUND_REFUSED', category: 'loopback' });
        }
        const info = { format_id: 'hls', formats: [{ format_id: 'hls', protocol: 'm3u8_native', url: `http://internal.test:${internal.port}/master.m3u8` }] };
        expect(await isLiveSource(info, { liveRecording: false }, { timeoutMs: 10_000 })).to.equal(false);
        const failure = await fetchText(`http://internal.test:${internal.port}/master.m3u8`, {}, { timeoutMs: 10_000 })
          .then(() => undefined, (e: unknown) => (e instanceof GetError ? e.failure : e));
        expect(failure).to.deep.equal({ kind: 'refused', category: 'loopback' });
      });
    }
    expect(upstream.requests).to.equal(before);
  });
});
