// The gateway's view of the MediaPlatforms and ProxyPools (docs/adr/0027): a
// copy listed every few seconds, read without I/O while a request is
// answered, so acceptance never waits for Kubernetes (ADR 0017). What the
// copy is used for is the caller's (the create path refuses a disabled
// platform's jobs; the lookups route a platform's URLs through its pool,
// api-gateway/src/platform-lookups.ts, reading the health the operator
// writes into both statuses);
// the operator keeps its own watch and fails a disabled platform's
// MediaJob in any case, so a copy a few seconds old lets nothing run.
import * as k8s from '@kubernetes/client-node';
import { isNotFound } from '../kube-client.js';
import type { Logger } from '../logger.js';
import { errFields } from '../logger.js';
import { GROUP, VERSION } from '../mediajob/types.js';
import { MEDIAPLATFORM_PLURAL, PROXYPOOL_PLURAL, platformForUrl, type MediaPlatform, type ProxyPool } from './types.js';

/** What a request handler asks of the platforms. */
export interface PlatformLookup {
  /** Whether the URL's platform refuses new jobs (disabled: true). */
  disabledFor(url: string): boolean;
}

/** What the lookups ask of the platforms and pools. */
export interface PlatformRouting extends PlatformLookup {
  /** The MediaPlatform a URL belongs to (platformForUrl), as last listed. */
  platformFor(url: string): MediaPlatform | undefined;
  /** A ProxyPool by name, as last listed. */
  pool(name: string): ProxyPool | undefined;
}

export class PlatformDirectory implements PlatformRouting {
  private platforms: MediaPlatform[] = [];
  private pools = new Map<string, ProxyPool>();
  private timer: NodeJS.Timeout | undefined;
  private warned = false;

  constructor(private readonly custom: k8s.CustomObjectsApi, private readonly log: Logger, private readonly refreshMs = 5_000) {}

  static fromKubeconfig(path: string | undefined, log: Logger, refreshMs?: number): PlatformDirectory {
    const kc = new k8s.KubeConfig();
    if (path) kc.loadFromFile(path);
    else kc.loadFromDefault();
    return new PlatformDirectory(kc.makeApiClient(k8s.CustomObjectsApi), log, refreshMs);
  }

  /** The first list, then one every refreshMs; a failed list keeps the last copy. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  disabledFor(url: string): boolean {
    return this.platformFor(url)?.spec.disabled === true;
  }

  platformFor(url: string): MediaPlatform | undefined {
    return platformForUrl(this.platforms, url);
  }

  pool(name: string): ProxyPool | undefined {
    return this.pools.get(name);
  }

  private async refresh(): Promise<void> {
    const list = <T>(plural: string) => this.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural }) as Promise<{ items?: T[] }>;
    const [platforms, pools] = await Promise.allSettled([list<MediaPlatform>(MEDIAPLATFORM_PLURAL), list<ProxyPool>(PROXYPOOL_PLURAL)]);
    const failed: unknown[] = [];
    // No CRD installed: none. Anything else: keep the last copy, say it once.
    if (platforms.status === 'fulfilled') this.platforms = platforms.value.items ?? [];
    else if (isNotFound(platforms.reason)) this.platforms = [];
    else failed.push(platforms.reason);
    if (pools.status === 'fulfilled') this.pools = new Map((pools.value.items ?? []).map((p) => [p.metadata.name ?? '', p]));
    else if (isNotFound(pools.reason)) this.pools = new Map();
    else failed.push(pools.reason);
    if (!failed.length) this.warned = false;
    else if (!this.warned) {
      this.warned = true;
      this.log.warn({ err: errFields(failed[0]) }, 'listing MediaPlatforms or ProxyPools failed; the last list is kept');
    }
  }
}
