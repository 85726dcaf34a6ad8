// The phase seconds the scripted runner (scripted-runner.ts) reports, by
// outcome: fixed, and exact in binary, so a test can compare the operator's
// mediajobs_runner_phase_seconds sums with ===. A failure or warning
// happens in the download, as the scripted runner's do.
import type { RunnerPhaseSeconds } from '@mediajobs/lib/mediajob/types';

export const PHASE_SECONDS = {
  failed: { download: 0.25 },
  warning: { download: 0.125 },
  completed: { download: 1.5, mux: 0.5, upload: 2 },
} as const satisfies Record<string, RunnerPhaseSeconds>;
