// Platforms and proxy pools in the operator (docs/adr/0027): the caches of
// MediaPlatforms and ProxyPools (cluster-scoped), and what the operator
// keeps of them between passes: each platform's Admission and gate (its
// start rate, its pool's proxies, its circuit breaker), which proxy, session
// and cookie file each attempt takes, and what each ended attempt tells of
// them (defences, successes). Writes both resources' status (the breaker's
// state lives there and is read back after a restart), their Events and
// metrics. The decisions are platform-decisions.ts's; the job's own status
// and its children are the controller's and children.ts's, which ask here.
import type * as k8s from '@kubernetes/client-node';
import { isNotFound, MERGE_PATCH } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { GROUP, VERSION, jobIdOf, type Condition, type MediaJob, type MediaJobAttempt } from '@mediajobs/lib/mediajob/types';
import {
  MEDIAPLATFORM_PLURAL, PROXYPOOL_PLURAL, mediaPlatformSpecSchema, platformForUrl, proxyPoolSpecSchema,
  type CookieStatus, type MediaPlatform, type MediaPlatformSpec, type MediaPlatformStatus, type ProxyPool, type ProxyPoolSpec, type ProxyPoolStatus, type ProxyStatus,
} from '@mediajobs/lib/platforms/types';
import { TemporaryError } from '@mediajobs/lib/reconcile';
import { WorkQueue } from '@mediajobs/lib/work-queue';
import { Admission, type AdmissionGate, type WaitReason } from './admission.js';
import type { EventRecorder, EventType } from './events.js';
import { ResilientInformer, type ResilientInformerOptions } from './informer.js';
import type { Kube } from './kube.js';
import type { OperatorMetrics, PlatformSnapshot } from './metrics.js';
import {
  afterDefence, afterOutcome, breakerGate, breakerState, coolDownSeconds, defenceAnswer, pickCookie, pickProxy, probeAdmitted, proxyStateAt,
  sessionId, sourceAddress, upstreamUrl, type BreakerStatus,
} from './platform-decisions.js';

/** The runner's env of a platform's attempt (non-secret facts only). */
export const PLATFORM_ENV = {
  platform: 'RUNNER_PLATFORM', pool: 'RUNNER_PROXY_POOL', proxy: 'RUNNER_PROXY_ID', cookie: 'RUNNER_COOKIE_ID',
  ytdlpArgs: 'RUNNER_PLATFORM_YTDLP_ARGS', sourceAddress: 'RUNNER_SOURCE_ADDRESS',
} as const;

/** The keys of the job's credentials Secret a platform's attempt adds (mounted at MEDIAJOBS_CREDENTIALS_DIR). */
export const PLATFORM_SECRET_KEYS = { upstream: 'upstream-proxy-url', cookies: 'cookies.txt' } as const;

/** The reason a MediaJob of a disabled platform fails with, and the message (the gateway answers 422 with it). */
export const PLATFORM_DISABLED = 'platform_disabled';
export { PLATFORM_DISABLED_MESSAGE } from '@mediajobs/lib/platforms/types';

/** What an attempt of a platform's job is given: env for its runner, keys for its credentials Secret. */
export interface PlatformRoute {
  env: Record<string, string>;
  secretData: Record<string, string>;
}

/** A Secret read is kept this long: a job's attempt costs no GET when others of its platform just read it. */
const SECRET_TTL_MS = 15_000;
/** How often the platforms' statuses are looked at (a breaker's cool-down or a proxy's passing shows without an event). */
const STATUS_TICK_MS = 5_000;
/**
 * At most one status write per platform or pool in this time: a burst of
 * starts and ends changes the counts with every job, and the apiserver
 * needs only the state a few seconds old. A change inside the interval is
 * written at its end, as the state is then, so the last state is always written.
 */
export const STATUS_MIN_INTERVAL_MS = 3_000;
const MINUTE_MS = 60_000;

type InformerSettings = Omit<ResilientInformerOptions<k8s.KubernetesObject>, 'name' | 'path' | 'list' | 'onChange'>;

export interface PlatformsDeps {
  kube: Pick<Kube, 'custom' | 'core'>;
  log: Logger;
  events: EventRecorder;
  metrics?: OperatorMetrics;
  settings: InformerSettings;
  /** A MediaJob key to pass over again (a slot of its platform was given to it). */
  wake: (key: string) => void;
  now?: () => number;
}

/** What the operator keeps of one platform between passes. */
class PlatformRuntime {
  readonly starts: number[] = [];
  breaker: BreakerStatus = {};
  cookies: CookieStatus[] = [];
  cookiesVersion: string | undefined;
  cookieTurn = 0;
  loaded = false;
  spec: MediaPlatformSpec | undefined;
  readonly admission: Admission;

  constructor(readonly name: string, gate: AdmissionGate, wake: (key: string) => void) {
    this.admission = new Admission({ maxRunning: Number.MAX_SAFE_INTEGER, perKey: 0, perOrg: 0 }, wake, undefined, gate, 'platform_limit');
  }
}

/** What the operator keeps of one pool: each proxy's health, and its recent starts. */
class PoolRuntime {
  readonly proxies = new Map<string, ProxyStatus>();
  readonly starts = new Map<string, number[]>();
  loaded = false;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

function recent(times: number[], now: number): number {
  while (times.length && times[0]! <= now - MINUTE_MS) times.shift();
  return times.length;
}

export class Platforms {
  private readonly platforms: ResilientInformer<MediaPlatform & k8s.KubernetesObject>;
  private readonly pools: ResilientInformer<ProxyPool & k8s.KubernetesObject>;
  private readonly runtimes = new Map<string, PlatformRuntime>();
  private readonly poolRuntimes = new Map<string, PoolRuntime>();
  /** By `<MediaJob uid>/<attempt>`: the route chosen, until the attempt ends (its Secret and Job env agree). */
  private readonly routes = new Map<string, PlatformRoute>();
  private readonly secrets = new Map<string, { at: number; secret: k8s.V1Secret }>();
  /** Writes of MediaPlatform ("mp/<name>") and ProxyPool ("pp/<name>") status. */
  private readonly statusQueue: WorkQueue;
  /** By status key: when its last write was sent (Date.now(): the queue's delays are in real time). */
  private readonly lastWrite = new Map<string, number>();
  private readonly now: () => number;
  /** Status keys whose write waits for the end of their interval (addAfter). */
  private readonly deferred = new Set<string>();
  /** A graceful stop's last writes: the interval is not waited for. */
  private flushing = false;
  private tick: NodeJS.Timeout | undefined;
  private active = false;
  /** Both CRDs are served: without them (an install from before them) there are no platforms, and no informer lists in vain. */
  private served = false;

  constructor(private readonly d: PlatformsDeps) {
    this.now = d.now ?? Date.now;
    const cluster = <T extends k8s.KubernetesObject>(plural: string) => ({
      path: `/apis/${GROUP}/${VERSION}/${plural}`,
      list: () => d.kube.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural }) as Promise<k8s.KubernetesListObject<T>>,
    });
    this.platforms = new ResilientInformer<MediaPlatform & k8s.KubernetesObject>({
      ...d.settings, name: 'mediaplatforms', ...cluster<MediaPlatform & k8s.KubernetesObject>(MEDIAPLATFORM_PLURAL),
      onChange: (p) => this.changed(`mp/${p.metadata?.name}`),
    });
    this.pools = new ResilientInformer<ProxyPool & k8s.KubernetesObject>({
      ...d.settings, name: 'proxypools', ...cluster<ProxyPool & k8s.KubernetesObject>(PROXYPOOL_PLURAL),
      onChange: (p) => this.changed(`pp/${p.metadata?.name}`),
    });
    this.statusQueue = new WorkQueue((key) => this.writeStatus(key), {
      concurrency: 2, retryBaseMs: 500, retryMaxMs: 30_000,
      onError: (key, err) => d.log.warn({ resource: key, err: errFields(err) }, 'platform status write failed; will retry'),
    });
    d.metrics?.watchPlatforms(() => this.snapshot());
  }

  async start(): Promise<void> {
    const probe = (plural: string) => this.d.kube.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural, limit: 1 }).then(() => true, (err: unknown) => {
      if (isNotFound(err)) return false;
      throw err;
    });
    this.served = (await Promise.all([probe(MEDIAPLATFORM_PLURAL), probe(PROXYPOOL_PLURAL)])).every(Boolean);
    if (!this.served) {
      this.d.log.info('the MediaPlatform and ProxyPool CRDs are not installed: no platforms (install crds/ and restart the operator to use them)');
      return;
    }
    await Promise.all([this.platforms.start(), this.pools.start()]);
  }

  async stop(): Promise<void> {
    this.deactivate();
    await this.statusQueue.stop();
    if (this.served) await Promise.all([this.platforms.stop(), this.pools.stop()]);
  }

  informersNotFollowing(): string[] {
    if (!this.served) return [];
    return [this.platforms, this.pools].filter((i) => i.followingSince() === undefined).map((i) => (i === this.platforms ? 'mediaplatforms' : 'proxypools'));
  }

  /** Leading: statuses are written from now, and looked at every few seconds. */
  activate(): void {
    this.active = true;
    for (const p of this.platforms.list()) this.changed(`mp/${p.metadata.name}`);
    this.tick = setInterval(() => {
      for (const r of this.runtimes.values()) {
        r.admission.recheck();
        this.changed(`mp/${r.name}`);
      }
      for (const name of this.poolRuntimes.keys()) this.changed(`pp/${name}`);
    }, STATUS_TICK_MS);
    this.tick.unref();
  }

  /**
   * A graceful stop, while this still leads: the writes waiting for the end
   * of their interval are sent now, or the last state of a burst would be
   * lost with the timers (the next leader writes only when something
   * changes again). Bounded by `timeoutMs`: a stop does not hang on the API server.
   */
  async flush(timeoutMs = 5_000): Promise<void> {
    if (!this.active) return;
    this.flushing = true;
    let timer: NodeJS.Timeout | undefined;
    try {
      for (const key of this.deferred) this.statusQueue.add(key);
      await Promise.race([this.statusQueue.idle(), new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
    } finally {
      clearTimeout(timer);
      this.flushing = false;
    }
  }

  deactivate(): void {
    this.active = false;
    if (this.tick) clearInterval(this.tick);
    this.tick = undefined;
  }

  private changed(key: string): void {
    if (this.active && !key.endsWith('/undefined')) this.statusQueue.add(key);
  }

  // ---- which platform, admission ---------------------------------------------

  /** The platform a MediaJob's URL belongs to (lib/src/platforms/types.ts platformForUrl); undefined: none. */
  platformOf(mj: MediaJob): string | undefined {
    if (!this.served) return undefined;
    return platformForUrl(this.platforms.list(), mj.spec.url)?.metadata.name;
  }

  /** Whether the platform refuses new jobs. */
  disabled(name: string): boolean {
    return this.platforms.get(name)?.spec.disabled === true;
  }

  /** The platform's Admission, its runtime made (and its status read back) on first use. */
  admission(name: string): Admission {
    return this.runtime(name).admission;
  }

  private runtime(name: string): PlatformRuntime {
    let r = this.runtimes.get(name);
    if (!r) {
      r = new PlatformRuntime(name, this.gate(name), this.d.wake);
      this.runtimes.set(name, r);
    }
    const spec = this.specOf(name);
    r.spec = spec;
    if (spec) r.admission.setMaxRunning(spec.maxRunning ?? Number.MAX_SAFE_INTEGER);
    if (!r.loaded) this.load(r);
    return r;
  }

  /** The platform's spec as the schema reads it (defaults in); undefined when it is gone or invalid. */
  private specOf(name: string): MediaPlatformSpec | undefined {
    const p = this.platforms.get(name);
    const parsed = p && mediaPlatformSpecSchema.safeParse(p.spec);
    return parsed?.success ? parsed.data : undefined;
  }

  /** The breaker and cookie health the platform's status holds: what an earlier leader decided. */
  private load(r: PlatformRuntime): void {
    const status = this.platforms.get(r.name)?.status;
    if (!this.platforms.get(r.name)) return;
    r.breaker = { breaker: status?.breaker ?? 'Closed', ...(status?.openedAt && { openedAt: status.openedAt }),
      ...(status?.recentDefences && { recentDefences: status.recentDefences }), ...(status?.probe && { probe: status.probe }) };
    r.cookies = status?.cookies ?? [];
    r.cookiesVersion = status?.cookiesVersion;
    r.loaded = true;
  }

  private gate(name: string): AdmissionGate {
    return {
      closed: () => this.closedFor(name),
      started: (key) => {
        const r = this.runtimes.get(name)!;
        r.starts.push(this.now());
        if (r.spec && breakerGate(r.breaker, r.spec.breaker, this.now()) === 'probe') {
          r.breaker = probeAdmitted(r.breaker, key);
          this.transition(name, 'HalfOpen', `Breaker half-open after its cool-down: job ${key} is the probe`);
        }
        this.changed(`mp/${name}`);
      },
    };
  }

  /** Why no job of the platform may start now, or undefined. */
  private closedFor(name: string): { reason: WaitReason; limit: number } | undefined {
    const r = this.runtimes.get(name)!;
    const spec = r.spec;
    // Gone or invalid: its jobs wait rather than run without the proxies and options it asked for.
    if (!spec) return { reason: 'platform_paused', limit: 0 };
    const now = this.now();
    if (breakerGate(r.breaker, spec.breaker, now) === 'paused') return { reason: 'platform_paused', limit: 0 };
    if (spec.startsPerMinute !== undefined && recent(r.starts, now) >= spec.startsPerMinute) return { reason: 'platform_limit', limit: spec.startsPerMinute };
    if (spec.proxyPool) {
      const pool = this.poolSpec(spec.proxyPool);
      if (!pool) return { reason: 'platform_paused', limit: 0 };
      const pick = pickProxy(this.proxyStatuses(spec.proxyPool, pool), (id) => this.proxyStarts(spec.proxyPool!, id), now,
        { perProxyPerMinute: spec.startsPerMinutePerProxy });
      if ('wait' in pick) return { reason: 'platform_limit', limit: spec.startsPerMinutePerProxy ?? 0 };
    }
    return undefined;
  }

  /** Whether the job's platform has a Ready proxy other than `proxyId` (a defence is then retried at once). */
  newSessionReady(platform: string | undefined, proxyId: string | undefined): boolean {
    const spec = platform ? this.specOf(platform) : undefined;
    const pool = spec?.proxyPool ? this.poolSpec(spec.proxyPool) : undefined;
    if (!pool) return false;
    const now = this.now();
    return this.proxyStatuses(spec!.proxyPool!, pool).some((p) => p.id !== proxyId && proxyStateAt(p, now) === 'Ready');
  }

  // ---- the route of an attempt -------------------------------------------------

  /**
   * The route of the MediaJob's current attempt through its platform: a
   * proxy of its pool and the session (the upstream URL with credentials
   * goes into the Secret), a cookie file, the platform's yt-dlp options and
   * a source address. The same for every pass of one attempt.
   */
  async route(mj: MediaJob, name: string, attempt: number): Promise<PlatformRoute> {
    const memo = `${mj.metadata.uid}/${attempt}`;
    const known = this.routes.get(memo);
    if (known) return known;
    const r = this.runtime(name);
    const spec = r.spec;
    if (!spec) throw new TemporaryError(`MediaPlatform ${name} is gone or invalid`);
    const env: Record<string, string> = { [PLATFORM_ENV.platform]: name };
    const secretData: Record<string, string> = {};
    const proxy = spec.proxyPool ? this.chooseProxy(mj, spec, attempt, env) : undefined;
    try {
      if (proxy) Object.assign(secretData, await proxy.secretData());
      if (spec.cookies) Object.assign(secretData, await this.chooseCookie(r, spec, env));
    } catch (err) {
      // No route, no runner: the start it counted goes back, or the next pass's pick would count it twice.
      proxy?.release();
      throw err;
    }
    if (spec.ytdlpArgs?.length) env[PLATFORM_ENV.ytdlpArgs] = JSON.stringify(spec.ytdlpArgs);
    const source = spec.sourceAddress && sourceAddress(spec.sourceAddress.cidr, jobIdOf(mj), attempt);
    if (source) env[PLATFORM_ENV.sourceAddress] = source;
    const route = { env, secretData };
    this.routes.set(memo, route);
    return route;
  }

  /**
   * The attempt's proxy, its start counted before anything is awaited:
   * passes of other jobs run while this one reads a Secret, and each must
   * see this start in the per-proxy counts or they all pick the same proxy.
   * `release` takes the start back when the attempt gets no route.
   */
  private chooseProxy(mj: MediaJob, spec: MediaPlatformSpec, attempt: number, env: Record<string, string>): {
    secretData: () => Promise<Record<string, string>>; release: () => void;
  } {
    const poolName = spec.proxyPool!;
    const pool = this.poolSpec(poolName);
    if (!pool) throw new TemporaryError(`ProxyPool ${poolName} is gone or invalid`);
    // A new session goes elsewhere; a re-probe (an expired signed URL) goes back to the same exit.
    const defence = mj.status?.attempts?.at(-1)?.defence;
    const retry = defence && defenceAnswer(defence.kind).retry;
    const pick = pickProxy(this.proxyStatuses(poolName, pool), (id) => this.proxyStarts(poolName, id), this.now(), {
      perProxyPerMinute: spec.startsPerMinutePerProxy,
      avoid: retry === 'new_session' ? defence!.proxyId : undefined,
      prefer: retry === 'reprobe' ? defence!.proxyId : undefined,
    });
    if ('wait' in pick) throw new TemporaryError(`no proxy of ProxyPool ${poolName} may take a job now`);
    const runtime = this.poolRuntime(poolName);
    let starts = runtime.starts.get(pick.id);
    if (!starts) runtime.starts.set(pick.id, (starts = []));
    const at = this.now();
    starts.push(at);
    Object.assign(env, { [PLATFORM_ENV.pool]: poolName, [PLATFORM_ENV.proxy]: pick.id });
    const proxy = pool.proxies.find((p) => p.id === pick.id)!;
    return {
      secretData: async () => {
        const raw = proxy.url ?? await this.secretValue(proxy.urlSecretRef!.namespace, proxy.urlSecretRef!.name, proxy.urlSecretRef!.key);
        return { [PLATFORM_SECRET_KEYS.upstream]: upstreamUrl(raw, pool.session?.usernameTemplate, sessionId(jobIdOf(mj), attempt)) };
      },
      release: () => {
        const i = runtime.starts.get(pick.id)?.indexOf(at) ?? -1;
        if (i >= 0) runtime.starts.get(pick.id)!.splice(i, 1);
      },
    };
  }

  private async chooseCookie(r: PlatformRuntime, spec: MediaPlatformSpec, env: Record<string, string>): Promise<Record<string, string>> {
    const ref = spec.cookies!.secretRef;
    const secret = await this.secret(ref.namespace, ref.name);
    const files = Object.keys(secret.data ?? {});
    // An admin who replaced the files (a new Secret version) gets every file back as healthy.
    if (r.cookiesVersion !== secret.metadata?.resourceVersion) {
      r.cookiesVersion = secret.metadata?.resourceVersion;
      r.cookies = files.map((id) => ({ id, healthy: true }));
      this.changed(`mp/${r.name}`);
    }
    for (const id of files) if (!r.cookies.some((c) => c.id === id)) r.cookies.push({ id, healthy: true });
    const id = pickCookie(files, r.cookies, r.cookieTurn++);
    if (id === undefined) return {};
    env[PLATFORM_ENV.cookie] = id;
    return { [PLATFORM_SECRET_KEYS.cookies]: Buffer.from(secret.data![id]!, 'base64').toString('utf8') };
  }

  private poolSpec(name: string): ProxyPoolSpec | undefined {
    const parsed = proxyPoolSpecSchema.safeParse(this.pools.get(name)?.spec);
    return parsed.success ? parsed.data : undefined;
  }

  private poolRuntime(name: string): PoolRuntime {
    let p = this.poolRuntimes.get(name);
    if (!p) this.poolRuntimes.set(name, (p = new PoolRuntime()));
    if (!p.loaded && this.pools.get(name)) {
      for (const s of this.pools.get(name)!.status?.proxies ?? []) p.proxies.set(s.id, s);
      p.loaded = true;
    }
    return p;
  }

  /** Each proxy of the pool's spec with what is known of its health. */
  private proxyStatuses(name: string, pool: ProxyPoolSpec): ProxyStatus[] {
    const known = this.poolRuntime(name).proxies;
    return pool.proxies.map((p) => known.get(p.id) ?? { id: p.id, state: 'Ready', successes: 0, defences: 0 });
  }

  private proxyStarts(pool: string, id: string): number {
    const starts = this.poolRuntime(pool).starts.get(id);
    return starts ? recent(starts, this.now()) : 0;
  }

  private async secret(namespace: string, name: string): Promise<k8s.V1Secret> {
    const key = `${namespace}/${name}`;
    const cached = this.secrets.get(key);
    if (cached && this.now() - cached.at < SECRET_TTL_MS) return cached.secret;
    try {
      const secret = await this.d.kube.core.readNamespacedSecret({ name, namespace });
      this.secrets.set(key, { at: this.now(), secret });
      return secret;
    } catch (err) {
      if (isNotFound(err)) throw new TemporaryError(`Secret ${key} named by a platform or pool does not exist`);
      throw err;
    }
  }

  private async secretValue(namespace: string, name: string, key: string): Promise<string> {
    const data = (await this.secret(namespace, name)).data?.[key];
    if (data === undefined) throw new TemporaryError(`Secret ${namespace}/${name} has no key ${key}`);
    return Buffer.from(data, 'base64').toString('utf8').trim();
  }

  // ---- what an ended attempt tells -----------------------------------------------

  /**
   * An attempt of a platform's job ended (its record was just written): its
   * defence is answered (the proxy cools down, the cookie file is marked,
   * the breaker counts it) or its success counted. `env` is its runner
   * Job's env, which names the proxy and cookie file it was given (the
   * runner's report of them is a claim; the Job is the operator's own).
   */
  attemptEnded(key: string, mj: MediaJob, a: MediaJobAttempt, env: Record<string, string>): void {
    this.routes.delete(`${mj.metadata.uid}/${a.attempt}`);
    const name = env[PLATFORM_ENV.platform];
    if (!name) return;
    const r = this.runtime(name);
    const now = this.now();
    const pool = env[PLATFORM_ENV.pool];
    const proxy = env[PLATFORM_ENV.proxy];
    const cookie = env[PLATFORM_ENV.cookie];
    const served = a.outcome !== 'Failed';
    if (!a.defence) {
      if (r.spec) r.breaker = this.breakerMoves(name, r.breaker, afterOutcome(r.breaker, r.spec.breaker, now, key, served));
      if (served && pool && proxy) this.proxySuccess(pool, proxy);
      this.changed(`mp/${name}`);
      return;
    }
    const answer = defenceAnswer(a.defence.kind);
    this.d.metrics?.platformDefence(name, a.defence.kind);
    if (answer.breaker && r.spec) r.breaker = this.breakerMoves(name, r.breaker, afterDefence(r.breaker, r.spec.breaker, now));
    else if (r.spec) r.breaker = afterOutcome(r.breaker, r.spec.breaker, now, key, false);
    if (answer.coolProxy && pool && proxy) this.proxyDefence(pool, proxy, a.defence.kind, now);
    if (answer.markCookie && cookie) this.cookieFailed(r, cookie, now);
    this.changed(`mp/${name}`);
  }

  /** The breaker moved from `before` to `after`: an Event and the counter when its state changed. */
  private breakerMoves(name: string, before: BreakerStatus, after: BreakerStatus): BreakerStatus {
    const was = before.breaker ?? 'Closed';
    const is = after.breaker ?? 'Closed';
    if (was !== is || (is === 'Open' && before.openedAt !== after.openedAt)) {
      this.transition(name, is, is === 'Open'
        ? 'Breaker open: the platform answered with defences; new jobs wait (platform_paused) until its cool-down'
        : 'Breaker closed: the probe job got through');
    }
    return after;
  }

  private transition(name: string, to: string, message: string): void {
    this.d.metrics?.breakerTransition(name, to);
    this.d.log.info({ platform: name, breaker: to }, 'platform circuit breaker moved');
    this.event('MediaPlatform', name, to === 'Open' ? 'Warning' : 'Normal', `Breaker${to}`, message);
  }

  private proxySuccess(pool: string, id: string): void {
    const p = this.poolRuntime(pool);
    const cur = p.proxies.get(id) ?? { id, state: 'Ready' as const, successes: 0, defences: 0 };
    p.proxies.set(id, { ...cur, successes: cur.successes + 1, consecutiveDefences: 0 });
    this.d.metrics?.proxyAttempt(pool, id, 'success');
    this.changed(`pp/${pool}`);
  }

  private proxyDefence(pool: string, id: string, kind: string, now: number): void {
    const p = this.poolRuntime(pool);
    const cur = p.proxies.get(id) ?? { id, state: 'Ready' as const, successes: 0, defences: 0 };
    const consecutive = (cur.consecutiveDefences ?? 0) + 1;
    const base = this.poolSpec(pool)?.coolDownSeconds ?? 300;
    const seconds = coolDownSeconds(base, consecutive);
    const next: ProxyStatus = {
      ...cur, state: 'CoolingDown', defences: cur.defences + 1, consecutiveDefences: consecutive, lastDefence: iso(now),
      ...(isDefenceKind(kind) && { lastDefenceKind: kind }), coolingUntil: iso(now + seconds * 1000),
    };
    p.proxies.set(id, next);
    this.d.metrics?.proxyAttempt(pool, id, 'defence');
    this.event('ProxyPool', pool, 'Warning', 'ProxyCoolingDown', `Proxy ${id} drew a defence (${kind}): cooling down for ${seconds} s`);
    this.changed(`pp/${pool}`);
  }

  private cookieFailed(r: PlatformRuntime, id: string, now: number): void {
    const c = r.cookies.find((x) => x.id === id);
    const was = c?.healthy ?? true;
    if (c) Object.assign(c, { healthy: false, lastFailure: iso(now) });
    else r.cookies.push({ id, healthy: false, lastFailure: iso(now) });
    if (was) {
      this.d.log.warn({ platform: r.name, cookie: id }, 'cookie file marked unhealthy: it drew a sign-in answer');
      this.event('MediaPlatform', r.name, 'Warning', 'CookieUnhealthy', `Cookie file ${id} drew a sign-in answer: skipped while another file is healthy; update the Secret to clear it`);
    }
  }

  private event(kind: 'MediaPlatform' | 'ProxyPool', name: string, type: EventType, reason: string, message: string): void {
    const obj = kind === 'MediaPlatform' ? this.platforms.get(name) : this.pools.get(name);
    this.d.events.event({ apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name, ...(obj?.metadata.uid && { uid: obj.metadata.uid }) } }, type, reason, message);
  }

  /** The MediaJob went: its attempts' routes go. */
  forget(mj: MediaJob): void {
    for (const k of this.routes.keys()) if (k.startsWith(`${mj.metadata.uid}/`)) this.routes.delete(k);
  }

  // ---- statuses and metrics --------------------------------------------------------

  private async writeStatus(key: string): Promise<void> {
    if (!this.active) return;
    // Coalesced: a write within STATUS_MIN_INTERVAL_MS of the last waits for its end, and then writes what is.
    const wait = this.flushing ? 0 : (this.lastWrite.get(key) ?? -Infinity) + STATUS_MIN_INTERVAL_MS - Date.now();
    if (wait > 0) {
      this.deferred.add(key);
      return this.statusQueue.addAfter(key, wait);
    }
    this.deferred.delete(key);
    const [kind, name] = [key.slice(0, 2), key.slice(3)];
    let written: boolean;
    if (kind === 'mp') {
      const obj = this.platforms.get(name);
      if (!obj) return void this.lastWrite.delete(key);
      written = await this.patch(MEDIAPLATFORM_PLURAL, name, obj.status, this.platformStatus(name, obj));
    } else {
      const obj = this.pools.get(name);
      if (!obj) return void this.lastWrite.delete(key);
      written = await this.patch(PROXYPOOL_PLURAL, name, obj.status, this.poolStatus(name, obj));
    }
    if (written) this.lastWrite.set(key, Date.now());
  }

  private platformStatus(name: string, obj: MediaPlatform): MediaPlatformStatus {
    const r = this.runtime(name);
    const now = this.now();
    const spec = r.spec;
    const counts = r.admission.counts();
    const breaker = spec ? breakerState(r.breaker, spec.breaker, now) : (r.breaker.breaker ?? 'Closed');
    const problem = !spec ? 'the spec is invalid' : spec.proxyPool && !this.poolSpec(spec.proxyPool) ? `ProxyPool ${spec.proxyPool} does not exist or is invalid` : undefined;
    const ready: Omit<Condition, 'lastTransitionTime'> = problem
      ? { type: 'Ready', status: 'False', reason: 'Invalid', message: `Jobs of the platform wait: ${problem}`, observedGeneration: obj.metadata.generation }
      : breaker !== 'Closed'
        ? { type: 'Ready', status: 'False', reason: `Breaker${breaker}`, message: 'The platform answered with defences: new jobs wait for the breaker', observedGeneration: obj.metadata.generation }
        : { type: 'Ready', status: 'True', reason: obj.spec.disabled ? 'Disabled' : 'Admitting', message: obj.spec.disabled ? 'New jobs are refused' : 'Jobs are admitted', observedGeneration: obj.metadata.generation };
    return {
      breaker, ...(r.breaker.openedAt && { openedAt: r.breaker.openedAt }), ...(r.breaker.recentDefences?.length && { recentDefences: r.breaker.recentDefences }),
      ...(r.breaker.probe && { probe: r.breaker.probe }), running: counts.running, waiting: counts.waiting,
      ...(r.cookies.length && { cookies: r.cookies.map((c) => ({ ...c })) }), ...(r.cookiesVersion && { cookiesVersion: r.cookiesVersion }),
      ...(obj.metadata.generation !== undefined && { observedGeneration: obj.metadata.generation }),
      conditions: [withTime(ready, obj.status?.conditions, now)],
    };
  }

  private poolStatus(name: string, obj: ProxyPool): ProxyPoolStatus {
    const now = this.now();
    const pool = this.poolSpec(name);
    const proxies = (pool ? this.proxyStatuses(name, pool) : []).map((p) => {
      const state = proxyStateAt(p, now);
      const { coolingUntil, ...rest } = p;
      return { ...rest, state, ...(state === 'CoolingDown' && coolingUntil && { coolingUntil }) };
    });
    const ready = proxies.filter((p) => p.state === 'Ready').length;
    const cond: Omit<Condition, 'lastTransitionTime'> = !pool
      ? { type: 'Ready', status: 'False', reason: 'Invalid', message: 'The spec is invalid', observedGeneration: obj.metadata.generation }
      : ready
        ? { type: 'Ready', status: 'True', reason: 'ProxiesReady', message: `${ready} of ${proxies.length} proxies Ready`, observedGeneration: obj.metadata.generation }
        : { type: 'Ready', status: 'False', reason: 'AllCoolingDown', message: 'Every proxy cools down after a defence', observedGeneration: obj.metadata.generation };
    return {
      proxies, ready, total: proxies.length,
      ...(obj.metadata.generation !== undefined && { observedGeneration: obj.metadata.generation }),
      conditions: [withTime(cond, obj.status?.conditions, now)],
    };
  }

  /** A status write when something other than the conditions' times changed; whether one was sent. */
  private async patch(plural: string, name: string, cur: object | undefined, desired: Record<string, unknown>): Promise<boolean> {
    if (sameStatus(cur, desired)) return false;
    const dropped = Object.keys(cur ?? {}).filter((k) => desired[k] === undefined);
    const body = { status: { ...desired, ...Object.fromEntries(dropped.map((k) => [k, null])) } };
    try {
      await this.d.kube.custom.patchClusterCustomObjectStatus({ group: GROUP, version: VERSION, plural, name, body }, MERGE_PATCH);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    return true;
  }

  private snapshot(): PlatformSnapshot {
    const now = this.now();
    return {
      platforms: [...this.runtimes.values()].filter((r) => this.platforms.get(r.name)).map((r) => ({
        platform: r.name, breaker: r.spec ? breakerState(r.breaker, r.spec.breaker, now) : 'Closed', ...r.admission.counts(),
        cookies: r.cookies.map((c) => ({ id: c.id, healthy: c.healthy })),
      })),
      pools: this.pools.list().flatMap((p) => {
        const spec = this.poolSpec(p.metadata.name!);
        return spec ? [{ pool: p.metadata.name!, proxies: this.proxyStatuses(p.metadata.name!, spec).map((x) => ({ id: x.id, ready: proxyStateAt(x, now) === 'Ready' })) }] : [];
      }),
    };
  }
}

function isDefenceKind(k: string): k is NonNullable<ProxyStatus['lastDefenceKind']> {
  return ['bot_check', 'sign_in', 'rate_limited', 'captcha', 'forbidden', 'expired_url'].includes(k);
}

/** A condition with the transition time it had when its status did not change. */
function withTime(c: Omit<Condition, 'lastTransitionTime'>, prev: Condition[] | undefined, now: number): Condition {
  const before = prev?.find((p) => p.type === c.type);
  return { ...c, lastTransitionTime: before && before.status === c.status ? before.lastTransitionTime : iso(now) };
}

function sameStatus(a: object | undefined, b: object): boolean {
  const norm = (s: object | undefined) => JSON.stringify(Object.entries(s ?? {}).sort(([x], [y]) => (x < y ? -1 : 1))
    .map(([k, v]) => [k, k === 'conditions' ? (v as Condition[]).map(({ lastTransitionTime: _t, ...c }) => c) : v]));
  return norm(a) === norm(b);
}
