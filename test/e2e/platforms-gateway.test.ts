// The gateway's own lookups through the MediaPlatforms (issue 37 item 5,
// docs/adr/0027 "The gateway's lookups"): POST /metadata and POST /is-short
// of a platform's URL leave through a session of its ProxyPool (loopback
// upstream proxies, test/support/upstream-proxies.ts, each connecting out
// from its own 127.0.0.N) with its cookies, against a platform that
// defends itself (test/support/platform-sim.ts). The service runs with an
// outbound policy that allows 127.0.0.1 only, and lists the platforms every
// second. The last case scans what the run produced for the cookies and
// the proxies' credentials.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { eventually } from '../../local-cluster/test/support.js';
import { startMediaServer, type MediaServer } from '../support/media.js';
import { DIRECT, startPlatformSim, type PlatformSim } from '../support/platform-sim.js';
import { assertNoLeaks, cookieFileSecrets, proxyUrlSecrets, type RunSecret } from '../support/secret-scan.js';
import { startUpstreamProxies, type UpstreamProxy } from '../support/upstream-proxies.js';
import { startService, type Service } from './support.js';

const SECRETS_NS = 'mediajobs';
/** What the pools' usernameTemplate makes of a gateway run's session: `<12 hex of the lookup>-<run>`. */
const SESSION_USER = /^gw-([0-9a-f]{12})-(\d+)$/;
/** The platform URL /is-short is asked about, read from the simulator (MEDIA_INFO_URL_MAP). */
const SHORT_URL = 'https://www.youtube.com/watch?v=gwPlatform1';

describe('end to end: the gateway\'s lookups through platforms and proxy pools', function () {
  this.timeout(300_000);
  let svc: Service;
  let media: MediaServer;
  let cookieSim: PlatformSim;
  let shortSim: PlatformSim;
  let scratch: string;
  const lines: string[] = [];
  const answers: unknown[] = [];
  const secrets: RunSecret[] = [];
  const stops: (() => Promise<void>)[] = [];

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'mj-platforms-gw-'));
    media = await startMediaServer();
    cookieSim = await startPlatformSim({ requireCookie: true });
    // A vertical video: og:video names an HLS ladder, whose variants carry their dimensions.
    shortSim = await startPlatformSim({ videos: [{ id: 'tall', title: 'A tall one', mediaUrl: media.ladders.vertical.hls }] });
    svc = await startService({
      env: {
        OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32,::1/128', PLATFORMS_REFRESH_SECONDS: '1',
        MEDIA_INFO_URL_MAP: JSON.stringify({ [SHORT_URL]: shortSim.pageUrl('tall') }),
      },
      logLevel: 'debug',
      logDestination: { write: (line: string) => void lines.push(line) },
    });
    await svc.cluster.kubectl(['create', 'namespace', SECRETS_NS]);
  });

  after(async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await svc?.stop();
    await Promise.all([cookieSim?.stop(), shortSim?.stop(), media?.stop()]);
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  const apply = async (obj: unknown) => {
    const file = join(scratch, `${randomBytes(6).toString('hex')}.json`);
    writeFileSync(file, JSON.stringify(obj));
    await svc.cluster.kubectl(['apply', '-f', file]);
  };
  const secret = (name: string, data: Record<string, string>) => apply({
    apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: SECRETS_NS }, type: 'Opaque',
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  });
  /** `n` http proxies needing a password, their URLs (credentials included) in a Secret, as a pool with a session per run. */
  const pool = async (name: string, n: number, first: number): Promise<UpstreamProxy[]> => {
    const password = randomBytes(12).toString('hex');
    const ps = await startUpstreamProxies(n, { firstHost: first, auth: { password, user: SESSION_USER } });
    stops.push(async () => void (await Promise.all(ps.map((p) => p.stop()))));
    for (const p of ps) secrets.push(...proxyUrlSecrets(`proxy ${name}/${p.id}`, p.urlWith('user')));
    await secret(`${name}-proxies`, Object.fromEntries(ps.map((p) => [p.id, p.urlWith('user')])));
    await apply({
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'ProxyPool', metadata: { name },
      spec: {
        proxies: ps.map((p) => ({ id: p.id, urlSecretRef: { namespace: SECRETS_NS, name: `${name}-proxies`, key: p.id } })),
        session: { usernameTemplate: 'gw-{session}' },
      },
    });
    return ps;
  };
  const platform = (name: string, hosts: string[], spec: Record<string, unknown>) =>
    apply({ apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name }, spec: { match: { hosts }, ...spec } });
  const lookup = async (path: string, url: string) => {
    const r = await svc.api('POST', path, { url });
    answers.push(r.body);
    return r;
  };
  let sentinels = 0;
  /**
   * Until the gateway's next list of the platforms: a disabled platform of
   * its own host applied now, asked about until the 422, so every platform
   * applied before it is in the gateway's copy. Its host is a port the
   * egress refuses (1-1023 but 80 and 443): a lookup of it before the 422
   * connects nowhere.
   */
  const listed = async () => {
    const name = `gw-sentinel-${++sentinels}`;
    const host = `127.0.0.1:${100 + sentinels}`;
    await platform(name, [host], { disabled: true });
    await eventually(async () => (await svc.api('POST', '/metadata', { url: `http://${host}/` })).status === 422, 30_000, 200);
  };
  const through = (ps: UpstreamProxy[]) => ps.reduce((n, p) => n + p.requests, 0);
  const cookieDirs = () => readdirSync(tmpdir()).filter((f) => f.startsWith('mediajobs-cookies-'));

  it('/metadata of a page that needs a cookie: through the pool, and it succeeds only with the platform\'s cookie', async () => {
    const cookie = cookieSim.issueCookie();
    secrets.push(...cookieFileSecrets('cookie file', cookie.file));
    const ps = await pool('gw-cookies', 2, 70);
    // Without cookies the platform demands a sign-in: the lookup fails, though it went through the pool.
    await platform('gw-cookies', [cookieSim.host], { proxyPool: 'gw-cookies' });
    await listed();
    const refused = await lookup('/metadata', cookieSim.pageUrl('v1'));
    expect(through(ps), 'the lookup went through the pool').to.be.greaterThan(0);
    expect(refused.status, JSON.stringify(refused.body)).to.not.equal(200);
    expect(cookieSim.requests.filter((r) => r.kind === 'page').map((r) => r.status)).to.include(401);

    await secret('gw-cookies', { main: cookie.file });
    await platform('gw-cookies', [cookieSim.host], { proxyPool: 'gw-cookies', cookies: { secretRef: { namespace: SECRETS_NS, name: 'gw-cookies' } } });
    await listed();
    const ok = await lookup('/metadata', cookieSim.pageUrl('v1'));
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    expect(ok.body.title).to.equal('Simulated video one');

    const served = cookieSim.requests.filter((r) => r.kind === 'page' && r.status === 200);
    expect(served.length).to.be.at.least(1);
    expect(served.every((r) => r.cookie === cookie.value), 'the page was served for the platform\'s cookie').to.equal(true);
    expect(cookieSim.stats(DIRECT).requests, 'nothing reached the platform but through the pool').to.equal(0);
    expect(served.every((r) => ps.some((p) => p.sourceAddress === r.identity))).to.equal(true);
    for (const p of ps) expect(p.users.every((u) => SESSION_USER.test(u)), `${p.id}: ${p.users.join(',')}`).to.equal(true);
    expect(through(ps), 'the proxies counted the gateway\'s requests').to.be.at.least(cookieSim.requests.length);
    expect(cookieDirs(), 'each run\'s private cookie copy is removed when it ends').to.deep.equal([]);
  });

  it('/is-short: the light run meets a flagged exit\'s bot check, the full run leaves by another proxy with a new session', async () => {
    const ps = await pool('gw-short', 2, 80);
    const [p1, p2] = ps as [UpstreamProxy, UpstreamProxy];
    shortSim.flag(p1.sourceAddress, 'bot_check');
    await platform('gw-short', ['www.youtube.com'], { proxyPool: 'gw-short' });
    await listed();
    const r = await lookup('/is-short', SHORT_URL);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body).to.include({ is_short: true, video_type: 'short' });

    const pages = (p: UpstreamProxy) => shortSim.requests.filter((q) => q.kind === 'page' && q.identity === p.sourceAddress).map((q) => q.status);
    expect(pages(p1), 'the flagged exit drew the bot check').to.deep.equal([403]);
    expect(pages(p2), 'the full run read the page through the other proxy').to.deep.equal([200]);
    // One session each, of one lookup (the same 12 hex), its runs counted up: a new session, not the same one again.
    const [s1] = new Set(p1.users);
    const [s2] = new Set(p2.users);
    expect(new Set(p1.users).size).to.equal(1);
    expect(new Set(p2.users).size).to.equal(1);
    expect(SESSION_USER.exec(s1!)?.slice(1)).to.deep.equal([SESSION_USER.exec(s2!)?.[1], '1']);
    expect(SESSION_USER.exec(s2!)?.[2]).to.equal('2');
    expect(shortSim.stats(DIRECT).requests, 'nothing reached the platform but through the pool').to.equal(0);
    // The manifest the page points at was read through the full run's proxy too.
    expect(p2.targets.filter((t) => t === new URL(media.baseUrl).host).length).to.be.at.least(1);
  });

  it('a disabled platform\'s lookups get the 422 POST /jobs gives', async () => {
    const before = cookieSim.requests.length + shortSim.requests.length;
    // A platform matching only the short-link host: is-short reads the canonical www.youtube.com URL
    // (gw-short's, enabled still), yet the platform is decided by the URL the client gave, as a job's is.
    await platform('gw-shortlink', ['youtu.be'], { disabled: true });
    await listed();
    const link = await lookup('/is-short', 'https://youtu.be/gwPlatform1');
    expect([link.status, link.body]).to.deep.equal([422, { error: 'Downloads from this platform are disabled' }]);
    expect((await svc.api('POST', '/jobs', { url: 'https://youtu.be/gwPlatform1' })).status, 'POST /jobs of it').to.equal(422);
    expect(cookieSim.requests.length + shortSim.requests.length, 'nothing was fetched').to.equal(before);
    await platform('gw-short', ['www.youtube.com'], { disabled: true });
    await platform('gw-cookies', [cookieSim.host], { disabled: true });
    await listed();
    const r = await lookup('/is-short', SHORT_URL);
    expect(r.status).to.equal(422);
    expect(r.body).to.deep.equal({ error: 'Downloads from this platform are disabled' });
    const m = await lookup('/metadata', cookieSim.pageUrl('v2'));
    expect(m.status).to.equal(422);
    expect(cookieSim.requests.length + shortSim.requests.length, 'nothing was fetched').to.equal(before);
    expect(m.body).to.deep.equal({ error: 'Downloads from this platform are disabled' });
    const job = await svc.api('POST', '/jobs', { url: cookieSim.pageUrl('v2') });
    expect(job.status).to.equal(422);
    expect(job.body).to.deep.equal(m.body);
  });

  it('no cookie or proxy credential appears in the gateway\'s log or its answers', () => {
    expect(secrets.length, 'the cases above ran').to.be.at.least(5);
    expect(lines.join('')).to.match(/"platform":"gw-short"/);
    assertNoLeaks(secrets, [
      { source: 'gateway (debug)', text: lines.join('') },
      { source: 'answers', text: JSON.stringify(answers) },
    ]);
  });
});
