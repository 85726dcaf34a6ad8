// The gateway's view of the MediaPlatforms (docs/adr/0027): a copy listed
// every few seconds, read without I/O while a request is answered, so
// acceptance never waits for Kubernetes (ADR 0017). What the copy is used
// for is the caller's (the create path refuses a disabled platform's jobs);
// the operator keeps its own watch and fails a disabled platform's
// MediaJob in any case, so a copy a few seconds old lets nothing run.
import * as k8s from '@kubernetes/client-node';
import { isNotFound } from '../kube-client.js';
import type { Logger } from '../logger.js';
import { errFields } from '../logger.js';
import { GROUP, VERSION } from '../mediajob/types.js';
import { MEDIAPLATFORM_PLURAL, platformForUrl, type MediaPlatform } from './types.js';

/** What a request handler asks of the platforms. */
export interface PlatformLookup {
  /** Whether the URL's platform refuses new jobs (disabled: true). */
  disabledFor(url: string): boolean;
}

export class PlatformDirectory implements PlatformLookup {
  private platforms: MediaPlatform[] = [];
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
    return platformForUrl(this.platforms, url)?.spec.disabled === true;
  }

  private async refresh(): Promise<void> {
    try {
      const list = await this.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: MEDIAPLATFORM_PLURAL }) as { items?: MediaPlatform[] };
      this.platforms = list.items ?? [];
      this.warned = false;
    } catch (err) {
      // No CRD installed: no platforms. Anything else: keep the last copy, say it once.
      if (isNotFound(err)) this.platforms = [];
      else if (!this.warned) {
        this.warned = true;
        this.log.warn({ err: errFields(err) }, 'listing MediaPlatforms failed; the last list is kept');
      }
    }
  }
}
