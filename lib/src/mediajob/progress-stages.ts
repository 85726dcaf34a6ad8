// The progress figures runner and operator agree on (spec: progress stages).
// The runner reports a step and a percent inside that step's span; the
// operator turns what it sees into the stages the progress webhooks
// announce. Both read this table, so a stage's percent is written once.
// Owns the figures only: reporting is runner-image/src/steps.ts's, webhook
// payloads are operator/src/webhook-events.ts's.
import type { JobStep } from './types.js';

/** The steps a runner reports progress in. */
export type ProgressStep = Exclude<JobStep, 'Queued' | 'Finished'>;

/**
 * The percents each step's own progress covers. Uploading stops short of
 * 100: 100 is Finished's alone, so a job shows 100 only once delivered.
 */
export const STEP_SPANS: Readonly<Record<ProgressStep, { start: number; end: number }>> = {
  Downloading: { start: 0, end: 33 },
  Muxing: { start: 33, end: 66 },
  Uploading: { start: 66, end: 99 },
};

/** Progress of a delivered job (step Finished; the webhook's "completed 100" is job_completed). */
export const COMPLETED_PERCENT = 100;

/**
 * The spec's stages in the order they are announced: each belongs to a
 * step and is reached when the runner enters that step (`start`) or when
 * the step's progress has come to its end (`end`), or any later step began.
 */
export const PROGRESS_STAGES = [
  { stage: 'downloading', step: 'Downloading', at: 'start', percent: STEP_SPANS.Downloading.start },
  { stage: 'download_complete', step: 'Downloading', at: 'end', percent: STEP_SPANS.Downloading.end },
  { stage: 'muxing', step: 'Muxing', at: 'start', percent: STEP_SPANS.Muxing.start },
  { stage: 'mux_complete', step: 'Muxing', at: 'end', percent: STEP_SPANS.Muxing.end },
  { stage: 'uploading', step: 'Uploading', at: 'start', percent: STEP_SPANS.Uploading.start },
] as const satisfies readonly { stage: string; step: ProgressStep; at: 'start' | 'end'; percent: number }[];

export type ProgressStage = (typeof PROGRESS_STAGES)[number]['stage'];

const STEP_ORDER: readonly JobStep[] = ['Queued', 'Downloading', 'Muxing', 'Uploading', 'Finished'];

/**
 * How many of PROGRESS_STAGES a runner at `step` with `progress` has
 * reached (a prefix: stages are in order). A stage the operator never saw
 * on its own (a mux shorter than a watch event) is reached all the same,
 * because a later step implies it.
 */
export function stagesReachedAt(step: JobStep | undefined, progress: number | undefined): number {
  const here = step ? STEP_ORDER.indexOf(step) : -1;
  return PROGRESS_STAGES.filter((s) => {
    const own = STEP_ORDER.indexOf(s.step);
    return own < here || (own === here && (s.at === 'start' || (progress ?? 0) >= s.percent));
  }).length;
}
