// The gateway's own yt-dlp runs through the MediaPlatforms (issue 37 item 5,
// docs/adr/0027 "The gateway's lookups"): a URL of POST /metadata, POST
// /is-short or a playlist expansion that belongs to a platform goes out as
// the platform's jobs do. Each run takes:
// - a session of the platform's ProxyPool: a Ready proxy (the health the
//   operator writes into the pool's status), the one this replica used
//   least in the last minute, never the previous run's while another is
//   Ready (is-short's rule 3: the full run's "new proxy session"), its URL
//   from the pool or its Secret with the session in the user name, behind an
//   egress of its own under the gateway's outbound policy (the runner's chain);
// - one of the platform's cookie files in rotation, healthy ones first,
//   copied to a private temporary file (yt-dlp writes its cookie jar back
//   to --cookies), removed when the run ends;
// - the platform's ytdlpArgs.
// The operator decides about defences: a lookup neither cools a proxy nor
// counts against the breaker. Secrets are read by name (get), kept 15 s,
// as the operator reads them; no error here names a secret's content.
import * as k8s from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiStatus, isNotFound, keepAliveTransport, loadKubeConfig, makeKubeClient } from '@mediajobs/lib/kube-client';
import type { Logger } from '@mediajobs/lib/logger';
import type { LookupRoute, LookupRoutes, RunningLookupEgress } from '@mediajobs/lib/media-info/index';
import type { PlatformRouting } from '@mediajobs/lib/platforms/directory';
import { pickCookie, pickProxy, proxyStateAt, upstreamUrl } from '@mediajobs/lib/platforms/routing';
import {
  mediaPlatformSpecSchema, namesProxyOption, proxyPoolSpecSchema, refusedYtdlpOptions, type ProxyPoolSpec, type ProxyStatus,
} from '@mediajobs/lib/platforms/types';

/** A Secret read is kept this long: a burst of lookups costs one GET. */
const SECRET_TTL_MS = 15_000;
const MINUTE_MS = 60_000;

/** A Secret's data, decoded; undefined when it does not exist. */
export type SecretRead = (namespace: string, name: string) => Promise<Record<string, string> | undefined>;

export interface PlatformLookupsDeps {
  platforms: PlatformRouting;
  egress: Pick<RunningLookupEgress, 'chained'>;
  readSecret: SecretRead;
  log: Logger;
  now?: () => number;
}

/** A route of ours: the session it took, for the next run's to follow. */
type Route = LookupRoute & { session?: string };

/** Secrets read with `get` from the gateway's kubeconfig (KUBECONFIG, else in-cluster). */
export function kubeSecretReader(kubeconfig: string | undefined, timeoutMs = 10_000): SecretRead {
  const core = makeKubeClient(loadKubeConfig(kubeconfig), k8s.CoreV1Api, keepAliveTransport({ maxSockets: 4, timeoutMs }));
  return async (namespace, name) => {
    try {
      const s = await core.readNamespacedSecret({ name, namespace });
      return Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      // The client's error may carry the apiserver's body; ours says what failed and nothing more.
      const status = apiStatus(err);
      throw new Error(`reading Secret ${namespace}/${name} failed${status ? ` (HTTP ${status})` : ''}`);
    }
  };
}

export class PlatformLookups implements LookupRoutes {
  private readonly now: () => number;
  private readonly secrets = new Map<string, { at: number; data: Record<string, string> | undefined }>();
  /** By `<pool>/<proxy id>`: this replica's runs through it in the last minute. */
  private readonly starts = new Map<string, number[]>();
  private cookieTurn = 0;

  constructor(private readonly d: PlatformLookupsDeps) {
    this.now = d.now ?? Date.now;
  }

  async open(url: string, previous?: LookupRoute): Promise<LookupRoute | undefined> {
    const platform = this.d.platforms.platformFor(url);
    if (!platform) return undefined;
    const name = platform.metadata.name ?? '';
    const parsed = mediaPlatformSpecSchema.safeParse(platform.spec);
    if (!parsed.success) throw new Error(`MediaPlatform ${name} is invalid`);
    const spec = parsed.data;
    const extra = spec.ytdlpArgs ?? [];
    // The CRD refuses these; a CRD installed without its rules does not, and the run must not go around the pool.
    if (namesProxyOption(extra) || refusedYtdlpOptions(extra).length) throw new Error(`MediaPlatform ${name}'s ytdlpArgs name options a platform may not set`);
    const session = nextSession((previous as Route | undefined)?.session);
    const closers: (() => Promise<void>)[] = [];
    const close = async () => {
      for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
    };
    try {
      const args = [...extra];
      if (spec.cookies) {
        const file = await this.cookieFile(name, spec.cookies.secretRef, platform.status?.cookies, closers);
        if (file) args.push('--cookies', file);
      }
      let proxy: { id: string; url: string } | undefined;
      if (spec.proxyPool) {
        proxy = await this.proxy(spec.proxyPool, session, previous?.proxyId);
        const chain = await this.d.egress.chained(proxy.url);
        closers.push(() => chain.close());
        const route: Route = { platform: name, args, proxyUrl: chain.proxyUrl(session), proxyId: proxy.id, session, close };
        return route;
      }
      const route: Route = { platform: name, args, session, close };
      return route;
    } catch (err) {
      await close();
      throw err;
    }
  }

  /** A proxy of the pool and its upstream URL with `session` in it; the pick is counted at once. */
  private async proxy(poolName: string, session: string, avoid: string | undefined): Promise<{ id: string; url: string }> {
    const obj = this.d.platforms.pool(poolName);
    const parsed = proxyPoolSpecSchema.safeParse(obj?.spec);
    if (!obj || !parsed.success) throw new Error(`ProxyPool ${poolName} does not exist or is invalid`);
    const pool: ProxyPoolSpec = parsed.data;
    const now = this.now();
    const health = new Map((obj.status?.proxies ?? []).map((p) => [p.id, p]));
    const all: Pick<ProxyStatus, 'id' | 'coolingUntil'>[] = pool.proxies.map((p) => health.get(p.id) ?? { id: p.id });
    const ready = all.filter((p) => proxyStateAt(p, now) === 'Ready');
    // Every proxy cooling down: a lookup cannot wait as a job does, so all are candidates (their cool-down left
    // out, or pickProxy would refuse them again); a new session leaves by another candidate while there is one.
    const candidates = ready.length ? ready : all.map(({ id }) => ({ id }));
    const fresh = candidates.filter((p) => p.id !== avoid);
    const pick = pickProxy(fresh.length ? fresh : candidates, (id) => this.recentStarts(poolName, id, now), now);
    if ('wait' in pick) throw new Error(`ProxyPool ${poolName} has no proxy to take`);
    const key = `${poolName}/${pick.id}`;
    this.starts.set(key, [...(this.starts.get(key) ?? []), now]);
    const spec = pool.proxies.find((p) => p.id === pick.id)!;
    let raw = spec.url;
    if (raw === undefined) {
      const ref = spec.urlSecretRef!;
      raw = (await this.secret(ref.namespace, ref.name))?.[ref.key]?.trim();
      if (raw === undefined) throw new Error(`ProxyPool ${poolName} proxy ${pick.id}: Secret ${ref.namespace}/${ref.name} or its key ${ref.key} does not exist`);
    }
    return { id: pick.id, url: upstreamUrl(raw, pool.session?.usernameTemplate, session) };
  }

  private recentStarts(pool: string, id: string, now: number): number {
    const key = `${pool}/${id}`;
    const recent = (this.starts.get(key) ?? []).filter((t) => t > now - MINUTE_MS);
    if (recent.length) this.starts.set(key, recent);
    else this.starts.delete(key);
    return recent.length;
  }

  /** One of the platform's cookie files, copied to a private directory that `closers` removes. */
  private async cookieFile(
    platform: string, ref: { namespace: string; name: string }, health: { id: string; healthy: boolean }[] | undefined, closers: (() => Promise<void>)[],
  ): Promise<string | undefined> {
    const files = await this.secret(ref.namespace, ref.name);
    if (!files) throw new Error(`MediaPlatform ${platform}: cookie Secret ${ref.namespace}/${ref.name} does not exist`);
    const id = pickCookie(Object.keys(files), health, this.cookieTurn++);
    if (id === undefined) return undefined;
    const dir = await mkdtemp(join(tmpdir(), 'mediajobs-cookies-'));
    closers.push(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'cookies.txt');
    await writeFile(file, files[id]!, { mode: 0o600 });
    return file;
  }

  private async secret(namespace: string, name: string): Promise<Record<string, string> | undefined> {
    const key = `${namespace}/${name}`;
    const now = this.now();
    const cached = this.secrets.get(key);
    if (cached && now - cached.at < SECRET_TTL_MS) return cached.data;
    const data = await this.d.readSecret(namespace, name);
    this.secrets.set(key, { at: now, data });
    return data;
  }
}

/** `<12 hex>-<n>`: a lookup's runs share the prefix and count up, so a provider's log shows one lookup's sessions together. */
function nextSession(previous: string | undefined): string {
  const m = previous && /^([0-9a-f]{12})-(\d+)$/.exec(previous);
  return m ? `${m[1]}-${Number(m[2]) + 1}` : `${randomBytes(6).toString('hex')}-1`;
}
