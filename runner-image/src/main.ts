// The runner: one MediaJob per pod (spine.md "Runner contract"). Reads the
// job from its environment, runs the pipeline, reports through the
// MediaJob's /status, repeats the final report in the termination message,
// and exits with the outcome's code.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '@mediajobs/lib/config';
import { createLogger, errFields } from '@mediajobs/lib/logger';
import { RUNNER_EXIT, type NormalisedMediaJobSpec, type RunnerReport } from '@mediajobs/lib/mediajob/types';
import { cpuBudget, killAllChildren, liveChildren } from './child.js';
import { classification } from './classify.js';
import { loadRunnerEnv, parseSpec, SpecError, type RunnerEnv } from './config.js';
import { resolveDestination, type ResolvedDestination } from './destination.js';
import { runJob } from './pipeline.js';
import { StatusReporter, writeTerminationMessage } from './report.js';

const logger = createLogger('runner');
/** Exit code of a runner stopped by SIGTERM (128 + 15), as the contract asks. */
const SIGTERM_EXIT = 143;
/** How long the final status patch may take (with its retries) before the runner exits anyway. */
const FINAL_REPORT_TIMEOUT_MS = 30_000;

let workDir: string | undefined;
let shuttingDown = false;
/** Aborted on SIGTERM so no new child process starts while the runner stops. */
const abort = new AbortController();

function removeWorkDir(): void {
  if (!workDir) return;
  try {
    rmSync(workDir, { recursive: true, force: true });
  } catch (err) {
    logger.warn({ err: errFields(err) }, 'could not remove the work directory');
  }
  workDir = undefined;
}

/**
 * SIGTERM (job cancelled, pod deleted, node drained): stop the children,
 * wait briefly for them to go so none writes into the directory as it is
 * removed, remove it, exit 143. No report: the operator knows why it
 * stopped the pod.
 */
function onSignal(signal: NodeJS.Signals): void {
  if (shuttingDown) return;
  shuttingDown = true;
  logger.info({ signal }, 'stopping');
  abort.abort();
  killAllChildren('SIGTERM');
  const deadline = Date.now() + 3000;
  const finish = () => {
    if (liveChildren() > 0 && Date.now() < deadline) {
      setTimeout(finish, 25);
      return;
    }
    if (liveChildren() > 0) killAllChildren('SIGKILL');
    removeWorkDir();
    process.exit(signal === 'SIGINT' ? 130 : SIGTERM_EXIT);
  };
  finish();
}

function terminationLogPath(env: Pick<RunnerEnv, 'LOCAL_CLUSTER_TERMINATION_LOG'> | undefined): string {
  return env?.LOCAL_CLUSTER_TERMINATION_LOG ?? process.env.LOCAL_CLUSTER_TERMINATION_LOG ?? '/dev/termination-log';
}

async function main(): Promise<number> {
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);

  let env: RunnerEnv;
  let spec: NormalisedMediaJobSpec;
  try {
    env = loadRunnerEnv();
    spec = parseSpec(env.MEDIAJOB_SPEC);
  } catch (err) {
    // A broken pod spec is the operator's bug, not the media's: Failed, technical.
    const c = classification('internal_error');
    const report: RunnerReport = { outcome: c.outcome, error: c.error, errorType: c.errorType };
    logger.error({ err: err instanceof ConfigError || err instanceof SpecError ? err.message : errFields(err) }, 'invalid runner configuration');
    writeTerminationMessage(terminationLogPath(undefined), report, logger);
    return RUNNER_EXIT.failed;
  }

  const jobId = env.MEDIAJOB_JOB_ID ?? spec.jobId ?? env.MEDIAJOB_NAME;
  const reporter = new StatusReporter({
    namespace: env.MEDIAJOB_NAMESPACE ?? 'default',
    name: env.MEDIAJOB_NAME ?? '',
    logger,
    enabled: Boolean(env.MEDIAJOB_NAME && env.MEDIAJOB_NAMESPACE),
    progressIntervalMs: env.RUNNER_PROGRESS_INTERVAL_MS,
  });

  let report: RunnerReport;
  if (!jobId) {
    const c = classification('internal_error');
    logger.error('no job id: MEDIAJOB_JOB_ID is required');
    report = { outcome: c.outcome, error: c.error, errorType: c.errorType };
  } else {
    let destination: ResolvedDestination | { error: unknown };
    try {
      destination = await resolveDestination(env.MEDIAJOBS_CREDENTIALS_DIR, env);
    } catch (err) {
      destination = { error: err };
    }
    // The pod's TMPDIR (a private emptyDir, or the local kubelet's per-pod dir).
    workDir = mkdtempSync(path.join(os.tmpdir(), 'mediajob-'));
    try {
      report = await runJob({
        spec,
        jobId,
        workDir,
        reporter,
        logger: logger.child({ job: jobId }),
        tools: {
          ytdlp: env.YTDLP_PATH, ytdlpArgs: env.YTDLP_ARGS, ffmpeg: env.FFMPEG_PATH, ffprobe: env.FFPROBE_PATH,
          socketTimeoutSeconds: env.RUNNER_SOCKET_TIMEOUT_SECONDS,
          threads: cpuBudget(),
          live: {
            maxRecordingSeconds: env.RUNNER_MAX_RECORDING_SECONDS,
            waitForVideoMaxSeconds: env.RUNNER_WAIT_FOR_VIDEO_MAX_SECONDS,
            waitForVideoPollSeconds: env.RUNNER_WAIT_FOR_VIDEO_POLL_SECONDS,
          },
        },
        destination,
        signal: abort.signal,
      });
    } catch (err) {
      // A bug or an unexpected I/O failure (disk full while writing the info JSON...).
      if (shuttingDown) return SIGTERM_EXIT;
      const c = classification('internal_error');
      logger.error({ err: errFields(err) }, 'runner failed');
      report = { outcome: c.outcome, error: c.error, errorType: c.errorType };
    } finally {
      if (!shuttingDown) removeWorkDir();
    }
  }
  if (shuttingDown) return SIGTERM_EXIT;

  // The termination message first: it is what the operator falls back on,
  // so it must exist even if the final patch hangs or the pod is killed now.
  writeTerminationMessage(terminationLogPath(env), report, logger);
  await Promise.race([reporter.finish(report), new Promise((r) => setTimeout(r, FINAL_REPORT_TIMEOUT_MS).unref())]);
  return RUNNER_EXIT[report.outcome ?? 'failed'];
}

main().then(
  (code) => {
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
