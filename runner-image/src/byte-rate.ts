// The download's figures in bytes (status.download, the API's
// downloaded_bytes, total_bytes, speed_bps and eta_seconds): what the
// source's reader says it has read, and the speed and time left made of it
// over a sliding window, as download tools show them. Readers: yt-dlp's
// progress lines (ytdlp.ts DownloadProgress.bytes) and a direct read's
// share of the media read (deliver.ts).
import type { RunnerDownload } from '@mediajobs/lib/mediajob/types';

/** What a reader knows of its read: bytes so far, and in all when known. */
export interface SourceBytes {
  downloaded: number;
  total?: number;
}

/** The window the speed is measured over: long enough to smooth a bursty source, short enough to follow a change. */
export const SPEED_WINDOW_MS = 5_000;
/** No speed from less than this much time: two samples a few ms apart say nothing. */
const MIN_SPAN_MS = 1_000;

export class ByteRate {
  private readonly samples: { at: number; bytes: number }[] = [];

  /** `now` is a millisecond clock (tests give their own). */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * The figures after a reader's sample: bytes as given (never going back:
   * a retried fragment is counted once), the speed over the window when it
   * spans at least a second, the time left at that speed when the total is
   * known. Nonsense (negative, not finite) is left out, never reported.
   */
  figures(b: SourceBytes): RunnerDownload {
    const at = this.now();
    const last = this.samples.at(-1);
    const downloaded = Math.max(whole(b.downloaded) ?? 0, last?.bytes ?? 0);
    this.samples.push({ at, bytes: downloaded });
    while (this.samples.length > 2 && at - this.samples[1]!.at >= SPEED_WINDOW_MS) this.samples.shift();
    const first = this.samples[0]!;
    const span = at - first.at;
    const total = whole(b.total);
    const out: RunnerDownload = { downloadedBytes: downloaded, ...(total !== undefined && total > 0 && { totalBytes: Math.max(total, downloaded) }) };
    if (span >= MIN_SPAN_MS) {
      const speed = Math.round(((downloaded - first.bytes) * 1000) / span);
      out.speedBps = speed;
      if (out.totalBytes !== undefined && speed > 0) out.etaSeconds = Math.ceil((out.totalBytes - downloaded) / speed);
    }
    return out;
  }
}

function whole(n: number | undefined): number | undefined {
  return n !== undefined && Number.isFinite(n) && n >= 0 ? Math.floor(n) : undefined;
}
