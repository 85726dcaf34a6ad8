// The runner: one MediaJob per pod (spine.md "Runner contract"). Reads the
// job from its environment, runs the pipeline, reports through the
// MediaJob's /status, repeats the final report in the termination message,
// and exits with the outcome's code.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '@mediajobs/lib/config';
import { createLogger, errFields } from '@mediajobs/lib/logger';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { RUNNER_EXIT, type NormalisedMediaJobSpec, type RunnerReport } from '@mediajobs/lib/mediajob/types';
import { cpuBudget, killProcessTree, liveChildren, liveSignalled } from './child.js';
import { classification, invalidSpec } from './classify.js';
import { InvalidSpec, loadRunnerEnv, parseSpec, SpecError, type RunnerEnv } from './config.js';
import { cancellable, resolveDestination, type CancellableProvider, type ResolvedDestination } from './destination.js';
import { runJob, type Tools } from './pipeline.js';
import { loadPlatformRun, PlatformSetupError, type PlatformRun } from './platform.js';
import { StatusReporter, writeTerminationMessage } from './report.js';

const logger = createLogger('runner');
/** Exit code of a runner stopped by SIGTERM (128 + 15), as the contract asks. */
const SIGTERM_EXIT = 143;
/** How long the final status patch may take (with its retries) before the runner exits anyway. */
const FINAL_REPORT_TIMEOUT_MS = 30_000;

/** How long a stopping runner waits for its children and uploads to wind down before it SIGKILLs what is left. */
const STOP_BUDGET_MS = 4000;
/** How long removing files stored before a cancellation may take. */
const REMOVE_BUDGET_MS = 3000;

let workDir: string | undefined;
let shuttingDown = false;
/** Aborted on SIGTERM so no new child process starts and uploads stop while the runner stops. */
const abort = new AbortController();
/** The job's run, settled once the pipeline has wound down (an aborted upload's abort call included). */
let running: Promise<unknown> | undefined;
/** The job's uploads (CancellableProvider): what it stored, to remove when it is cancelled before reporting. */
let uploads: CancellableProvider | undefined;
/** The final report has begun: what was delivered is the job's, and stays. */
let reporting = false;

function removeWorkDir(): void {
  if (!workDir) return;
  try {
    rmSync(workDir, { recursive: true, force: true });
  } catch (err) {
    logger.warn({ err: errFields(err) }, 'could not remove the work directory');
  }
  workDir = undefined;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)).unref());

/**
 * SIGTERM (job cancelled, pod deleted, node drained): stop every process
 * below the runner (yt-dlp, ffmpeg, and what they started), let the uploads
 * abort (multipart aborted, staged file discarded, an object stored after
 * the abort deleted), wait briefly for all of it, SIGKILL what is left,
 * remove the files already stored unless the final report had begun, remove
 * the work directory, exit 143. No report: nothing counts as delivered, and
 * the operator knows why it stopped the pod (docs/adr/0013).
 */
async function stop(signal: NodeJS.Signals): Promise<void> {
  logger.info({ signal }, 'stopping');
  abort.abort();
  killProcessTree('SIGTERM');
  const deadline = Date.now() + STOP_BUDGET_MS;
  await Promise.race([running?.catch(() => undefined), sleep(STOP_BUDGET_MS)]);
  while ((liveChildren() > 0 || liveSignalled() > 0) && Date.now() < deadline) await sleep(25);
  if (killProcessTree('SIGKILL') > 0) logger.warn('children still running after SIGTERM were killed');
  if (uploads && !reporting) {
    const removal = uploads.removeDelivered().then(
      (n) => n && logger.info({ files: n }, 'files stored before the cancellation removed'),
      (err: unknown) => logger.error({ err: errFields(err) }, 'could not remove files stored before the cancellation'),
    );
    await Promise.race([removal, sleep(REMOVE_BUDGET_MS)]);
  }
  removeWorkDir();
}

function onSignal(signal: NodeJS.Signals): void {
  if (shuttingDown) return;
  shuttingDown = true;
  const code = signal === 'SIGINT' ? 130 : SIGTERM_EXIT;
  // Should the event loop empty before stop() is through (its timers do not keep it alive), leave with this code, not 0.
  process.exitCode = code;
  // Let pino flush, then leave even if a keep-alive socket lingers.
  void stop(signal).finally(() => setTimeout(() => process.exit(code), 20));
}

function terminationLogPath(env: Pick<RunnerEnv, 'LOCAL_CLUSTER_TERMINATION_LOG'> | undefined): string {
  return env?.LOCAL_CLUSTER_TERMINATION_LOG ?? process.env.LOCAL_CLUSTER_TERMINATION_LOG ?? '/dev/termination-log';
}

/** The classified report of a runner bug or broken setup: Failed, technical. */
function internalError(): RunnerReport {
  const c = classification('internal_error');
  return { outcome: c.outcome, error: c.error, errorType: c.errorType, category: c.category };
}

/** The report of a spec the runner cannot run as asked: Failed, invalid_spec, the problems as the error; never retried. */
function invalidSpecReport(err: InvalidSpec): RunnerReport {
  const c = invalidSpec(err.message);
  return { outcome: c.outcome, error: c.error, errorType: c.errorType, category: c.category, reason: c.reason };
}

/**
 * The runner's settings and the job's spec, or the report of a spec that
 * is invalid (reported like any failure: the job is the user's to fix);
 * undefined, with the termination message written, when the settings or
 * an unreadable spec are broken (the operator's bug).
 */
function loadJob(): { env: RunnerEnv; spec: NormalisedMediaJobSpec } | { env: RunnerEnv; invalid: RunnerReport } | undefined {
  let env: RunnerEnv | undefined;
  try {
    env = loadRunnerEnv();
    return { env, spec: parseSpec(env.MEDIAJOB_SPEC) };
  } catch (err) {
    if (env && err instanceof InvalidSpec) {
      logger.warn({ problems: err.message }, 'invalid job spec');
      return { env, invalid: invalidSpecReport(err) };
    }
    // A broken pod spec is the operator's bug, not the media's: Failed, technical.
    logger.error({ err: err instanceof ConfigError || err instanceof SpecError ? err.message : errFields(err) }, 'invalid runner configuration');
    writeTerminationMessage(terminationLogPath(env), internalError(), logger);
    return undefined;
  }
}

function statusReporter(env: RunnerEnv): StatusReporter {
  return new StatusReporter({
    namespace: env.MEDIAJOB_NAMESPACE ?? 'default',
    name: env.MEDIAJOB_NAME ?? '',
    logger,
    enabled: Boolean(env.MEDIAJOB_NAME && env.MEDIAJOB_NAMESPACE),
    progressIntervalMs: env.RUNNER_PROGRESS_INTERVAL_MS,
    figuresIntervalMs: env.RUNNER_FIGURES_INTERVAL_MS,
  });
}

/** The job's outbound-address policy (the operator's allowance, forwarded): for its egress proxy and its uploads. */
function outboundPolicy(env: RunnerEnv): OutboundPolicy {
  return new OutboundPolicy({ allowed: env.OUTBOUND_ALLOWED_CIDRS });
}

function toolsOf(env: RunnerEnv, platform: PlatformRun | undefined): Tools {
  return {
    ytdlp: env.YTDLP_PATH, ytdlpArgs: env.YTDLP_ARGS, ffmpeg: env.FFMPEG_PATH, ffprobe: env.FFPROBE_PATH,
    socketTimeoutSeconds: env.RUNNER_SOCKET_TIMEOUT_SECONDS,
    threads: cpuBudget(),
    ytdlpMaxAgeDays: env.YTDLP_MAX_AGE_DAYS,
    // A platform's proxy session is the egress's upstream, its source address the egress's own (platform.ts).
    egress: {
      policy: outboundPolicy(env), ports: env.RUNNER_EGRESS_PORTS,
      ...(platform?.upstream ? { upstream: platform.upstream } : {}), ...(platform?.sourceAddress ? { localAddress: platform.sourceAddress } : {}),
    },
    ...(platform ? { platform } : {}),
    live: {
      maxRecordingSeconds: env.RUNNER_MAX_RECORDING_SECONDS,
      waitForVideoMaxSeconds: env.RUNNER_WAIT_FOR_VIDEO_MAX_SECONDS,
      waitForVideoPollSeconds: env.RUNNER_WAIT_FOR_VIDEO_POLL_SECONDS,
    },
  };
}

/**
 * The job's destination, its uploads cancellable (stop() removes what they
 * stored) and each file stored or deleted written into status.storedFiles at
 * once, so what a runner killed before its report stored is known
 * (docs/adr/0018); or why it could not be set up.
 */
async function destinationOf(env: RunnerEnv, reporter: StatusReporter): Promise<ResolvedDestination | { error: unknown }> {
  try {
    const resolved = cancellable(
      await resolveDestination(env.MEDIAJOBS_CREDENTIALS_DIR, env, process.env, outboundPolicy(env)), abort.signal,
      (key, bytes) => void reporter.storedFile(key, bytes),
    );
    uploads = resolved.provider;
    return resolved;
  } catch (err) {
    return { error: err };
  }
}

/** Run the pipeline in a fresh work directory, removed after unless the runner is stopping (stop() removes it then). */
async function runInWorkDir(env: RunnerEnv, spec: NormalisedMediaJobSpec, jobId: string, reporter: StatusReporter): Promise<RunnerReport> {
  let platform: PlatformRun | undefined;
  try {
    platform = await loadPlatformRun(env);
  } catch (err) {
    // The operator's Secret is broken: its bug, not the media's. The message names the key, never its value.
    logger.error({ err: err instanceof PlatformSetupError ? err.message : errFields(err) }, 'invalid platform credentials');
    return internalError();
  }
  if (platform) logger.info({ platform: platform.name, proxyPool: platform.proxyPool, proxyId: platform.proxyId, cookieId: platform.cookieId }, 'platform');
  const destination = await destinationOf(env, reporter);
  // The pod's TMPDIR (a private emptyDir, or the local kubelet's per-pod dir).
  workDir = mkdtempSync(path.join(os.tmpdir(), 'mediajob-'));
  try {
    const run = runJob({
      spec, jobId, workDir, reporter, logger: logger.child({ job: jobId }), tools: toolsOf(env, platform), destination, signal: abort.signal,
    });
    running = run;
    return await run;
  } catch (err) {
    // A bug or an unexpected I/O failure (disk full while writing the info JSON...); a stopping runner reports nothing anyway.
    if (!shuttingDown) logger.error({ err: errFields(err) }, 'runner failed');
    return internalError();
  } finally {
    if (!shuttingDown) removeWorkDir();
  }
}

/** Report the outcome and give the exit code. From here what was delivered is the job's, and stays (stop()). */
async function finalReport(env: RunnerEnv, reporter: StatusReporter, report: RunnerReport): Promise<number> {
  reporting = true;
  // The termination message first: it is what the operator falls back on,
  // so it must exist even if the final patch hangs or the pod is killed now.
  writeTerminationMessage(terminationLogPath(env), report, logger);
  // A timer that holds the process: the reporter's backoff sleeps do not, so with the API server away the
  // runner would otherwise end at the first backoff, its report untried and its exit code 0 whatever the outcome.
  let deadline: NodeJS.Timeout | undefined;
  await Promise.race([reporter.finish(report), new Promise((r) => (deadline = setTimeout(r, FINAL_REPORT_TIMEOUT_MS)))]);
  clearTimeout(deadline);
  return RUNNER_EXIT[report.outcome ?? 'failed'];
}

async function main(): Promise<number> {
  // on, not once: the kubelet of the local cluster signals the whole process group, and a second SIGTERM must not kill the runner mid-cleanup.
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const job = loadJob();
  if (!job) return RUNNER_EXIT.failed;
  const reporter = statusReporter(job.env);
  if ('invalid' in job) return finalReport(job.env, reporter, job.invalid);
  const { env, spec } = job;
  const jobId = env.MEDIAJOB_JOB_ID ?? spec.jobId ?? env.MEDIAJOB_NAME;
  if (!jobId) logger.error('no job id: MEDIAJOB_JOB_ID is required');
  const report = jobId ? await runInWorkDir(env, spec, jobId, reporter) : internalError();
  // A stopping runner reports nothing: stop() and onSignal end it (docs/adr/0013).
  if (shuttingDown) return SIGTERM_EXIT;
  return finalReport(env, reporter, report);
}

main().then(
  (code) => {
    // A stopping runner leaves when stop() is through (onSignal).
    if (shuttingDown && !reporting) return;
    // Let pino flush, then leave even if a keep-alive socket lingers.
    process.exitCode = code;
    setTimeout(() => process.exit(code), 50).unref();
  },
  (err: unknown) => {
    logger.fatal({ err: errFields(err) }, 'runner crashed');
    removeWorkDir();
    process.exit(RUNNER_EXIT.failed);
  },
);
