// Nothing lost between the gateway's INSERT and its create of the custom
// resource: a jobs row still Pending after a grace period whose MediaJob is
// not in the cache gets its MediaJob created here, from the row's stored
// options; a batch whose MediaBatch is missing gets it the same way (its
// episodes' MediaJobs are then the batch controller's).
import type * as k8s from '@kubernetes/client-node';
import type { StrandedBatch } from '@mediajobs/lib/db/batches';
import type { StrandedJob } from '@mediajobs/lib/db/jobs';
import { isAlreadyExists } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { buildMediaBatch, buildMediaJob } from '@mediajobs/lib/mediajob/build';
import {
  GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type BatchOptions, type MediaJobOptions,
} from '@mediajobs/lib/mediajob/types';

/** Where stranded rows come from (lib/src/db: strandedPending and strandedBatches, bound to a pool). */
export interface StrandedRows {
  jobs(olderThanSeconds: number): Promise<StrandedJob[]>;
  batches(olderThanSeconds: number): Promise<StrandedBatch[]>;
}

/** What the informer caches hold. */
export interface ResourceCaches {
  hasMediaJob(namespace: string, name: string): boolean;
  hasMediaBatch(namespace: string, name: string): boolean;
}

export interface SweeperDeps {
  rows: StrandedRows;
  custom: k8s.CustomObjectsApi;
  caches: ResourceCaches;
  log: Logger;
  afterSeconds: number;
  everyMs?: number;
}

export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(private readonly d: SweeperDeps) {}

  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.d.everyMs ?? 10_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** One pass; returns how many resources it created. */
  async sweep(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    try {
      return (await this.sweepJobs()) + (await this.sweepBatches());
    } catch (err) {
      this.d.log.warn({ err: errFields(err) }, 'sweep failed');
      return 0;
    } finally {
      this.running = false;
    }
  }

  private async sweepJobs(): Promise<number> {
    let created = 0;
    for (const row of await this.d.rows.jobs(this.d.afterSeconds)) {
      if (this.d.caches.hasMediaJob(row.cr_namespace, row.cr_name)) continue;
      // The destination the gateway resolved: a stranded job must not fall back to managed storage.
      const body = buildMediaJob({
        jobId: row.id, apiKeyId: row.api_key_id, organizationId: row.organization_id, namespace: row.cr_namespace,
        options: row.options as unknown as MediaJobOptions,
        ...(row.destination && { destination: row.destination }),
      });
      if (await this.create(MEDIAJOB_PLURAL, row.cr_namespace, body, { jobId: row.id })) created++;
    }
    return created;
  }

  private async sweepBatches(): Promise<number> {
    let created = 0;
    for (const row of await this.d.rows.batches(this.d.afterSeconds)) {
      if (this.d.caches.hasMediaBatch(row.cr_namespace, row.cr_name)) continue;
      const body = buildMediaBatch({
        batchId: row.id, apiKeyId: row.api_key_id, organizationId: row.organization_id, namespace: row.cr_namespace, kind: row.kind, showUrl: row.show_url,
        paused: row.status === 'paused', options: row.options as unknown as BatchOptions,
        ...(row.folder !== null && { folder: row.folder }), ...(row.destination && { destination: row.destination }),
      });
      if (await this.create(MEDIABATCH_PLURAL, row.cr_namespace, body, { batchId: row.id })) created++;
    }
    return created;
  }

  /** Create one resource; AlreadyExists is someone else having done it (false), other failures are logged and retried next pass. */
  private async create(plural: string, namespace: string, body: object, ids: Record<string, string>): Promise<boolean> {
    try {
      await this.d.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural, body });
      this.d.log.info({ ...ids, plural }, 'created the resource of a stranded row');
      return true;
    } catch (err) {
      if (!isAlreadyExists(err)) this.d.log.warn({ ...ids, plural, err: errFields(err) }, 'could not create the resource of a stranded row');
      return false;
    }
  }
}
