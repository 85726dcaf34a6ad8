// The download's figures (status.download, issue 38) as this service keeps
// and shows them: one rule for the job's row (GET /jobs/{id}) and its
// progress webhooks, so a client never reads a figure in one that the other
// dropped. A runner writes its own status (and kubectl may write anything),
// so a figure is kept only when it is a whole, non-negative number that fits
// where it is stored (bigint columns, a JSON number read back exactly; the
// time left in an int column), and speed and time left only while the source
// is being read.
import { TERMINAL_STATUSES, type MediaJobStatus, type RunnerDownload } from './types.js';

/** The longest time left kept: eta_seconds is an int column (and a wait of 68 years is no figure). */
export const MAX_ETA_SECONDS = 2 ** 31 - 1;

/** A whole figure from 0 to `max`, else nothing. */
function whole(n: unknown, max = Number.MAX_SAFE_INTEGER): number | undefined {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 && n <= max ? n : undefined;
}

/**
 * The figures of a status worth keeping and showing, each absent when
 * unknown or nonsense; speedBps and etaSeconds only while the job is still
 * in its Downloading step.
 */
export function downloadFigures(s: Pick<MediaJobStatus, 'status' | 'step' | 'download'>): RunnerDownload {
  const d = s.download;
  if (!d) return {};
  const reading = s.step === 'Downloading' && !(s.status !== undefined && TERMINAL_STATUSES.includes(s.status));
  const figures: RunnerDownload = { downloadedBytes: whole(d.downloadedBytes), totalBytes: whole(d.totalBytes) };
  if (reading) Object.assign(figures, { speedBps: whole(d.speedBps), etaSeconds: whole(d.etaSeconds, MAX_ETA_SECONDS) });
  return Object.fromEntries(Object.entries(figures).filter(([, v]) => v !== undefined)) as RunnerDownload;
}
