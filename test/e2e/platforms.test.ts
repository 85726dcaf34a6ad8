// Platforms and proxy pools end to end (issue 37, docs/adr/0027): jobs
// posted to the gateway for a loopback platform that defends itself
// (test/support/platform-sim.ts), run by the real operator and runner on
// the local cluster through loopback upstream proxies
// (test/support/upstream-proxies.ts), each connecting out from its own
// 127.0.0.N so the platform tells them apart. Every case sets up its own
// platform, pool and simulator (its own host), so the cases do not share
// limits, cool-downs or a breaker.
//
// The service runs with an outbound policy that allows 127.0.0.1 only:
// 127.0.0.2 stands for an internal address a page may point at. The
// platform backoff (RETRY_PLATFORM_BACKOFF_SECONDS) is ten minutes, so a
// job that completes here after a bot check was retried at once on another
// proxy session, as the design answers a defence, not after the backoff.
// The last case scans everything the run produced for the proxies'
// passwords and the cookies; it runs after the others in the file.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { newRegistry } from '@mediajobs/lib/metrics';
import { eventually } from '../../local-cluster/test/support.js';
import { MEDIA, generateMedia } from '../support/media.js';
import { scrape } from '../support/metrics.js';
import { DIRECT, startPlatformSim, type PlatformSim } from '../support/platform-sim.js';
import { assertNoLeaks, cookieFileSecrets, proxyUrlSecrets, type LogText, type RunSecret } from '../support/secret-scan.js';
import { startUpstreamProxies, type UpstreamProxy } from '../support/upstream-proxies.js';
import { runnerLogs, startReceiver, startService, type Receiver, type Service } from './support.js';

/** Where the admin keeps the pools' and platforms' Secrets. */
const SECRETS_NS = 'mediajobs';
/** The session a pool's usernameTemplate gives each attempt: `<12 hex of sha256(job id)>-<attempt>`. */
const SESSION_USER = /^user-session-[0-9a-f]{12}-\d+$/;
const ENDED = ['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled'];

interface Obj {
  metadata: { name: string; namespace?: string; generation?: number };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & {
    proxies?: { id: string; state: string; successes: number; defences: number; lastDefenceKind?: string; coolingUntil?: string }[];
    cookies?: { id: string; healthy: boolean; lastFailure?: string }[];
    breaker?: string;
    running?: number;
    observedGeneration?: number;
    attempts?: { attempt: number; outcome: string; category?: string; retryAfterSeconds?: number; defence?: { kind: string; proxyId?: string; cookieId?: string } }[];
  };
}

interface KubeEvent {
  involvedObject: { kind: string; name: string };
  reason: string;
  message: string;
  type: string;
  firstTimestamp?: string;
  eventTime?: string;
  lastTimestamp?: string;
}

describe('end to end: platforms and proxy pools', function () {
  this.timeout(600_000);
  let svc: Service;
  let receiver: Receiver;
  let scratch: string;
  let mp4: Buffer;
  const lines: string[] = [];
  const secrets: RunSecret[] = [];
  const jobIds: string[] = [];
  const stops: (() => Promise<void>)[] = [];

  before(async () => {
    mp4 = readFileSync(join(await generateMedia(), MEDIA.mp4.path));
    receiver = await startReceiver();
    scratch = mkdtempSync(join(tmpdir(), 'mj-platforms-'));
    svc = await startService({
      env: { OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32,::1/128', RETRY_PLATFORM_BACKOFF_SECONDS: '600' },
      operatorEnv: { METRICS_PORT: '0', METRICS_HOST: '127.0.0.1' },
      metricsRegistry: newRegistry(),
      logDestination: { write: (line: string) => void lines.push(line) },
    });
    secrets.push({ kind: 'API key', value: svc.apiKey });
    await svc.cluster.kubectl(['create', 'namespace', SECRETS_NS]);
  });

  after(async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await svc?.stop();
    await receiver?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  // ---- helpers -------------------------------------------------------------

  const kubectl = async (args: string[]) => {
    const r = await svc.cluster.kubectl(args);
    return r.stdout;
  };
  const apply = async (obj: unknown) => {
    const file = join(scratch, `${randomBytes(6).toString('hex')}.json`);
    writeFileSync(file, JSON.stringify(obj));
    await kubectl(['apply', '-f', file]);
  };
  const get = async (kind: string, name: string, ns?: string): Promise<Obj> =>
    JSON.parse(await kubectl(['get', kind, name, ...(ns ? ['-n', ns] : []), '-o', 'json'])) as Obj;
  const events = async (kind: string, name: string): Promise<KubeEvent[]> =>
    (JSON.parse(await kubectl(['get', 'events', '-A', '-o', 'json'])) as { items: KubeEvent[] }).items
      .filter((e) => e.involvedObject.kind === kind && e.involvedObject.name === name);

  const sim = async (opts: Parameters<typeof startPlatformSim>[0] = {}): Promise<PlatformSim> => {
    const s = await startPlatformSim(opts);
    stops.push(() => s.stop());
    return s;
  };
  /** `n` http proxies needing a password of their own, from 127.0.0.<first>…; the password joins the secrets scanned for. */
  const proxies = async (n: number, first: number): Promise<UpstreamProxy[]> => {
    const password = randomBytes(12).toString('hex');
    const ps = await startUpstreamProxies(n, { firstHost: first, auth: { password, user: SESSION_USER } });
    for (const p of ps) secrets.push(...proxyUrlSecrets(`proxy ${p.id} (127.0.0.${first}…)`, p.urlWith('user')));
    stops.push(async () => void (await Promise.all(ps.map((p) => p.stop()))));
    return ps;
  };
  const secret = (name: string, data: Record<string, string>) => apply({
    apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: SECRETS_NS }, type: 'Opaque',
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  });
  /** A pool of `ps`, each URL (credentials included) in a Secret key named for the proxy, the session in the user name. */
  const pool = async (name: string, ps: UpstreamProxy[], coolDownSeconds: number) => {
    await secret(`${name}-proxies`, Object.fromEntries(ps.map((p) => [p.id, p.urlWith('user')])));
    await apply({
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'ProxyPool', metadata: { name },
      spec: {
        proxies: ps.map((p) => ({ id: p.id, urlSecretRef: { namespace: SECRETS_NS, name: `${name}-proxies`, key: p.id } })),
        session: { usernameTemplate: 'user-session-{session}' },
        coolDownSeconds,
      },
    });
    await eventually(async () => (await get('proxypool', name)).status?.total === ps.length, 30_000, 100);
  };
  /** A platform for the simulator's host; waits until the operator has taken it in (its status). */
  const platform = async (name: string, s: PlatformSim, spec: Record<string, unknown>) => {
    await apply({ apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name }, spec: { match: { hosts: [s.host] }, ...spec } });
    await eventually(async () => {
      const p = await get('mediaplatform', name);
      return (p.status?.observedGeneration ?? 0) >= (p.metadata.generation ?? 1);
    }, 30_000, 100);
  };

  const post = async (url: string): Promise<string> => {
    const r = await svc.api('POST', '/jobs', { url, webhook_url: receiver.url });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    const id = r.body.job_id as string;
    jobIds.push(id);
    return id;
  };
  const job = async (id: string) => (await svc.api('GET', `/jobs/${id}`)).body;
  const ended = (id: string, ms = 180_000) => eventually(async () => {
    const j = await job(id);
    return ENDED.includes(j.status as string) ? j : undefined;
  }, ms, 200);
  const completed = async (ids: string[], ms?: number) => {
    for (const id of ids) {
      const j = await ended(id, ms);
      if (j.status !== 'Completed') {
        const attempts = (await mediaJob(id)).status?.attempts;
        expect.fail(`${id} ended ${String(j.status)}: ${String(j.error)}; attempts ${JSON.stringify(attempts)}`);
      }
    }
  };
  /** Every reason GET /jobs/{id} gave any of `ids` until all ended (`also` runs on each round). */
  const reasonsUntilEnded = async (ids: string[], also?: () => Promise<void>, ms = 300_000): Promise<Set<string>> => {
    const reasons = new Set<string>();
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const js = await Promise.all(ids.map(job));
      for (const j of js) if (typeof j.reason === 'string') reasons.add(j.reason);
      if (js.every((j) => ENDED.includes(j.status as string))) break;
      await also?.();
      await new Promise((r) => setTimeout(r, 200));
    }
    return reasons;
  };
  const mediaJob = (id: string) => get('mediajob', id, svc.env.MEDIAJOBS_NAMESPACE ?? 'default');
  const poolProxy = async (name: string, id: string) => (await get('proxypool', name)).status?.proxies?.find((p) => p.id === id);

  // ---- the cases -----------------------------------------------------------

  it('spreads jobs over a pool: one session per attempt, no proxy over its starts per minute, every job completes', async () => {
    // The platform allows an exit 2 page views per 30 s; the pool starts at most 2 jobs per proxy per minute.
    // The operator counts starts, the platform page views, which come a runner's start-up later: that
    // varies by seconds under load (six pods starting at once on two cores, then one alone), and the
    // 30 s between the windows absorb it. Without the pool's limit a proxy would view 3 pages at once.
    const s = await sim({ rateLimit: { pages: 2, windowSeconds: 30, retryAfterSeconds: 30 } });
    const ps = await proxies(3, 10);
    await pool('spread', ps, 300);
    await platform('spread', s, { proxyPool: 'spread', startsPerMinutePerProxy: 2 });

    // Seven jobs: a minute's worth for three proxies, and one that must wait for a proxy's minute to pass.
    const ids = await Promise.all(['v1', 'v2', 'v3', 'v1', 'v2', 'v3', 'v1'].map((v) => post(s.pageUrl(v))));
    const reasons = await reasonsUntilEnded(ids);
    await completed(ids, 240_000);

    expect(s.stats(DIRECT).requests, 'nothing reached the platform without a proxy').to.equal(0);
    for (const p of ps) {
      const seen = s.stats(p.sourceAddress);
      const views = s.requests.filter((r) => r.kind === 'page' && r.identity === p.sourceAddress)
        .map((r) => `${new Date(r.at).toISOString().slice(11, 23)} ${r.status}`);
      expect(seen.statuses[429] ?? 0, `${p.id} was never rate-limited; its page views: ${views.join(', ')}`).to.equal(0);
      expect(seen.pages, `${p.id}'s page views`).to.be.within(2, 3);
      expect(p.users.every((u) => SESSION_USER.test(u)), `${p.id} users ${p.users.join(',')}`).to.equal(true);
    }
    // One session per job's attempt, and a session never crosses proxies (its probe, download and every range on one exit).
    const sessions = ps.map((p) => new Set(p.users));
    expect(sessions.reduce((n, set) => n + set.size, 0)).to.equal(ids.length);
    const all = sessions.flatMap((set) => [...set]);
    expect(new Set(all).size, 'no session on two proxies').to.equal(all.length);

    const status = (await get('proxypool', 'spread')).status!;
    expect(status).to.include({ ready: 3, total: 3 });
    expect(status.proxies!.map((p) => p.state)).to.deep.equal(['Ready', 'Ready', 'Ready']);
    expect(status.proxies!.reduce((n, p) => n + p.successes, 0)).to.equal(ids.length);
    expect(await kubectl(['get', 'pp', 'spread'])).to.match(/spread\s+3\s+3\s/);
    expect([...reasons], 'a job waited for its proxy with reason platform_limit').to.include('platform_limit');
  });

  it('a flagged proxy\'s jobs complete on another at once, and it cools down in the pool\'s status', async () => {
    const s = await sim();
    const ps = await proxies(2, 20);
    const [p1, p2] = ps as [UpstreamProxy, UpstreamProxy];
    await pool('flagged', ps, 300);
    await platform('flagged', s, { proxyPool: 'flagged', breaker: { defences: 50, windowSeconds: 60, coolDownSeconds: 60 } });
    s.flag(p1.sourceAddress, 'bot_check');

    const ids = await Promise.all(['v1', 'v2', 'v3'].map((v) => post(s.pageUrl(v))));
    await completed(ids);

    const viaP1 = s.stats(p1.sourceAddress);
    expect(viaP1.pages, 'p1 was tried (fewest starts, then by id)').to.be.at.least(1);
    expect(viaP1.statuses, 'every page through p1 drew the bot check').to.deep.equal({ 403: viaP1.pages });
    expect(s.stats(p2.sourceAddress).pages).to.equal(ids.length);

    // The pool's status is written at most once per STATUS_MIN_INTERVAL_MS (3 s, coalesced): its last counts come within it.
    const settled = await eventually(async () => {
      const [a, b] = [await poolProxy('flagged', 'p1'), await poolProxy('flagged', 'p2')];
      return a?.defences === viaP1.pages && b?.successes === ids.length ? [a, b] as const : undefined;
    }, 15_000, 200).catch(async () => [await poolProxy('flagged', 'p1'), await poolProxy('flagged', 'p2')] as const);
    const [cooled, ready] = settled;
    expect(cooled, JSON.stringify(cooled)).to.include({ state: 'CoolingDown', defences: viaP1.pages, lastDefenceKind: 'bot_check' });
    expect(Date.parse(cooled!.coolingUntil!)).to.be.greaterThan(Date.now());
    expect(ready).to.include({ state: 'Ready', successes: ids.length, defences: 0 });
    expect(await kubectl(['get', 'pp', 'flagged'])).to.match(/flagged\s+1\s+2\s/);
    const poolEvents = (await events('ProxyPool', 'flagged')).map((e) => `${e.reason} ${e.message}`);
    expect(poolEvents.some((t) => /\bp1\b/.test(t)), `an Event names the proxy that cools down: ${poolEvents.join('; ')}`).to.equal(true);

    // The jobs that met the check: attempt 1 on p1 answered by a second attempt at once, not after the platform backoff.
    const met = (await Promise.all(ids.map(mediaJob))).filter((m) => m.status?.attempts?.some((a) => a.defence));
    expect(met.length).to.equal(viaP1.pages);
    for (const m of met) {
      const first = m.status!.attempts![0]!;
      expect(first.defence, m.metadata.name).to.include({ kind: 'bot_check', proxyId: 'p1' });
      expect(first.category).to.equal('bot_detection');
      expect(first.retryAfterSeconds ?? 0, 'retried at once').to.be.at.most(1);
    }
    expect((await get('mediaplatform', 'flagged')).status?.breaker ?? 'Closed').to.equal('Closed');
  });

  it('a required cookie reaches the platform; an expired cookie file is marked unhealthy and skipped', async () => {
    const s = await sim({ requireCookie: true });
    const good = s.issueCookie();
    const stale = s.issueCookie({ expiresInSeconds: -3600 });
    secrets.push(...cookieFileSecrets('cookie alice', good.file), ...cookieFileSecrets('cookie bob', stale.file));
    await secret('sim-cookies', { alice: good.file, bob: stale.file });
    const ps = await proxies(2, 30);
    await pool('cookies', ps, 1);
    await platform('cookies', s, {
      proxyPool: 'cookies', cookies: { secretRef: { namespace: SECRETS_NS, name: 'sim-cookies' } },
      breaker: { defences: 50, windowSeconds: 60, coolDownSeconds: 60 },
    });

    // Round-robin over two files: among three jobs, one takes bob's (its cookie expired, yt-dlp drops it).
    const first = await Promise.all(['v1', 'v2', 'v3'].map((v) => post(s.pageUrl(v))));
    await completed(first);
    const cookies = await eventually(async () => {
      const c = (await get('mediaplatform', 'cookies')).status?.cookies;
      return c?.some((x) => x.id === 'bob' && !x.healthy) ? c : undefined;
    }, 30_000, 200);
    const bob = cookies.find((c) => c.id === 'bob')!;
    expect(bob.lastFailure, 'when bob failed').to.be.a('string');
    expect(cookies.find((c) => c.id === 'alice')?.healthy ?? true, 'alice stays healthy').to.equal(true);
    const signIns = s.requests.filter((r) => r.kind === 'page' && r.status === 401).length;
    expect(signIns, 'bob\'s file drew the sign-in answer').to.be.at.least(1);

    // Bob is skipped from now on: two more jobs, no further sign-in answer.
    const more = await Promise.all(['v1', 'v2'].map((v) => post(s.pageUrl(v))));
    await completed(more);
    expect(s.requests.filter((r) => r.kind === 'page' && r.status === 401).length).to.equal(signIns);

    const served = s.requests.filter((r) => r.kind === 'page' && r.status === 200);
    expect(served.length).to.equal(first.length + more.length);
    expect(served.every((r) => r.cookie === good.value), 'every page served carried alice\'s cookie').to.equal(true);
    expect(s.cookieViews(good.value)).to.equal(served.length);
    expect(s.requests.some((r) => r.cookie === stale.value), 'an expired cookie never leaves the runner').to.equal(false);

    const metrics = await scrape(`${svc.gateway.metricsUrl!}/metrics`);
    expect(metrics.value('mediajobs_platform_cookie_healthy', { platform: 'cookies', cookie: 'bob' })).to.equal(0);
    expect(metrics.value('mediajobs_platform_cookie_healthy', { platform: 'cookies', cookie: 'alice' })).to.equal(1);
    const said = (await events('MediaPlatform', 'cookies')).map((e) => `${e.reason} ${e.message}`);
    expect(said.some((t) => /\bbob\b/.test(t)), said.join('\n')).to.equal(true);
  });

  it('an expired media URL is re-probed at once on the same proxy, which does not cool down', async () => {
    const s = await sim();
    const ps = await proxies(2, 60);
    await pool('stale', ps, 300);
    await platform('stale', s, { proxyPool: 'stale', breaker: { defences: 1, windowSeconds: 60, coolDownSeconds: 600 } });
    // The first view's media URL has expired by the time it is read: a page served from a stale cache.
    s.staleViews(1);
    const id = await post(s.pageUrl('v1'));
    await completed([id]);

    const m = await mediaJob(id);
    const first = m.status?.attempts?.[0];
    expect(first?.defence, JSON.stringify(m.status?.attempts)).to.include({ kind: 'expired_url', proxyId: 'p1' });
    expect(first?.retryAfterSeconds ?? 0, 'retried at once').to.be.at.most(1);
    expect(s.stats(ps[0]!.sourceAddress).pages, 'both page views on the same exit').to.equal(2);
    expect(s.stats(ps[1]!.sourceAddress).requests).to.equal(0);
    expect(await poolProxy('stale', 'p1')).to.include({ state: 'Ready', defences: 0 });
    // Not a defence of the platform: one would have opened this breaker (defences: 1).
    expect((await get('mediaplatform', 'stale')).status?.breaker ?? 'Closed').to.equal('Closed');
  });

  it('the breaker opens on defences, new jobs wait with platform_paused, it half-opens for one job and closes', async () => {
    const s = await sim();
    const ps = await proxies(2, 40);
    await pool('breaker', ps, 1);
    await platform('breaker', s, { proxyPool: 'breaker', breaker: { defences: 2, windowSeconds: 300, coolDownSeconds: 10 } });
    for (const p of ps) s.flag(p.sourceAddress, 'bot_check');

    // Attempt 1 on p1, attempt 2 at once on p2: two defences open the breaker.
    const a = await post(s.pageUrl('v1'));
    await eventually(async () => (await get('mediaplatform', 'breaker')).status?.breaker === 'Open', 120_000, 200);
    expect(await kubectl(['get', 'mp', 'breaker'])).to.match(/\bOpen\b/);
    const b = await post(s.pageUrl('v2'));
    const paused = await eventually(async () => {
      const j = await job(b);
      return j.reason === 'platform_paused' ? j : undefined;
    }, 60_000, 200);
    expect(ENDED).to.not.include(paused.status);
    const pagesWhileOpen = s.stats(ps[0]!.sourceAddress).pages + s.stats(ps[1]!.sourceAddress).pages;

    // The platform lets the exits through again; after the cool-down exactly one job probes.
    for (const p of ps) s.unflag(p.sourceAddress);
    const half = await eventually(async () => {
      const st = (await get('mediaplatform', 'breaker')).status;
      return st?.breaker === 'HalfOpen' && st.probe ? st : undefined;
    }, 120_000, 100);
    const probeName = String(half.probe).split('/').pop();
    const other = probeName === a ? b : a;
    expect([a, b]).to.include(probeName);
    expect((await job(other)).reason, 'the other job waits while the probe runs').to.equal('platform_paused');

    await completed([a, b]);
    expect((await get('mediaplatform', 'breaker')).status?.breaker).to.equal('Closed');
    expect(s.stats(ps[0]!.sourceAddress).pages + s.stats(ps[1]!.sourceAddress).pages - pagesWhileOpen, 'one page view per job after').to.equal(2);

    // An Event on each transition, whatever its wording: one saying open (not half-open), one half-open, one closed.
    const said = (await events('MediaPlatform', 'breaker')).map((e) => `${e.reason} ${e.message}`);
    const all = said.join('\n');
    expect(said.some((t) => /open/i.test(t.replace(/half-?open/gi, ''))), all).to.equal(true);
    expect(said.some((t) => /half-?open/i.test(t)), all).to.equal(true);
    expect(said.some((t) => /closed/i.test(t)), all).to.equal(true);
  });

  it('maxRunning is never exceeded: the platform never sees more downloads at once', async () => {
    // Each download takes about four seconds, so jobs that could overlap would.
    const s = await sim({ bytesPerSecond: Math.ceil(mp4.length / 4) });
    await platform('capped', s, { maxRunning: 2 });
    const ids = await Promise.all(['v1', 'v2', 'v3', 'v1', 'v2'].map((v) => post(s.pageUrl(v))));
    let mostRunning = 0;
    const reasons = await reasonsUntilEnded(ids, async () => {
      mostRunning = Math.max(mostRunning, (await get('mediaplatform', 'capped')).status?.running ?? 0);
    });
    await completed(ids, 300_000);
    expect(s.maxActiveDownloads, 'downloads at once, as the platform counted them').to.be.within(1, 2);
    expect(mostRunning, 'status.running').to.be.at.most(2);
    expect([...reasons], 'a job waited with reason platform_limit').to.include('platform_limit');
  });

  it('the outbound policy still refuses a refused destination when a pool is set, before anything is sent', async () => {
    // 127.0.0.2 is outside this service's policy (127.0.0.1/32): an internal host a page points at.
    let inside = 0;
    const internal: Server = createServer((_req, res) => {
      inside++;
      res.writeHead(200, { 'content-type': 'video/mp4' }).end(mp4);
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.2', r));
    stops.push(() => new Promise((r) => internal.close(() => r())));
    const internalUrl = `http://127.0.0.2:${(internal.address() as AddressInfo).port}/inside.mp4`;
    const s = await sim({ videos: [{ id: 'inside', title: 'Points inside', mediaUrl: internalUrl }] });
    const ps = await proxies(1, 50);
    await pool('guarded', ps, 300);
    await platform('guarded', s, { proxyPool: 'guarded' });

    const id = await post(s.pageUrl('inside'));
    const j = await ended(id, 240_000);
    expect(j.status, JSON.stringify(j)).to.equal('Failed');
    expect(s.stats(ps[0]!.sourceAddress).pages, 'the page was read through the pool').to.be.at.least(1);
    expect(inside, 'the internal server was never reached').to.equal(0);
    expect(ps[0]!.targets.filter((t) => t.startsWith('127.0.0.2')), 'nothing was sent to the upstream for it').to.deep.equal([]);
    // Our own refusal is not the platform's defence: the proxy does not cool down for it.
    expect(await poolProxy('guarded', 'p1')).to.include({ state: 'Ready', defences: 0 });
  });

  it('no cookie or proxy credential appears in any log, Event, status, Job spec, API answer or webhook', async () => {
    expect(secrets.length, 'the cases above ran').to.be.at.least(4);
    const cluster = async (what: string) => ({ source: what, text: await kubectl(['get', what, '-A', '-o', 'json']) });
    const logs: LogText[] = [
      { source: 'gateway and operator', text: lines.join('') },
      ...(await runnerLogs(svc)),
      await cluster('events'),
      await cluster('mediajobs'),
      await cluster('jobs'),
      await cluster('pods'),
      { source: 'platforms and pools', text: await kubectl(['get', 'mediaplatforms,proxypools', '-o', 'json']) },
      { source: 'GET /jobs/{id}', text: JSON.stringify(await Promise.all(jobIds.map(job))) },
      { source: 'webhooks', text: JSON.stringify(receiver.hooks) },
    ];
    expect(receiver.hooks.length, 'webhooks were delivered').to.be.greaterThan(0);
    assertNoLeaks(secrets, logs);
  });
});
