// Nothing lost between the gateway's INSERT and its MediaJob create: a jobs
// row still Pending after a grace period whose MediaJob is not in the cache
// gets its MediaJob created here, from the row's stored options.
import * as k8s from '@kubernetes/client-node';
import type { StrandedJob } from '@mediajobs/lib/db/jobs';
import { isAlreadyExists } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { buildMediaJob } from '@mediajobs/lib/mediajob/build';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';

/** Where stranded rows come from (lib/src/db/jobs.ts strandedPending, bound to a pool). */
export interface StrandedJobs {
  strandedPending(olderThanSeconds: number): Promise<StrandedJob[]>;
}

export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly db: StrandedJobs,
    private readonly custom: k8s.CustomObjectsApi,
    private readonly hasMediaJob: (namespace: string, name: string) => boolean,
    private readonly log: Logger,
    private readonly afterSeconds: number,
    private readonly everyMs = 10_000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  async sweep(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    let created = 0;
    try {
      for (const row of await this.db.strandedPending(this.afterSeconds)) {
        if (this.hasMediaJob(row.cr_namespace, row.cr_name)) continue;
        // The destination the gateway resolved: a stranded job must not fall back to managed storage.
        const body = buildMediaJob({
          jobId: row.id, apiKeyId: row.api_key_id, namespace: row.cr_namespace, options: row.options as unknown as MediaJobOptions,
          ...(row.destination && { destination: row.destination }),
        });
        try {
          await this.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: row.cr_namespace, plural: MEDIAJOB_PLURAL, body });
          created++;
          this.log.info({ jobId: row.id }, 'created the MediaJob of a stranded job');
        } catch (err) {
          if (!isAlreadyExists(err)) this.log.warn({ jobId: row.id, err: errFields(err) }, 'could not create the MediaJob of a stranded job');
        }
      }
    } catch (err) {
      this.log.warn({ err: errFields(err) }, 'sweep failed');
    } finally {
      this.running = false;
    }
    return created;
  }
}
