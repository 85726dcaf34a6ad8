// Where a job is (its step and progress), how that is reported, and how a
// failure becomes a report: one tracker per job, shared by the pipeline and
// the delivery, so no step is entered without being reported.
import { cleanCause } from '@mediajobs/lib/cause-line';
import { redactUrls, type Logger } from '@mediajobs/lib/logger';
import type { JobStep, RunnerDownload, RunnerPhase, RunnerPhaseSeconds, RunnerReport } from '@mediajobs/lib/mediajob/types';
import { COMPLETED_PERCENT, STEP_SPANS, type ProgressStep } from '@mediajobs/lib/mediajob/progress-stages';
import type { RunResult } from './child.js';
import { ByteRate, type SourceBytes } from './byte-rate.js';
import type { Classification } from './classify.js';
import type { RunnerStatusPatch, StatusReporter } from './report.js';

export type Step = Exclude<JobStep, 'Queued'>;

/** Progress at the start of each step (the stage table in lib/src/mediajob/progress-stages.ts). */
export const STEP_PROGRESS: Record<Step, number> = {
  Downloading: STEP_SPANS.Downloading.start, Muxing: STEP_SPANS.Muxing.start, Uploading: STEP_SPANS.Uploading.start, Finished: COMPLETED_PERCENT,
};

/** The phase each working step is timed as (mediajobs_runner_phase_seconds' label). */
const PHASE_OF: Record<Exclude<Step, 'Finished'>, RunnerPhase> = { Downloading: 'download', Muxing: 'mux', Uploading: 'upload' };

export class JobSteps {
  step: Step = 'Downloading';
  progress = 0;
  /** Milliseconds spent in each phase left so far; the current step's runs from `since`. */
  private readonly spent = new Map<RunnerPhase, number>();
  /** When the current step was entered; undefined before the first enter() and once Finished. */
  private since: number | undefined;
  /** The read of the source in bytes (status.download), once its reader said any. */
  private download: RunnerDownload | undefined;
  private rate: ByteRate;

  /**
   * `now` is a millisecond clock (tests give their own); `source` is the
   * job's URL, the one host a failure's cause may name (lib/src/cause-line.ts).
   */
  constructor(
    private readonly reporter: StatusReporter, private readonly logger: Logger,
    private readonly now: () => number = () => performance.now(), private readonly source?: string,
  ) {
    this.rate = new ByteRate(now);
  }

  /**
   * Enter `next` at its starting progress and report it, with `also` (the
   * first report clears what an earlier attempt of the pod left). Not
   * awaited: status is best effort and must not slow the job (patches stay
   * in order). The step left is timed (phaseSeconds).
   */
  enter(next: Step, also?: RunnerStatusPatch): void {
    const at = this.now();
    this.leave(at);
    this.since = next === 'Finished' ? undefined : at;
    this.step = next;
    this.progress = STEP_PROGRESS[next];
    if (next !== 'Finished') void this.reporter.setStep(next, this.progress, { ...also, ...this.downloadLeft(next) });
  }

  /**
   * What a step change says of the download: past it, its bytes without a
   * speed or time left; back at it (a direct read that gave way to yt-dlp),
   * nothing, since the read starts over.
   */
  private downloadLeft(next: Step): RunnerStatusPatch {
    if (!this.download) return {};
    if (next === 'Downloading') {
      this.download = undefined;
      this.rate = new ByteRate(this.now);
      return { download: null };
    }
    const { speedBps: _s, etaSeconds: _e, ...bytes } = this.download;
    this.download = bytes;
    return { download: bytes };
  }

  /** Add the time since the current step was entered to its phase. */
  private leave(at: number): void {
    if (this.since === undefined || this.step === 'Finished') return;
    const phase = PHASE_OF[this.step];
    this.spent.set(phase, (this.spent.get(phase) ?? 0) + Math.max(0, at - this.since));
  }

  /**
   * Seconds spent in each step entered so far, the current one up to now
   * (a failure's report has the phases up to the failure): millisecond
   * precision, only the phases entered.
   */
  phaseSeconds(): RunnerPhaseSeconds {
    const spent = new Map(this.spent);
    if (this.since !== undefined && this.step !== 'Finished') {
      const phase = PHASE_OF[this.step];
      spent.set(phase, (spent.get(phase) ?? 0) + Math.max(0, this.now() - this.since));
    }
    const out: RunnerPhaseSeconds = {};
    for (const [phase, ms] of spent) out[phase] = Math.round(ms) / 1000;
    return out;
  }

  /**
   * A progress callback for the work of `step`, over that step's span of
   * the stage table. The Downloading step's reader also gives the bytes it
   * has read of the source, when it knows them (status.download).
   */
  withinStep(step: ProgressStep): (fraction: number, bytes?: SourceBytes) => void {
    const { start, end } = STEP_SPANS[step];
    return this.within(start, end - start, step === 'Downloading');
  }

  /** A progress callback for a part of the job spanning `span` points from `start`; progress never goes back. */
  private within(start: number, span: number, reading: boolean): (fraction: number, bytes?: SourceBytes) => void {
    return (fraction, bytes) => {
      this.progress = Math.max(this.progress, Math.floor(start + span * Math.min(1, Math.max(0, fraction))));
      if (reading && bytes && this.step === 'Downloading') this.download = this.rate.figures(bytes);
      this.reporter.setProgress(this.progress, reading && this.step === 'Downloading' ? this.download : undefined);
    };
  }

  /**
   * The report of a job that did not complete. Details (stderr tail, error
   * codes) go to the pod log for operators; the report carries only the
   * classification's fixed phrase.
   */
  fail(c: Classification, detail?: Record<string, unknown>): RunnerReport {
    this.logger.warn({ step: this.step, category: c.category, ...detail }, 'job did not complete');
    const errorDetail = causeOf(detail, this.source);
    return {
      step: this.step, progress: this.progress, outcome: c.outcome, error: c.error, category: c.category,
      ...(c.errorType ? { errorType: c.errorType } : {}), ...(c.reason ? { reason: c.reason } : {}),
      ...(errorDetail ? { errorDetail } : {}),
      phaseSeconds: this.phaseSeconds(),
    };
  }
}

/**
 * What a failure's detail says of its cause, as the API shows it
 * (error_detail): the tool's output (toolDetail's stderr), else the error's
 * message (errFields'), cleaned by lib's one cleaner.
 */
function causeOf(detail: Record<string, unknown> | undefined, source: string | undefined): string | undefined {
  if (typeof detail?.stderr === 'string') return cleanCause(detail.stderr, source);
  const err = detail?.err as { message?: unknown } | undefined;
  return typeof err?.message === 'string' ? cleanCause(err.message, source) : undefined;
}

/** The last lines of a tool's output, URLs redacted, bounded: for the log. */
export function tail(text: string, lines = 8): string {
  return redactUrls(text.trim().split(/\r?\n/).slice(-lines).join('\n')).slice(-2000);
}

/** How a tool's run ended, for the log. */
export function toolDetail(tool: string, run: RunResult): Record<string, unknown> {
  return { tool, exitCode: run.exitCode, signal: run.signal, stderr: tail(run.stderr) };
}
