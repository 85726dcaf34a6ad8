// MediaPlatforms and ProxyPools through the operator on the local cluster,
// with real Postgres and the scripted runner (which reports status.defence
// as the runner does): a platform's jobs never run above its maxRunning and
// wait with reason platform_limit meanwhile; each attempt's proxy and cookie
// file reach only its credentials Secret, the facts its env; a defence
// cools the proxy and the job goes again at once on another; a sign-in
// marks the cookie file unhealthy; defences open the breaker, new jobs wait
// platform_paused, a probe half-opens it and its success closes it; a
// disabled platform's manifest fails platform_disabled.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import type { MediaPlatform, ProxyPool } from '@mediajobs/lib/platforms/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { STATUS_MIN_INTERVAL_MS } from '../src/platforms.js';
import { TestLocalStorage } from './support/local-storage.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const CRDS = ['mediajob.yaml', 'mediabatch.yaml', 'proxypool.yaml', 'mediaplatform.yaml'].map((f) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url)));
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};
const PROXY_PASSWORD = 'pw-9f8e7d6c5b4a';
const COOKIE_A = '# Netscape HTTP Cookie File\n.video.example\tTRUE\t/\tTRUE\t0\tSID\tcookie-a-secret-value\n';
const COOKIE_B = '# Netscape HTTP Cookie File\n.video.example\tTRUE\t/\tTRUE\t0\tSID\tcookie-b-secret-value\n';

describe('platforms and proxy pools on the local cluster', function () {
  this.timeout(180_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let kc: k8s.KubeConfig;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  let key: string;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const start = (env: Record<string, string> = {}) => startOperator(loadOperatorConfig({
    DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('t1'), ...storage.settings,
    RUNNER_IMAGE: 'mediajobs/runner:scripted', LEADER_ELECTION: 'false', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8',
    MAX_RUNNING_JOBS: '10', ADMISSION_RECHECK_SECONDS: '1', RETRY_BACKOFF_SECONDS: '1', RETRY_PLATFORM_BACKOFF_SECONDS: '600', RETRY_MAX_BACKOFF_SECONDS: '600',
    ...env,
  }), { log, storage: storage.access });

  const create = (name: string, url: string) => custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
    body: {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: 'default' },
      spec: { ...OPTIONS, url, owner: { apiKeyId: key }, destination: { type: 'managed' } },
    } satisfies MediaJob,
  });
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const cluster = async <T>(plural: string, name: string) => (await custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural, name })) as T;
  const apply = async (plural: string, body: object) => custom.createClusterCustomObject({ group: GROUP, version: VERSION, plural, body });
  const completed = (names: string[]) => eventually(async () => (await Promise.all(names.map(async (n) => (await get(n)).status?.status))).every((s) => s === 'Completed'), 120_000, 100);
  const runnerJobs = async (name: string) => (await kc.makeApiClient(k8s.BatchV1Api).listNamespacedJob({ namespace: 'default', labelSelector: `mediajobs.io/mediajob=${name}` })).items;
  const envOf = (job: k8s.V1Job) => Object.fromEntries((job.spec!.template.spec!.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
  const events = async (kind: string, name: string) => (await core.listEventForAllNamespaces()).items
    .filter((e) => e.involvedObject.kind === kind && e.involvedObject.name === name).map((e) => e.reason);

  /** When each write of a MediaPlatform's status was stored, from the API server's change feed (in this process). */
  const statusWrites = (name: string) => {
    const times: number[] = [];
    const unsubscribe = tc.cluster.api.subscribe((c) => {
      if (c.rt.plural !== 'mediaplatforms' || c.object.metadata.name !== name || c.type !== 'MODIFIED') return;
      if (JSON.stringify(c.old?.status) !== JSON.stringify(c.object.status)) times.push(Date.now());
    });
    return { times: () => times, stop: () => (unsubscribe(), times) };
  };

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', ...CRDS.flatMap((f) => ['-f', f])]);
    db = await createTestDatabase();
    storage = new TestLocalStorage();
    key = await insertApiKey(db.pool, 'platforms');
    kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'proxy-p2' }, stringData: { url: `http://user:${PROXY_PASSWORD}@127.0.0.12:3128` } } });
    await core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'vp-cookies' }, stringData: { 'a.txt': COOKIE_A, 'b.txt': COOKIE_B } } });
    await apply('proxypools', {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'ProxyPool', metadata: { name: 'residential' },
      spec: {
        proxies: [{ id: 'p1', url: 'http://127.0.0.11:3128' }, { id: 'p2', urlSecretRef: { namespace: 'default', name: 'proxy-p2', key: 'url' } }],
        session: { usernameTemplate: 'user-session-{session}' }, coolDownSeconds: 300,
      },
    } satisfies Omit<ProxyPool, 'spec'> & { spec: object });
    await apply('mediaplatforms', {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name: 'video' },
      spec: {
        match: { hosts: ['www.video.example'] }, maxRunning: 1, proxyPool: 'residential',
        cookies: { secretRef: { namespace: 'default', name: 'vp-cookies' } }, ytdlpArgs: ['--sleep-requests', '1'],
      },
    } satisfies Omit<MediaPlatform, 'spec'> & { spec: object });
    operator = await start();
  });

  after(async () => {
    await operator?.stop();
    await db?.drop();
    await tc?.stop();
    storage?.remove();
  });

  it('runs a platform\'s jobs one at a time (maxRunning 1), the others waiting platform_limit, while other hosts run', async () => {
    await create('lim-1', 'http://www.video.example/complete?sleepMs=2500');
    await eventually(async () => (await get('lim-1')).status?.status === 'Processing', 60_000);
    await create('lim-2', 'http://www.video.example/complete?sleepMs=100');
    await create('other', 'http://elsewhere.example/complete?sleepMs=100');
    const waiting = await eventually(async () => ((await get('lim-2')).status?.reason === 'platform_limit' ? get('lim-2') : undefined));
    expect(waiting.status?.conditions?.find((c) => c.type === 'Admitted')).to.include({ status: 'False', reason: 'PlatformAtLimit' });
    const row = await db.pool.query<{ reason: string | null }>('SELECT reason FROM jobs WHERE cr_name = $1', ['lim-2']);
    expect(row.rows[0]?.reason).to.equal('platform_limit');
    await completed(['other']);
    expect((await get('lim-1')).status?.status).to.equal('Processing');
    expect(await runnerJobs('lim-2')).to.have.length(0);
    await completed(['lim-1', 'lim-2']);
    expect((await get('lim-2')).status).to.not.have.property('reason');
    expect((await cluster<MediaPlatform>('mediaplatforms', 'video')).status).to.include({ breaker: 'Closed' });
  });

  it('gives each attempt a proxy session and a cookie file: secrets only in its credentials Secret, facts in its env', async () => {
    await create('route', 'http://www.video.example/hang');
    const [job] = await eventually(async () => {
      const jobs = await runnerJobs('route');
      return jobs.length ? jobs : undefined;
    }, 60_000);
    const env = envOf(job!);
    expect(env).to.include({ RUNNER_PLATFORM: 'video', RUNNER_PROXY_POOL: 'residential', RUNNER_PLATFORM_YTDLP_ARGS: '["--sleep-requests","1"]' });
    expect(['p1', 'p2']).to.include(env.RUNNER_PROXY_ID);
    expect(['a.txt', 'b.txt']).to.include(env.RUNNER_COOKIE_ID);
    const spec = JSON.stringify(job!.spec);
    for (const secret of [PROXY_PASSWORD, 'cookie-a-secret-value', 'cookie-b-secret-value']) expect(spec).to.not.contain(secret);
    const volume = job!.spec!.template.spec!.volumes!.find((v) => v.name === 'credentials')!.secret!.secretName!;
    const data = (await core.readNamespacedSecret({ namespace: 'default', name: volume })).data!;
    const upstream = Buffer.from(data['upstream-proxy-url']!, 'base64').toString();
    expect(upstream).to.match(/^http:\/\/user-session-[0-9a-f]{12}-1(:pw-9f8e7d6c5b4a)?@127\.0\.0\.1[12]:3128$/);
    expect(Buffer.from(data['cookies.txt']!, 'base64').toString()).to.equal(env.RUNNER_COOKIE_ID === 'a.txt' ? COOKIE_A : COOKIE_B);
    await custom.patchNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name: 'route', body: { spec: { cancel: true } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await eventually(async () => (await get('route')).status?.status === 'CancelledByAdmin', 60_000);
  });

  it('a bot check cools the attempt\'s proxy down and the job goes again at once on the other; a sign-in marks its cookie file, and with no proxy left Ready the job waits', async () => {
    await create('bot', 'http://www.video.example/fail?category=bot_detection&defence=bot_check&times=1');
    await completed(['bot']);
    const s = (await get('bot')).status!;
    expect(s.attempts).to.have.length(2);
    const first = s.attempts![0]!;
    expect(first).to.include({ outcome: 'Failed', category: 'bot_detection', retryAfterSeconds: 0 });
    expect(first.defence?.kind).to.equal('bot_check');
    const jobs = await runnerJobs('bot');
    const proxies = jobs.sort((a, b) => a.metadata!.name!.length - b.metadata!.name!.length).map((j) => envOf(j).RUNNER_PROXY_ID);
    expect(proxies[0]).to.not.equal(proxies[1]);
    const pool = await eventually(async () => {
      const p = await cluster<ProxyPool>('proxypools', 'residential');
      return p.status?.proxies?.find((x) => x.id === proxies[0])?.state === 'CoolingDown' ? p : undefined;
    });
    expect(pool.status).to.include({ ready: 1, total: 2 });
    expect(pool.status!.proxies!.find((x) => x.id === proxies[0])).to.include({ defences: 1, lastDefenceKind: 'bot_check' });
    expect(await eventually(async () => ((await events('ProxyPool', 'residential')).includes('ProxyCoolingDown') ? true : undefined))).to.equal(true);

    // The other proxy draws a sign-in: none is Ready now, so the job waits the platform backoff instead of going at once.
    await create('signin', 'http://www.video.example/fail?category=bot_detection&defence=sign_in&times=1');
    const waiting = await eventually(async () => ((await get('signin')).status?.reason === 'retry_scheduled' ? (await get('signin')).status : undefined), 60_000);
    expect(waiting!.attempts![0]).to.include({ retryAfterSeconds: 600 });
    expect(waiting!.attempts![0]!.defence?.kind).to.equal('sign_in');
    const cookie = (await runnerJobs('signin')).map(envOf).find((e) => e.MEDIAJOB_ATTEMPT === '1')!.RUNNER_COOKIE_ID;
    const platform = await eventually(async () => {
      const p = await cluster<MediaPlatform>('mediaplatforms', 'video');
      return p.status?.cookies?.find((c) => c.id === cookie)?.healthy === false ? p : undefined;
    });
    expect(platform.status!.cookies!.find((c) => c.id !== cookie)).to.include({ healthy: true });
    expect(JSON.stringify(platform)).to.not.contain('secret-value');
    expect(await eventually(async () => ((await events('MediaPlatform', 'video')).includes('CookieUnhealthy') ? true : undefined))).to.equal(true);
    // Written within the status interval (its writes are coalesced), not necessarily by the time the cookie's was.
    await eventually(async () => ((await cluster<ProxyPool>('proxypools', 'residential')).status?.ready === 0 ? true : undefined), 2 * STATUS_MIN_INTERVAL_MS + 5_000, 100);
  });

  it('defences open the breaker: new jobs wait platform_paused; after the cool-down one probe half-opens it and its success closes it', async () => {
    await apply('mediaplatforms', {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name: 'fragile' },
      spec: { match: { hosts: ['fragile.example'] }, breaker: { defences: 2, windowSeconds: 60, coolDownSeconds: 4 } },
    });
    for (const n of ['rl-1', 'rl-2']) await create(n, 'http://fragile.example/fail?category=rate_limited&defence=rate_limited&retryAfter=600');
    await eventually(async () => (await cluster<MediaPlatform>('mediaplatforms', 'fragile')).status?.breaker === 'Open', 60_000);
    await create('paused', 'http://fragile.example/complete?sleepMs=100');
    const waiting = await eventually(async () => ((await get('paused')).status?.reason === 'platform_paused' ? get('paused') : undefined));
    expect(waiting.status?.conditions?.find((c) => c.type === 'Admitted')).to.include({ status: 'False', reason: 'PlatformPaused' });
    // After the cool-down the waiting job is the probe; its completion closes the breaker.
    await completed(['paused']);
    const closed = await eventually(async () => {
      const p = await cluster<MediaPlatform>('mediaplatforms', 'fragile');
      return p.status?.breaker === 'Closed' ? p : undefined;
    }, 30_000);
    expect(closed.status).to.not.have.property('probe');
    const seen = await events('MediaPlatform', 'fragile');
    expect(seen).to.include.members(['BreakerOpen', 'BreakerHalfOpen', 'BreakerClosed']);
    const lines = (await operator!.metrics.registry.metrics()).split('\n');
    expect(lines).to.include('mediajobs_platform_breaker_transitions_total{platform="fragile",to="Open"} 1');
    expect(lines).to.include('mediajobs_platform_defences_total{platform="fragile",kind="rate_limited"} 2');
    // rate_limited answered with its Retry-After, not the platform backoff.
    expect((await get('rl-1')).status?.attempts?.[0]?.retryAfterSeconds).to.equal(600);
  });

  it('a disabled platform\'s manifest fails platform_disabled, before any runner', async () => {
    await custom.patchClusterCustomObject({ group: GROUP, version: VERSION, plural: 'mediaplatforms', name: 'fragile', body: { spec: { disabled: true } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await create('off', 'http://fragile.example/complete');
    const s = await eventually(async () => ((await get('off')).status?.status === 'Failed' ? (await get('off')).status : undefined), 60_000);
    expect(s).to.include({ reason: 'platform_disabled', error: 'Downloads from this platform are disabled' });
    expect(await runnerJobs('off')).to.have.length(0);
  });

  it('a burst of starts writes the platform\'s status far fewer times than it starts jobs, at most once per interval, and its last state', async () => {
    await apply('mediaplatforms', {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name: 'burst' }, spec: { match: { hosts: ['burst.example'] } },
    });
    await eventually(async () => (await cluster<MediaPlatform>('mediaplatforms', 'burst')).status?.breaker === 'Closed', 30_000, 100);
    // Quiet first: nothing of another platform or pool is still being written.
    await new Promise((r) => setTimeout(r, STATUS_MIN_INTERVAL_MS + 1_000));
    const writes = () => tc.cluster.requestCounts()['patch mediaplatforms.mediajobs.io/status'] ?? 0;
    tc.cluster.resetRequestCounts();
    // When each write of the status was stored (the API server's own moment, whatever the load on the client).
    const stored = statusWrites('burst');
    // As many as the global cap (MAX_RUNNING_JOBS 10): every one is admitted at once, each start a change of the counts.
    const names = Array.from({ length: 10 }, (_, i) => `burst-${i}`);
    const started = Date.now();
    await Promise.all(names.map((n) => create(n, 'http://burst.example/complete?sleepMs=15000')));
    await eventually(async () => (await cluster<MediaPlatform>('mediaplatforms', 'burst')).status?.running === names.length, 60_000, 50);
    const startPhase = Date.now() - started;
    const atStart = writes();
    expect(atStart, `status writes while ${names.length} jobs started, in ${startPhase} ms`).to.be.at.least(1)
      .and.at.most(Math.ceil(startPhase / STATUS_MIN_INTERVAL_MS) + 1);

    await completed(names);
    // The last state is written, though it came inside an interval: nothing running, nothing waiting.
    const last = await eventually(async () => {
      const st = (await cluster<MediaPlatform>('mediaplatforms', 'burst')).status;
      return st?.running === 0 && st.waiting === 0 ? st : undefined;
    }, 2 * STATUS_MIN_INTERVAL_MS + 5_000, 100);
    expect(last).to.include({ breaker: 'Closed', running: 0, waiting: 0 });
    const elapsed = Date.now() - started;
    expect(writes(), `status writes for ${names.length} starts and ends in ${elapsed} ms`).to.be.at.most(Math.ceil(elapsed / STATUS_MIN_INTERVAL_MS) + 1);
    // Coalescing, however long the starts took: no two writes closer than the interval (one per start came within
    // milliseconds of each other). A timer may fire a millisecond early.
    const times = stored.stop();
    expect(times.length, 'the starts and the ends were written').to.be.at.least(2);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(Math.min(...gaps), `gaps between status writes: ${gaps.join(', ')} ms`).to.be.at.least(STATUS_MIN_INTERVAL_MS - 2);
  });

  it('a graceful stop writes the status change still waiting for its interval, before it lets go', async () => {
    const running = async () => (await cluster<MediaPlatform>('mediaplatforms', 'burst')).status?.running;
    await eventually(async () => (await running()) === 0, 30_000, 100);
    const stored = statusWrites('burst');
    // A start, written; the next start at once after that write, so its own write waits for the interval (a slow
    // start on a loaded machine may miss it: then it is written, and the next is tried).
    let started = 0;
    let pending = false;
    while (!pending && started < 6) {
      await eventually(async () => ((await running()) === started ? true : undefined), 30_000, 20);
      const name = `flush-${++started}`;
      await create(name, 'http://burst.example/complete?sleepMs=120000');
      // Its runner Job made: the platform counts it running.
      await eventually(async () => ((await runnerJobs(name)).length ? true : undefined), 60_000, 20);
      const last = stored.times().at(-1);
      pending = last !== undefined && Date.now() - last < STATUS_MIN_INTERVAL_MS - 500 && (await running()) !== started;
    }
    expect(pending, 'a start came inside an interval after a write').to.equal(true);
    const stopping = operator!;
    operator = undefined;
    await stopping.stop();
    stored.stop();
    expect(await running(), 'the stopped operator wrote its last state').to.equal(started);
  });
});
