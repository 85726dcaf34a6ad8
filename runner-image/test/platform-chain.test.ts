// A platform job through its proxy session (issue 37), on real yt-dlp and
// ffmpeg: the pipeline as main.ts runs it for a MediaPlatform, its egress
// chained to a loopback upstream proxy (test/support/upstream-proxies.ts,
// connecting out from 127.0.0.21) and its cookie file handed to yt-dlp. The
// page demands the cookie and answers per exit; the media is served on
// loopback. What a user would notice: the file is delivered, every request
// left through the session's exit with the session's user name, the cookie
// reached the page, a 429 is reported as a rate limit with the platform's
// Retry-After and the proxy's id, and neither the cookie nor the proxy's
// password is in any log line.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import { parseJobRequest } from '@mediajobs/lib/job-options';
import type { NormalisedMediaJobSpec, RunnerReport } from '@mediajobs/lib/mediajob/types';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import { startMediaServer, type MediaServer } from '../../test/support/media.js';
import { startUpstreamProxy, type UpstreamProxy } from '../../test/support/upstream-proxies.js';
import { runJob } from '../src/pipeline.js';
import type { PlatformRun } from '../src/platform.js';
import { StatusReporter, type RunnerStatusPatch } from '../src/report.js';

const COOKIE_VALUE = 'sid-cookie-value-3c9e71d0';
const PASSWORD = 'pool-password-b81f22';
const EXIT = '127.0.0.21';

describe('runner: a platform job through its proxy session (real yt-dlp and ffmpeg)', function () {
  this.timeout(120_000);
  let media: MediaServer;
  let page: Server;
  let pageUrl: string;
  let upstream: UpstreamProxy;
  let dir: string;
  /** What the page saw: the address each request came from, and its Cookie header. */
  const seen: { from: string; cookie: string; url: string }[] = [];
  let limitNext = false;
  let n = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runner-platform-'));
    media = await startMediaServer();
    // A page that demands the account's cookie, as a platform's sign-in wall does, and rate-limits when told to.
    page = createServer((req, res) => {
      seen.push({ from: req.socket.remoteAddress ?? '', cookie: String(req.headers.cookie ?? ''), url: req.url ?? '' });
      if (limitNext) return void res.writeHead(429, { 'retry-after': '77', 'content-type': 'text/plain' }).end('Too Many Requests');
      if (!String(req.headers.cookie ?? '').includes(`SID=${COOKIE_VALUE}`)) return void res.writeHead(403, { 'content-type': 'text/plain' }).end('sign in');
      const ld = { '@context': 'https://schema.org', '@type': 'VideoObject', name: 'Behind a session', contentUrl: media.mp4Url, duration: 'PT3S' };
      res.writeHead(200, { 'content-type': 'text/html' })
        .end(`<!DOCTYPE html><html><head><title>Behind a session</title><script type="application/ld+json">${JSON.stringify(ld)}</script></head><body></body></html>`);
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
    pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/watch/v1`;
    upstream = await startUpstreamProxy({ id: 'p1', kind: 'http', sourceAddress: EXIT, auth: { password: PASSWORD, user: /^user-session-/ } });
  });

  after(async () => {
    await Promise.all([media?.stop(), upstream?.stop(), new Promise((r) => page?.close(r))]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function job(): Promise<{ report: RunnerReport; log: string; patches: RunnerStatusPatch[]; store: string }> {
    const id = ++n;
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) });
    const creds = mkdtempSync(join(dir, 'creds-'));
    const cookieFile = join(creds, 'cookies.txt');
    writeFileSync(cookieFile, `# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t2000000000\tSID\t${COOKIE_VALUE}\n`, { mode: 0o444 });
    const session = upstream.urlWith(`user-session-0a1b2c3d4e5f-${id}`);
    const platform: PlatformRun = { name: 'video-platform', proxyPool: 'residential', proxyId: 'p1', cookieId: 'account-a', ytdlpArgs: ['--sleep-requests', '0'], upstream: session, cookieFile };
    const store = join(dir, `store-${id}`);
    const patches: RunnerStatusPatch[] = [];
    const parsed = parseJobRequest({ url: pageUrl });
    if (!parsed.ok) throw new Error(parsed.error);
    const spec: NormalisedMediaJobSpec = { ...parsed.request.options, owner: { apiKeyId: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f' }, destination: { type: 'managed' } };
    const report = await runJob({
      spec, jobId: `00000000-aaaa-4bbb-8ccc-${String(id).padStart(12, '0')}`, workDir: mkdtempSync(join(dir, 'work-')), logger,
      reporter: new StatusReporter({ namespace: 'default', name: 'platform', logger, sink: { patch: async (p) => void patches.push(p) } }),
      tools: {
        ytdlp: 'yt-dlp', ffmpeg: 'ffmpeg', ffprobe: 'ffprobe', socketTimeoutSeconds: 10, platform,
        egress: { policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }), upstream: session },
      },
      destination: { provider: new LocalStorageProvider({ dir: store, publicBaseUrl: 'http://127.0.0.1:8080', secret: 'platform-chain-test-secret-0123456789' }), baseFolder: 'videos' },
    });
    return { report, log: lines.join(''), patches, store };
  }

  it('delivers the file, every request through the session\'s exit and user name, the cookie at the page; no secret in the log', async () => {
    seen.length = 0;
    const before = upstream.requests;
    const { report, log, patches, store } = await job();
    expect(report.outcome, log.split('\n').filter((l) => /"level":(40|50)/.test(l)).join('\n').slice(-3000)).to.equal('completed');
    expect(readdirSync(store, { recursive: true }).map(String).some((f) => f.endsWith('.mp4'))).to.equal(true);
    expect(seen.length).to.be.greaterThan(0);
    expect(seen.every((s) => s.from === EXIT)).to.equal(true);
    expect(seen.every((s) => s.cookie.includes(`SID=${COOKIE_VALUE}`))).to.equal(true);
    expect(upstream.requests - before).to.be.at.least(2); // the page, and the media
    expect(new Set(upstream.users.slice(before))).to.deep.equal(new Set([`user-session-0a1b2c3d4e5f-${n}`]));
    expect(report.defence).to.equal(undefined);
    // The tools of the attempt, reported as soon as known and in the final report.
    expect(report.tools?.ytdlp).to.match(/^\d{4}\.\d{2}\.\d{2}/);
    expect(report.tools?.ffmpeg).to.be.a('string');
    expect(patches.some((p) => p.tools?.ytdlp === report.tools?.ytdlp)).to.equal(true);
    for (const secret of [COOKIE_VALUE, PASSWORD]) expect(log).not.to.include(secret);
    expect(JSON.stringify(patches)).not.to.include(COOKIE_VALUE).and.not.to.include(PASSWORD);
  });

  it('a 429 from the platform: rate_limited, with its Retry-After and the proxy\'s and cookie\'s ids, nothing else of them', async () => {
    limitNext = true;
    try {
      const { report, log } = await job();
      expect(report.outcome).to.equal('failed');
      expect(report.category).to.equal('rate_limited');
      expect(report.defence).to.deep.equal({ kind: 'rate_limited', retryAfterSeconds: 77, proxyId: 'p1', cookieId: 'account-a' });
      for (const secret of [COOKIE_VALUE, PASSWORD]) expect(log).not.to.include(secret);
    } finally {
      limitNext = false;
    }
  });
});
