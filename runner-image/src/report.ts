// How the runner tells the operator what is happening: merge patches of the
// MediaJob's /status subresource while it works, and the final report again
// in the termination message. A status patch that fails never fails the
// job: the termination message and the exit code carry the outcome anyway.
import { existsSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { isIPv6 } from 'node:net';
import path from 'node:path';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type JobStep, type MediaJobStatus, type RunnerDownload, type RunnerReport } from '@mediajobs/lib/mediajob/types';

/** The status fields the runner owns (spine.md): everything else is the operator's. */
export type RunnerStatus = Pick<
  MediaJobStatus, 'step' | 'progress' | 'expectedBytes' | 'result' | 'error' | 'errorType' | 'errorDetail' | 'reason' | 'category' | 'phaseSeconds'
  | 'defence' | 'tools' | 'download'
>;
/**
 * A merge patch of those fields; null removes a field (left over from an
 * earlier attempt of the pod). storedFiles merges key by key: bytes record a
 * stored file, null forgets one the runner deleted.
 */
export type RunnerStatusPatch = { [K in keyof RunnerStatus]?: RunnerStatus[K] | null } & { storedFiles?: Record<string, number | null> };

export interface StatusSink {
  patch(status: RunnerStatusPatch): Promise<void>;
}

export interface StatusReporterOptions {
  namespace: string;
  name: string;
  logger: Logger;
  /** A sink other than the Kubernetes API (tests). */
  sink?: StatusSink;
  /** Attempts for step changes and the final report. */
  attempts?: number;
  /** Base of the exponential backoff between attempts, ms. */
  backoffMs?: number;
  /**
   * Attempts for a stored file's patch (default 8: with the default backoff
   * about 32 s, as long as the runner waits for its final report). The
   * operator deletes a lost attempt's files only if it heard of them, so this
   * patch outlasts an API server restart that a step change need not.
   */
  storedFileAttempts?: number;
  /** Minimum interval between two progress-only patches, ms. */
  progressIntervalMs?: number;
  /**
   * Minimum interval between two patches that change only the download's
   * figures (status.download), ms: yt-dlp's figures change with every
   * progress line, and each patch is an API write, a row update and a watch
   * event. A percent or step change carries the latest figures anyway.
   */
  figuresIntervalMs?: number;
  /** One attempt is abandoned after this long: a hung API server must not hold the job up. */
  requestTimeoutMs?: number;
}

/** The ServiceAccount volume of a pod: token, CA and namespace files. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The API server as a pod sees it, and its credentials. */
export interface InClusterTarget {
  server: string;
  /** Absent for a plain-HTTP server (ports 80, 8080, 8001, as client-node decides). */
  caFile?: string;
  tokenFile: string;
}

/**
 * The in-cluster configuration, exactly when client-node's loadFromDefault
 * would choose it: no $KUBECONFIG, no ~/.kube/config, and a ServiceAccount
 * token. Undefined otherwise; any kubeconfig then goes to client-node, which
 * keeps every kubeconfig feature (contexts, client certificates, exec and
 * OIDC plugins).
 */
export function inClusterTarget(env: NodeJS.ProcessEnv = process.env, dir = SERVICE_ACCOUNT_DIR): InClusterTarget | undefined {
  if (env.KUBECONFIG) return undefined;
  if (env.HOME && existsSync(path.join(env.HOME, '.kube', 'config'))) return undefined;
  const tokenFile = path.join(dir, 'token');
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port || !existsSync(tokenFile)) return undefined;
  const plain = port === '80' || port === '8080' || port === '8001';
  return {
    server: `${plain ? 'http' : 'https'}://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    ...(plain ? {} : { caFile: path.join(dir, 'ca.crt') }),
    tokenFile,
  };
}

/** How long a read ServiceAccount token is used before it is read again (client-go's and client-node's interval). */
const TOKEN_REREAD_MS = 60_000;
const PATCH_TIMEOUT_MS = 10_000;

/**
 * The status merge patch in a pod: one PATCH with the ServiceAccount token,
 * over node:https with the cluster's CA, which is all client-node's
 * in-cluster configuration amounts to. client-node itself costs about a
 * second of CPU to load and 60 MB of resident memory (measured: the runner's
 * node process peaks at ~97 MB without it, ~157 MB with it), a third of the
 * runner's memory budget for one request type. The token is re-read as it
 * rotates (projected tokens are renewed hourly).
 */
export function inClusterSink(target: InClusterTarget, namespace: string, name: string): StatusSink {
  const url = new URL(`/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/${MEDIAJOB_PLURAL}/${encodeURIComponent(name)}/status`, target.server);
  const secure = url.protocol === 'https:';
  let agent: http.Agent | undefined;
  let token: { value: string; readAt: number } | undefined;
  return {
    async patch(status) {
      if (!agent) {
        const ca = target.caFile ? await readFile(target.caFile) : undefined;
        agent = secure ? new https.Agent({ keepAlive: true, ...(ca ? { ca } : {}) }) : new http.Agent({ keepAlive: true });
      }
      if (!token || Date.now() - token.readAt > TOKEN_REREAD_MS) token = { value: (await readFile(target.tokenFile, 'utf8')).trim(), readAt: Date.now() };
      const body = JSON.stringify({ status });
      await new Promise<void>((resolve, reject) => {
        const req = (secure ? https : http).request(url, {
          method: 'PATCH',
          agent,
          headers: {
            'Content-Type': 'application/merge-patch+json',
            Accept: 'application/json',
            Authorization: `Bearer ${token!.value}`,
            'Content-Length': Buffer.byteLength(body),
          },
        }, (res) => {
          res.resume();
          res.on('error', reject);
          res.on('end', () => {
            const code = res.statusCode ?? 0;
            // The code is what StatusReporter retries on; the body (which may echo the object) stays out of the error.
            if (code >= 200 && code < 300) resolve();
            else reject(Object.assign(new Error(`status patch answered HTTP ${code}`), { code }));
          });
        });
        req.setTimeout(PATCH_TIMEOUT_MS, () => req.destroy(new Error(`status patch timed out after ${PATCH_TIMEOUT_MS} ms`)));
        req.on('error', reject);
        req.end(body);
      });
    },
  };
}

/**
 * The Kubernetes API as a StatusSink: JSON merge patch of /status. In a pod
 * (in-cluster configuration) through inClusterSink; with a kubeconfig
 * (local mode, a developer's cluster) through client-node, loaded only then.
 * Rejects when there is no usable client configuration.
 */
export async function kubernetesSink(namespace: string, name: string, env: NodeJS.ProcessEnv = process.env): Promise<StatusSink> {
  const target = inClusterTarget(env);
  if (target) return inClusterSink(target, namespace, name);
  const { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const api = kc.makeApiClient(CustomObjectsApi);
  // client-node 1.4 sends JSON Patch by default; the Content-Type header
  // middleware is how it takes a merge patch.
  const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  return {
    async patch(status) {
      await api.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace, plural: MEDIAJOB_PLURAL, name, body: { status } },
        mergePatch,
      );
    },
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/**
 * Serialised status reporting. Patches go out one at a time in the order
 * they were asked for, so a progress update can never land after the step
 * change that followed it.
 */
export class StatusReporter {
  private chain: Promise<void> = Promise.resolve();
  /** The sink once it is set up; undefined when reporting is off. */
  private readonly sink: Promise<StatusSink | undefined>;
  private readonly attempts: number;
  private readonly storedFileAttempts: number;
  private readonly backoffMs: number;
  private readonly progressIntervalMs: number;
  private readonly figuresIntervalMs: number;
  private readonly requestTimeoutMs: number;
  private lastProgressAt = 0;
  /** When figures last went out (with any patch). */
  private lastFiguresAt = 0;
  /** When the pending progress timer fires, to bring it forward for a percent step. */
  private progressDue = 0;
  private step: JobStep | undefined;
  private progress = -1;
  private pendingProgress: number | undefined;
  /** The download's figures waiting for the next progress patch, and the last ones sent (as JSON). */
  private pendingDownload: RunnerDownload | undefined;
  private sentDownload = '';
  private progressTimer: NodeJS.Timeout | undefined;
  /** Patches that failed after every attempt (the job goes on regardless). */
  failures = 0;

  constructor(private readonly opts: StatusReporterOptions & { enabled?: boolean }) {
    this.attempts = opts.attempts ?? 4;
    this.storedFileAttempts = opts.storedFileAttempts ?? 8;
    this.backoffMs = opts.backoffMs ?? 250;
    this.progressIntervalMs = opts.progressIntervalMs ?? 2000;
    this.figuresIntervalMs = opts.figuresIntervalMs ?? 10_000;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
    if (opts.sink || opts.enabled === false) this.sink = Promise.resolve(opts.sink);
    else {
      // Set up in the background; the first patch waits for it.
      this.sink = kubernetesSink(opts.namespace, opts.name).catch((err: unknown) => {
        opts.logger.warn({ err: errFields(err) }, 'no Kubernetes client configuration; status reporting is off');
        return undefined;
      });
    }
  }

  /**
   * Enter a step; `extra` rides along in the same patch. The returned
   * promise settles when the patch is done (or given up); callers need not
   * wait for it, the order of patches is kept either way.
   */
  setStep(step: JobStep, progress: number, extra: RunnerStatusPatch = {}): Promise<void> {
    this.cancelPendingProgress();
    this.step = step;
    this.progress = progress;
    if (extra.download !== undefined) {
      this.sentDownload = JSON.stringify(extra.download);
      this.lastFiguresAt = Date.now();
    }
    return this.enqueue({ ...extra, step, progress }, this.attempts);
  }

  /**
   * Progress within the current step, with the download's figures while
   * the source is read. Throttled: at most one patch per progress interval,
   * the latest value wins; progress never goes backwards. Figures that
   * changed ride along with a percent step; alone they go out at most once
   * per figures interval (before that, a download made a patch per progress
   * interval for its whole length: issue 39's writes per job).
   */
  setProgress(progress: number, download?: RunnerDownload): void {
    const p = Math.max(0, Math.min(100, Math.floor(progress)));
    const moved = p > Math.max(this.progress, this.pendingProgress ?? -1);
    const figures = download !== undefined && JSON.stringify(download) !== this.sentDownload;
    if (!moved && !figures) return;
    if (moved) this.pendingProgress = p;
    if (figures) this.pendingDownload = download;
    const now = Date.now();
    let due = this.lastProgressAt + this.progressIntervalMs;
    if (this.pendingProgress === undefined) due = Math.max(due, this.lastFiguresAt + this.figuresIntervalMs);
    if (due <= now) {
      this.cancelTimer();
      this.flushProgress();
    } else if (!this.progressTimer || due < this.progressDue) {
      // A percent step brings a figures-only patch's later time forward.
      this.cancelTimer();
      this.progressDue = due;
      this.progressTimer = setTimeout(() => this.flushProgress(), due - now);
    }
  }

  private cancelTimer(): void {
    if (this.progressTimer) clearTimeout(this.progressTimer);
    this.progressTimer = undefined;
  }

  private flushProgress(): void {
    this.progressTimer = undefined;
    const p = this.pendingProgress;
    const download = this.pendingDownload;
    this.pendingProgress = undefined;
    this.pendingDownload = undefined;
    const moved = p !== undefined && p > this.progress;
    if (!moved && !download) return;
    if (moved) this.progress = p;
    this.lastProgressAt = Date.now();
    if (download) {
      this.sentDownload = JSON.stringify(download);
      this.lastFiguresAt = this.lastProgressAt;
    }
    // One attempt: the next update or step change supersedes a lost one.
    void this.enqueue({ step: this.step, progress: this.progress, ...(download && { download }) }, 1);
  }

  private cancelPendingProgress(): void {
    this.cancelTimer();
    this.pendingProgress = undefined;
    this.pendingDownload = undefined;
  }

  /**
   * What the job expects to deliver, once the formats are chosen: the
   * operator makes it the job's storage reservation (lib/src/db/jobs.ts
   * reservationFor). With every attempt, as a step change.
   */
  setExpectedBytes(bytes: number): Promise<void> {
    return this.enqueue({ expectedBytes: bytes }, this.attempts);
  }

  /**
   * A file stored (its bytes) or deleted again (null), in status.storedFiles,
   * with more attempts than a step change gets (storedFileAttempts): until
   * the final report names it, this is how the operator knows to delete it
   * should the runner be lost first (docs/adr/0018). Merged key by key, so
   * patches of two pods of one attempt, or a stale copy, never drop each
   * other's keys.
   */
  storedFile(key: string, bytes: number | null): Promise<void> {
    return this.enqueue({ storedFiles: { [key]: bytes } }, this.storedFileAttempts);
  }

  /** The yt-dlp and ffmpeg versions of this attempt (status.tools), as soon as they are known. */
  setTools(tools: NonNullable<RunnerStatus['tools']>): Promise<void> {
    return this.enqueue({ tools }, this.attempts);
  }

  /** The final report: step, progress, result or error, with every attempt it takes. */
  finish(report: RunnerReport): Promise<void> {
    this.cancelPendingProgress();
    // Outcome fields are always written (null clears what an earlier attempt
    // of the pod left); step and progress stay where the job stopped.
    const patch: RunnerStatusPatch = {
      result: report.result ?? null,
      error: report.error ?? null,
      errorType: report.errorType ?? null,
      errorDetail: report.errorDetail ?? null,
      reason: report.reason ?? null,
      // What the operator's retry policy reads (docs/adr/0018).
      category: report.category ?? null,
      // The seconds of each step (mediajobs_runner_phase_seconds); the termination message has them too.
      phaseSeconds: report.phaseSeconds ?? null,
      // The platform's defence, when the failure was one (classify.ts defenceOf); the operator answers it.
      defence: report.defence ?? null,
      ...(report.tools ? { tools: report.tools } : {}),
      ...(report.step ? { step: report.step } : {}),
      ...(report.progress !== undefined ? { progress: report.progress } : {}),
    };
    return this.enqueue(patch, this.attempts + 2);
  }

  /** Resolves when every queued patch is done. */
  drain(): Promise<void> {
    return this.chain;
  }

  private enqueue(status: RunnerStatusPatch, attempts: number): Promise<void> {
    const run = async () => {
      const sink = await this.sink;
      if (!sink) return;
      for (let attempt = 1; ; attempt++) {
        try {
          await withTimeout(sink.patch(status), this.requestTimeoutMs);
          return;
        } catch (err) {
          if (attempt >= attempts || !retryable(err)) {
            this.failures++;
            this.opts.logger.warn({ err: errFields(err), step: status.step, attempt }, 'status patch failed; the termination message will carry the outcome');
            return;
          }
          await sleep(this.backoffMs * 2 ** (attempt - 1));
        }
      }
    };
    this.chain = this.chain.then(run, run);
    return this.chain;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`status patch timed out after ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function statusCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

// 4xx other than conflict/throttling will not get better by retrying (e.g.
// the MediaJob is gone, or the schema rejects the patch).
function retryable(err: unknown): boolean {
  const code = statusCode(err);
  if (code === undefined) return true;
  return code === 409 || code === 429 || code >= 500;
}

/** Kubernetes keeps at most 4096 bytes of a termination message (the tail). */
export const MAX_TERMINATION_MESSAGE_BYTES = 4096;

/**
 * The final report as the termination message, kept under the kubelet's
 * 4 KiB limit so the operator always gets valid JSON: long descriptions and
 * titles are shortened (the full text is in the status patch).
 */
export function terminationMessage(report: RunnerReport): string {
  let json = JSON.stringify(report);
  if (Buffer.byteLength(json) <= MAX_TERMINATION_MESSAGE_BYTES) return json;
  const r: RunnerReport = { ...report, ...(report.result ? { result: { ...report.result } } : {}) };
  for (const budget of [1024, 256, 0]) {
    if (r.result) {
      if (r.result.description !== undefined) r.result.description = truncate(report.result?.description ?? '', budget);
      if (r.result.title !== undefined) r.result.title = truncate(report.result?.title ?? '', Math.max(budget, 64));
    }
    json = JSON.stringify(r);
    if (Buffer.byteLength(json) <= MAX_TERMINATION_MESSAGE_BYTES) return json;
  }
  // Still too long (a huge storage key?): keep what the operator cannot do without.
  return JSON.stringify({
    outcome: report.outcome, step: report.step, progress: report.progress, error: report.error, errorType: report.errorType, reason: report.reason,
    errorDetail: report.errorDetail, category: report.category, phaseSeconds: report.phaseSeconds, defence: report.defence, tools: report.tools,
  });
}

function truncate(s: string, maxChars: number): string {
  return s.length <= maxChars ? s : s.slice(0, Math.max(0, maxChars - 1)) + '…';
}

/** Write the termination message; a missing or read-only path (outside a pod) is not an error. */
export function writeTerminationMessage(path: string, report: RunnerReport, logger: Logger): void {
  try {
    writeFileSync(path, terminationMessage(report));
  } catch (err) {
    logger.debug({ err: errFields(err), path }, 'termination log not writable');
  }
}
