// The MediaBatch controller (issue 13): an informer enqueues "namespace/name"
// keys of MediaBatches, and each pass makes sure the batch has its row in
// Postgres (kubectl-applied ones are recorded here: batch-record.ts), creates
// the episode MediaJobs of a processing batch a page at a time at the shared
// rate (batch-episodes.ts, batch-rate.ts), and mirrors the row's kept counts
// into the MediaBatch's status (batch-status.ts). It says when to look again
// (lib/src/reconcile.ts): after the rate allows another page, or soon while
// the batch is paused or processing, since its counts move as its episodes
// end. Those counts, the batch's status and batch_completed are the rollup's
// in lib/src/db/batches.ts (run when an episode's job row ends); running the
// episodes is the MediaJob controller's.
//
// A failure no retry mends (a spec the CRD's rules refuse, an owner that is
// not an active key, a URL that is no show or playlist) is thrown as a
// PermanentError and recorded in one place, recordFailure(): Accepted=False
// with the reason, once per spec generation, so the batch is not fetched
// again until its spec changes. The spec is checked first of all
// (lib/src/mediajob/spec-check.ts), since the apiserver may not have: a CRD
// installed without its rules, an object stored before a rule existed.
import type * as k8s from '@kubernetes/client-node';
import type pg from 'pg';
import { BatchSources, batchSourcesOptions } from '@mediajobs/lib/batches/index';
import { getBatch, startBatch, type BatchRecord } from '@mediajobs/lib/db/batches';
import { isNotFound, MERGE_PATCH } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { mediaInfoOptions } from '@mediajobs/lib/media-info/config';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { INVALID_SPEC, invalidSpecMessage, mediaBatchSpecProblems } from '@mediajobs/lib/mediajob/spec-check';
import { DONE, PermanentError, type ReconcileResult } from '@mediajobs/lib/reconcile';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import { WorkQueue } from '@mediajobs/lib/work-queue';
import { GROUP, MEDIABATCH_PLURAL, VERSION, type MediaBatch, type MediaBatchStatus, type Owned } from '@mediajobs/lib/mediajob/types';
import { createEpisodePage, type PageResult } from './batch-episodes.js';
import { CreationRate } from './batch-rate.js';
import { batchIdOf, recordManifestBatch, type BatchRecorderDeps } from './batch-record.js';
import { batchStatusChanged, deriveBatchStatus, rejectedBatchStatus, rejectedForGeneration } from './batch-status.js';
import type { OperatorConfig } from './config.js';
import type { EventRecorder } from './events.js';
import type { OperatorMetrics } from './metrics.js';
import type { NamespaceOwners } from './namespace-owners.js';
import { customResourceWatch, ScopedInformer, watchScope } from './watch-scope.js';
import type { Kube } from './kube.js';
import { Announced, mediaBatchRef, mediaBatchTransition } from './transition-events.js';

export interface BatchControllerDeps {
  kube: Kube;
  pool: pg.Pool;
  box: SecretBox;
  log: Logger;
  cfg: OperatorConfig;
  /** Expansion of kubectl-applied shows and playlists; built from cfg when absent. */
  sources?: BatchSources;
  /** Kubernetes Events at the batch's transitions (transition-events.ts). */
  events: EventRecorder;
  /** Who each manifest acts for (namespace-owners.ts). */
  owners: NamespaceOwners;
  metrics?: OperatorMetrics;
}

/** MediaBatches reconciled at once: each pass is a few queries and at most a page of creations. */
const BATCH_CONCURRENCY = 4;

const keyOf = (ns: string | undefined, name: string | undefined) => `${ns}/${name}`;

/**
 * A spec the CRD's rules refuse, which reached the operator because the
 * apiserver did not apply them, is rejected (invalid_spec, the fields
 * named) before anything is recorded or fetched. Checked until the batch is
 * accepted: its recording is all that reads its options and episodes.
 */
function checkSpec(mb: MediaBatch): void {
  if (mb.status?.conditions?.some((c) => c.type === 'Accepted' && c.status === 'True')) return;
  const problems = mediaBatchSpecProblems(mb.spec);
  if (problems.length) throw new PermanentError(INVALID_SPEC, invalidSpecMessage(problems));
}

export class MediaBatchController {
  readonly queue: WorkQueue;
  private readonly batches: ScopedInformer<MediaBatch & k8s.KubernetesObject>;
  private readonly rate: CreationRate;
  private readonly recorder: BatchRecorderDeps;
  /** Transitions announced as Events, per MediaBatch key. */
  private readonly announced = new Announced();
  private active = false;

  constructor(private readonly d: BatchControllerDeps) {
    const { kube, cfg, log } = d;
    this.rate = new CreationRate(cfg.BATCH_CREATE_PER_SECOND, cfg.BATCH_CREATE_PAGE);
    const sources = d.sources ?? new BatchSources(batchSourcesOptions(cfg, mediaInfoOptions(cfg), new OutboundPolicy({ allowed: cfg.OUTBOUND_ALLOWED_CIDRS })));
    this.recorder = { pool: d.pool, box: d.box, sources, maxEpisodes: cfg.MAX_PLAYLIST_SIZE };
    this.queue = new WorkQueue((key) => this.reconcile(key), {
      concurrency: BATCH_CONCURRENCY,
      retryBaseMs: 500,
      retryMaxMs: 60_000,
      onError: (key, err) => log.warn({ mediabatch: key, err: errFields(err) }, 'batch reconcile failed; will retry'),
      onPermanent: (key, err) => this.recordFailure(key, err),
      ...(d.metrics && { metrics: d.metrics.workQueue('mediabatches', () => this.queue.inFlightSince()) }),
    });
    this.batches = new ScopedInformer(watchScope(cfg), (ns) => ({
      ...(d.metrics && { metrics: d.metrics }),
      kc: kube.kc, resyncMs: cfg.RESYNC_SECONDS * 1000, watchdogMs: cfg.WATCHDOG_SECONDS * 1000, relistMs: cfg.RELIST_SECONDS * 1000, log,
      name: 'mediabatches',
      ...customResourceWatch(kube.custom, MEDIABATCH_PLURAL, ns),
      onChange: (mb) => this.enqueue(keyOf(mb.metadata?.namespace, mb.metadata?.name)),
      onResync: () => this.enqueueAll(),
    }));
  }

  /** Start the informer; its cache is warm (listed) when this resolves. */
  startInformers(): Promise<void> {
    return this.batches.start();
  }

  stopInformers(): Promise<void> {
    return this.batches.stop();
  }

  /** The informers whose cache does not follow the API server now (the operator's readiness, probes.ts). */
  informersNotFollowing(): string[] {
    return this.batches.following() ? [] : ['mediabatches'];
  }

  /** Begin reconciling (on becoming leader): pass over every MediaBatch. */
  activate(): void {
    this.active = true;
    this.enqueueAll();
  }

  deactivate(): void {
    this.active = false;
  }

  /** Stop reconciling; resolves when the passes in flight have ended. */
  stop(): Promise<void> {
    this.active = false;
    return this.queue.stop();
  }

  /** A paused gateway batch was started (its row moved; the materializer heard it): create its episodes now. */
  started(namespace: string, name: string): void {
    this.enqueue(keyOf(namespace, name));
  }

  private enqueue(key: string): void {
    if (this.active && !key.endsWith('/undefined')) this.queue.add(key);
  }

  private enqueueAll(): void {
    for (const mb of this.batches.list()) this.enqueue(keyOf(mb.metadata.namespace, mb.metadata.name));
  }

  // ---- one pass ------------------------------------------------------------

  /** One pass over a MediaBatch: its row, its next page of episode MediaJobs, its status; and when to look again. */
  async reconcile(key: string): Promise<ReconcileResult> {
    const found = this.current(key);
    if (!found || rejectedForGeneration(found)) return DONE;
    checkSpec(found);
    const mb = this.d.owners.resolve(found);
    const row = await this.row(mb);
    // The row is the truth of a gateway batch (POST /batch/{id}/start moves
    // only the row; the object is unpaused here to say so); a manifest's spec is its own.
    const heldBySpec = !mb.spec.batchId && mb.spec.paused && row.status === 'processing';
    if (mb.spec.batchId && mb.spec.paused && row.status !== 'paused') await this.unpause(mb);
    let page: PageResult | undefined;
    if (row.status === 'processing' && !heldBySpec) page = await createEpisodePage({ custom: this.d.kube.custom, pool: this.d.pool, rate: this.rate }, mb, row.id, row.kind);
    const creating = !page ? 'paused' : page.more ? 'more' : 'done';
    await this.writeStatus(mb, deriveBatchStatus({ mb, row, creating, heldBySpec }, new Date()));
    if (page?.more) return { requeueAfter: Math.max(50, this.rate.msUntil()) };
    const open = row.status === 'paused' || row.status === 'processing';
    return open ? { requeueAfter: this.d.cfg.BATCH_STATUS_SECONDS * 1000 } : DONE;
  }

  /**
   * The batch row, recorded first for a kubectl-applied MediaBatch. A
   * manifest batch is started by its own spec (paused: false); a gateway
   * batch only by POST /batch/{id}/start, which moves the row.
   */
  private async row(mb: Owned<MediaBatch>): Promise<BatchRecord> {
    const id = batchIdOf(mb);
    let row = await getBatch(this.d.pool, id);
    if (!row) {
      await recordManifestBatch(this.recorder, mb);
      row = await getBatch(this.d.pool, id);
      if (!row) throw new Error(`batch ${id} was recorded but cannot be read`);
      this.d.log.info({ batchId: id, mediabatch: mb.metadata.name, episodes: row.total_episodes }, 'batch applied with kubectl recorded for its owner');
    }
    if (row.api_key_id !== mb.spec.owner.apiKeyId) {
      throw new PermanentError('owner_mismatch', `batch ${id} belongs to another API key than spec.owner.apiKeyId`);
    }
    if (!mb.spec.batchId && row.status === 'paused' && !mb.spec.paused) {
      const started = await startBatch(this.d.pool, id, row.api_key_id);
      if (started.outcome === 'started') row = (await getBatch(this.d.pool, id)) ?? row;
    }
    return row;
  }

  /**
   * The one place a permanent failure is recorded on the MediaBatch:
   * Accepted=False with the error's reason and message. The same failure
   * recorded again writes nothing and is logged once.
   */
  private async recordFailure(key: string, err: PermanentError): Promise<ReconcileResult> {
    const mb = this.current(key);
    if (!mb) return DONE;
    const desired = rejectedBatchStatus(mb, batchIdOf(mb), { reason: err.reason, message: err.message }, new Date());
    if (batchStatusChanged(mb.status, desired)) {
      this.d.log.warn({ mediabatch: key, reason: err.reason, err: errFields(err.cause ?? err) }, 'batch rejected; retrying cannot help');
    }
    await this.writeStatus(mb, desired);
    return DONE;
  }

  /** Merge-patch spec.paused to false on a started gateway batch, so the object says what the row does. */
  private async unpause(mb: MediaBatch): Promise<void> {
    await this.d.kube.custom.patchNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: mb.metadata.namespace!, plural: MEDIABATCH_PLURAL, name: mb.metadata.name!,
      body: { spec: { paused: false } },
    }, MERGE_PATCH);
  }

  /** The MediaBatch cache, for the materializer. */
  hasMediaBatch(namespace: string, name: string): boolean {
    return !!this.batches.get(name, namespace);
  }

  /** The MediaBatch to act on; undefined when not leading, or when it is gone or going. */
  private current(key: string): MediaBatch | undefined {
    if (!this.active) return undefined;
    const [ns, name] = key.split('/') as [string, string];
    const mb = this.batches.get(name, ns);
    if (mb && !mb.metadata.deletionTimestamp) return mb;
    this.announced.forget(key);
    return undefined;
  }

  private async writeStatus(mb: MediaBatch, desired: MediaBatchStatus): Promise<void> {
    if (!batchStatusChanged(mb.status, desired)) return;
    // Only the fields that changed: a 500-episode batch's episodeJobs need not travel with every count.
    const changed = Object.fromEntries(Object.entries(desired)
      .filter(([k, v]) => JSON.stringify(v) !== JSON.stringify(mb.status?.[k as keyof MediaBatchStatus])));
    try {
      await this.d.kube.custom.patchNamespacedCustomObjectStatus({
        group: GROUP, version: VERSION, namespace: mb.metadata.namespace!, plural: MEDIABATCH_PLURAL, name: mb.metadata.name!,
        body: { status: changed },
      }, MERGE_PATCH);
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    const key = `${mb.metadata.namespace}/${mb.metadata.name}`;
    for (const a of this.announced.fresh(key, mediaBatchTransition(mb.status, desired))) {
      this.d.events.event(mediaBatchRef(mb), a.type, a.reason, a.message);
    }
  }
}
