// The platform simulator and the loopback upstream proxies, each behaviour
// as the real yt-dlp sees it: directly and through an upstream proxy
// (`--proxy`, http and socks5), whose own loopback address is the exit the
// platform answers. yt-dlp's messages are read with lib's table
// (ytdlp-messages.ts), as the runner reads them.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ytDlpReason } from '@mediajobs/lib/media-info/ytdlp-messages';
import { classifyYtDlp, defenceOf } from '../runner-image/src/classify.js';
import { MEDIA, generateMedia } from './support/media.js';
import { ANSWERS, COOKIE_NAME, DIRECT, startPlatformSim, type PlatformSim } from './support/platform-sim.js';
import { startUpstreamProxies, startUpstreamProxy, type UpstreamProxy } from './support/upstream-proxies.js';

const run = promisify(execFile);

interface YtDlpRun {
  code: number;
  stdout: string;
  stderr: string;
}

async function ytdlp(args: string[], cwd?: string): Promise<YtDlpRun> {
  try {
    const { stdout, stderr } = await run('yt-dlp', ['--no-cache-dir', '--ignore-config', '--socket-timeout', '20', ...args], { cwd, maxBuffer: 16 << 20 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

async function probe(url: string, ...args: string[]): Promise<Record<string, unknown>> {
  const r = await ytdlp(['-J', ...args, url]);
  expect(r.code, r.stderr).to.equal(0);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

/** yt-dlp's ERROR line, the one the runner classifies. */
function errorLine(r: YtDlpRun): string {
  return r.stderr.split('\n').find((l) => l.startsWith('ERROR:')) ?? `(no ERROR line; exit ${r.code}) ${r.stderr}`;
}

describe('platform simulator, as yt-dlp sees it', function () {
  this.timeout(120_000);
  let sim: PlatformSim;
  let proxies: UpstreamProxy[];
  let socks: UpstreamProxy;
  let mp4: Buffer;
  let dir: string;

  before(async () => {
    mp4 = readFileSync(join(await generateMedia(), MEDIA.mp4.path));
    proxies = await startUpstreamProxies(2, { auth: { password: 'proxy-password-1', user: /^user-session-[\w-]+$/ } });
    socks = await startUpstreamProxy({ id: 's1', kind: 'socks5', sourceAddress: '127.0.0.20', auth: { password: 'socks-password-1' } });
  });
  after(async () => {
    await Promise.all([...proxies, socks].map((p) => p.stop()));
  });
  beforeEach(async () => {
    sim = await startPlatformSim();
    dir = mkdtempSync(join(tmpdir(), 'mj-platform-sim-'));
  });
  afterEach(async () => {
    await sim.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const p1 = () => proxies[0]!;
  const p2 = () => proxies[1]!;

  it('serves watch pages the generic extractor reads with a stable id and title, and the media downloads whole', async () => {
    const info = await probe(sim.pageUrl('v2'));
    expect(info).to.include({ id: 'v2', title: 'Simulated video two', extractor: 'generic', ext: 'mp4' });
    const again = await probe(sim.pageUrl('v2'));
    expect(again).to.include({ id: 'v2', title: 'Simulated video two' });
    expect(again.url, 'each view signs its own media URL').to.not.equal(info.url);

    const r = await ytdlp(['-o', '%(id)s.%(ext)s', sim.pageUrl('v2')], dir);
    expect(r.code, r.stderr).to.equal(0);
    expect(readFileSync(join(dir, 'v2.mp4')).equals(mp4)).to.equal(true);
    expect(sim.identities()).to.deep.equal([DIRECT]);
    const direct = sim.stats(DIRECT);
    expect(direct).to.include({ pages: 3, active: 0, maxActive: 1 });
    expect(direct.bytes).to.be.greaterThan(mp4.length);
  });

  it('tells exits apart by source address: each upstream proxy (http and socks5) is its own identity, and counts what passes', async () => {
    const viaP1 = await ytdlp(['--proxy', p1().urlWith('user-session-abc'), '-o', 'p1.%(ext)s', sim.pageUrl('v1')], dir);
    expect(viaP1.code, viaP1.stderr).to.equal(0);
    const viaSocks = await ytdlp(['--proxy', socks.urlWith('socks-user'), '-o', 's1.%(ext)s', sim.pageUrl('v1')], dir);
    expect(viaSocks.code, viaSocks.stderr).to.equal(0);
    expect(readFileSync(join(dir, 'p1.mp4')).equals(mp4)).to.equal(true);
    expect(readFileSync(join(dir, 's1.mp4')).equals(mp4)).to.equal(true);

    expect(sim.identities()).to.deep.equal([p1().sourceAddress, socks.sourceAddress]);
    expect(sim.stats(p1().sourceAddress)).to.include({ pages: 1, media: 1 });
    expect(sim.stats(DIRECT).requests, 'nothing came directly').to.equal(0);
    for (const p of [p1(), socks]) {
      expect(p.requests, p.id).to.be.at.least(2);
      expect(p.bytesDown, p.id).to.be.greaterThan(mp4.length);
      expect(p.active, p.id).to.equal(0);
      expect(p.targets.every((t) => t === sim.host), p.id).to.equal(true);
    }
    expect(p1().users.every((u) => u === 'user-session-abc')).to.equal(true);
    expect(p2().requests).to.equal(0);
  });

  it('refuses a wrong proxy password (http: 407; socks5: RFC 1929 failure) and counts it', async () => {
    const bad = p1().urlWith('user-session-abc').replace('proxy-password-1', 'wrong');
    const r = await ytdlp(['-J', '--proxy', bad, sim.pageUrl('v1')]);
    expect(errorLine(r)).to.match(/407/);
    const s = await ytdlp(['-J', '--proxy', socks.urlWith('socks-user').replace('socks-password-1', 'wrong'), sim.pageUrl('v1')]);
    expect(s.code).to.not.equal(0);
    expect(p1().authFailures).to.be.at.least(1);
    expect(socks.authFailures).to.be.at.least(1);
    expect(sim.stats(p1().sourceAddress).requests).to.equal(0);
  });

  it('rate-limits an exit\'s page views with 429 and Retry-After, another exit unaffected', async () => {
    sim.rateLimit(p1().sourceAddress, { pages: 1, windowSeconds: 600, retryAfterSeconds: 30 });
    await probe(sim.pageUrl('v1'), '--proxy', p1().urlWith('user-session-a'));
    const limited = await ytdlp(['-J', '--proxy', p1().urlWith('user-session-a'), sim.pageUrl('v1')]);
    expect(errorLine(limited)).to.contain('HTTP Error 429: Too Many Requests');
    expect(ytDlpReason(errorLine(limited))).to.equal('rate_limited');
    await probe(sim.pageUrl('v1'), '--proxy', p2().urlWith('user-session-b'));
    expect(sim.stats(p1().sourceAddress).statuses).to.deep.equal({ 200: 1, 429: 1 });

    // What an egress proxy reading the forward answer sees: the header, or none.
    expect((await viaProxy(p1(), sim.pageUrl('v1'))).headers['retry-after']).to.equal('30');
    sim.rateLimit(p1().sourceAddress, { pages: 0, windowSeconds: 600 });
    const bare = await viaProxy(p1(), sim.pageUrl('v1'));
    expect(bare.status).to.equal(429);
    expect(bare.headers).to.not.have.property('retry-after');
  });

  it('answers a flagged exit with the bot check, the captcha or a ban, in words lib\'s table reads', async () => {
    sim.flag(p1().sourceAddress, 'bot_check');
    const bot = await ytdlp(['-J', '--proxy', p1().urlWith('user-session-a'), sim.pageUrl('v1')]);
    expect(errorLine(bot)).to.contain('HTTP Error 403: Sign in to confirm you\'re not a bot');
    expect(ytDlpReason(errorLine(bot))).to.equal('bot_detection');
    await probe(sim.pageUrl('v1'), '--proxy', p2().urlWith('user-session-b'));

    sim.flag(p1().sourceAddress, 'captcha');
    const captcha = await ytdlp(['-J', '--proxy', p1().urlWith('user-session-a'), sim.pageUrl('v1')]);
    expect(errorLine(captcha)).to.contain(`HTTP Error 429: ${ANSWERS.captcha.reason}`);
    expect(ytDlpReason(errorLine(captcha))).to.equal('bot_detection');

    // A ban refuses the media of a URL the exit was given before it, too.
    sim.unflag(p1().sourceAddress);
    const info = join(dir, 'v1.info.json');
    writeFileSync(info, JSON.stringify(await probe(sim.pageUrl('v1'), '--proxy', p1().urlWith('user-session-a'))));
    sim.flag(p1().sourceAddress, 'ban');
    const page = await ytdlp(['-J', '--proxy', p1().urlWith('user-session-a'), sim.pageUrl('v1')]);
    expect(errorLine(page)).to.contain('HTTP Error 403: Forbidden');
    const media = await ytdlp(['--load-info-json', info, '--proxy', p1().urlWith('user-session-a'), '-o', 'banned.%(ext)s'], dir);
    expect(errorLine(media)).to.match(/unable to download video data: HTTP Error 403: Forbidden/);
    expect(readdirSync(dir).filter((f) => f.startsWith('banned'))).to.deep.equal([]);
  });

  it('needs a cookie it issued: none, a file past its expiry, or a revoked session draw the sign-in answer', async () => {
    sim.requireCookie(true);
    const none = await ytdlp(['-J', sim.pageUrl('v1')]);
    expect(errorLine(none)).to.contain(`HTTP Error 401: ${ANSWERS.sign_in.reason}`);

    const good = sim.issueCookie();
    writeFileSync(join(dir, 'good.txt'), good.file);
    expect(await probe(sim.pageUrl('v1'), '--cookies', join(dir, 'good.txt'))).to.include({ id: 'v1' });
    expect(sim.cookieViews(good.value)).to.equal(1);
    expect(sim.requests.find((r) => r.kind === 'page' && r.status === 200)?.cookie).to.equal(good.value);

    // yt-dlp drops a cookie its file says has expired, so the platform never sees it.
    const stale = sim.issueCookie({ expiresInSeconds: -60 });
    writeFileSync(join(dir, 'stale.txt'), stale.file);
    const expired = await ytdlp(['-J', '--cookies', join(dir, 'stale.txt'), sim.pageUrl('v1')]);
    expect(errorLine(expired)).to.contain('HTTP Error 401');
    expect(sim.requests.at(-1)).to.not.have.property('cookie');

    sim.revokeCookie(good.value);
    const revoked = await ytdlp(['-J', '--cookies', join(dir, 'good.txt'), sim.pageUrl('v1')]);
    expect(errorLine(revoked)).to.contain('HTTP Error 401');
    expect(sim.requests.at(-1)?.cookie).to.equal(good.value);
    expect(sim.cookieViews(good.value)).to.equal(1);
    expect(good.file).to.contain(`\t${COOKIE_NAME}\t${good.value}`);
  });

  it('signs media URLs for the exit that viewed the page: an expired URL or another exit gets 403, a new view works', async () => {
    const info = join(dir, 'v3.info.json');
    writeFileSync(info, JSON.stringify(await probe(sim.pageUrl('v3'), '--proxy', p1().urlWith('user-session-a'))));
    const elsewhere = await ytdlp(['--load-info-json', info, '--proxy', p2().urlWith('user-session-b'), '-o', 'x.%(ext)s'], dir);
    expect(errorLine(elsewhere)).to.match(/HTTP Error 403: Forbidden/);

    sim.expireIssuedUrls();
    const expired = await ytdlp(['--load-info-json', info, '--proxy', p1().urlWith('user-session-a'), '-o', 'x.%(ext)s'], dir);
    expect(errorLine(expired)).to.match(/HTTP Error 403: Forbidden/);

    const fresh = await ytdlp(['--proxy', p1().urlWith('user-session-a'), '-o', 'v3.%(ext)s', sim.pageUrl('v3')], dir);
    expect(fresh.code, fresh.stderr).to.equal(0);
    expect(readFileSync(join(dir, 'v3.mp4')).equals(mp4)).to.equal(true);
  });

  it('serves Range: a chunked download reads the file in ranges and gets it whole', async () => {
    const r = await ytdlp(['--http-chunk-size', '40K', '-o', 'chunked.%(ext)s', sim.pageUrl('v1')], dir);
    expect(r.code, r.stderr).to.equal(0);
    expect(readFileSync(join(dir, 'chunked.mp4')).equals(mp4)).to.equal(true);
    const ranges = sim.requests.filter((q) => q.kind === 'media').map((q) => [q.range, q.status]);
    expect(ranges.length).to.be.at.least(Math.ceil(mp4.length / (40 * 1024)));
    expect(ranges.every(([range, status]) => /^bytes=\d+-\d+$/.test(String(range)) && status === 206), JSON.stringify(ranges)).to.equal(true);
  });

  it('counts concurrent downloads overall and per exit, and the most seen at once', async () => {
    await sim.stop();
    // Paced so three downloads overlap however loaded the machine is: each lasts seconds.
    sim = await startPlatformSim({ bytesPerSecond: Math.ceil(mp4.length / 3) });
    const runs = [
      ytdlp(['--proxy', p1().urlWith('user-session-a'), '-o', 'a.%(ext)s', sim.pageUrl('v1')], dir),
      ytdlp(['--proxy', p1().urlWith('user-session-b'), '-o', 'b.%(ext)s', sim.pageUrl('v2')], dir),
      ytdlp(['--proxy', p2().urlWith('user-session-c'), '-o', 'c.%(ext)s', sim.pageUrl('v3')], dir),
    ];
    for (const r of await Promise.all(runs)) expect(r.code, r.stderr).to.equal(0);
    expect(sim.maxActiveDownloads).to.equal(3);
    expect(sim.activeDownloads).to.equal(0);
    expect(sim.stats(p1().sourceAddress)).to.include({ maxActive: 2, active: 0 });
    expect(sim.stats(p2().sourceAddress)).to.include({ maxActive: 1, active: 0 });
    expect(p1().maxActive).to.be.at.least(2);
  });

  it('each answer reads as its defence in the runner\'s table (classify.ts), from what yt-dlp prints', async () => {
    const kindOf = (r: YtDlpRun, afterProbe = false, mediaUrls: string[] = []) => {
      const c = classifyYtDlp(r.stderr, r.code);
      return { category: c.category, kind: defenceOf(c, { stderr: r.stderr, afterProbe, answers: [], mediaUrls, now: Date.now() })?.kind };
    };
    const page = () => ytdlp(['-J', sim.pageUrl('v1')]);
    const seen: Record<string, unknown> = {};
    for (const flag of ['bot_check', 'captcha', 'ban'] as const) {
      sim.flag(DIRECT, flag);
      seen[flag] = kindOf(await page());
    }
    sim.unflag(DIRECT);
    sim.rateLimit(DIRECT, { pages: 0, windowSeconds: 60, retryAfterSeconds: 5 });
    seen.rate_limited = kindOf(await page());
    sim.rateLimit(DIRECT, undefined);
    sim.requireCookie(true);
    seen.sign_in = kindOf(await page());
    sim.requireCookie(false);

    // The media: a stale page's URL (expire passed) and a revoked one (expire ahead), each after a good probe.
    const download = async () => {
      const info = await probe(sim.pageUrl('v2'));
      writeFileSync(join(dir, 'info.json'), JSON.stringify(info));
      return { run: await ytdlp(['--load-info-json', join(dir, 'info.json'), '-o', 'x.%(ext)s'], dir), url: String(info.url) };
    };
    sim.staleViews(1);
    const stale = await download();
    seen.expired_url = kindOf(stale.run, true, [stale.url]);
    const revoked = await (async () => {
      const info = await probe(sim.pageUrl('v3'));
      writeFileSync(join(dir, 'info.json'), JSON.stringify(info));
      sim.expireIssuedUrls();
      return { run: await ytdlp(['--load-info-json', join(dir, 'info.json'), '-o', 'y.%(ext)s'], dir), url: String(info.url) };
    })();
    seen.revoked = kindOf(revoked.run, true, [revoked.url]);

    expect(seen).to.deep.equal({
      bot_check: { category: 'bot_detection', kind: 'bot_check' },
      captcha: { category: 'bot_detection', kind: 'captcha' },
      ban: { category: 'connection_error', kind: 'forbidden' },
      rate_limited: { category: 'rate_limited', kind: 'rate_limited' },
      sign_in: { category: 'connection_error', kind: 'sign_in' },
      expired_url: { category: 'connection_error', kind: 'expired_url' },
      revoked: { category: 'connection_error', kind: 'forbidden' },
    });
    // A stale view costs one page: the next one is signed afresh and downloads.
    const fresh = await ytdlp(['-o', 'fresh.%(ext)s', sim.pageUrl('v2')], dir);
    expect(fresh.code, fresh.stderr).to.equal(0);
  });

  it('opens CONNECT tunnels from the proxy\'s own address', async () => {
    const tunnel = await new Promise<import('node:net').Socket>((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1', port: Number(p2().address.split(':')[1]), method: 'CONNECT', path: sim.host,
        headers: { 'proxy-authorization': `Basic ${Buffer.from('user-session-t:proxy-password-1').toString('base64')}` },
      });
      req.once('connect', (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error(`CONNECT ${res.statusCode}`))));
      req.once('error', reject);
      req.end();
    });
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get({ createConnection: () => tunnel, path: '/watch/v1', headers: { host: sim.host } }, resolve).once('error', reject);
    });
    res.resume();
    expect(res.statusCode).to.equal(200);
    expect(sim.identities()).to.deep.equal([p2().sourceAddress]);
    expect(p2().targets.at(-1)).to.equal(sim.host);
    expect(p2().users.at(-1)).to.equal('user-session-t');
  });
});

/** A forward request through an http upstream proxy, as an egress proxy sends one. */
function viaProxy(proxy: UpstreamProxy, url: string): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  const [host, port] = proxy.address.split(':');
  return new Promise((resolve, reject) => {
    http.get({
      host, port: Number(port), path: url,
      headers: { 'proxy-authorization': `Basic ${Buffer.from('user-session-v:proxy-password-1').toString('base64')}` },
    }, (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
    }).once('error', reject);
  });
}
