// The versions of the tools an attempt runs (issue 37 item 6): yt-dlp and
// ffmpeg, logged at start and reported in status.tools, which the operator
// exports as mediajobs_runner_tool_info{tool,version}. yt-dlp's versions
// are dates (2026.08.19, nightlies 2026.08.19.233512): one older than
// YTDLP_MAX_AGE_DAYS logs a warning, since platforms change under old
// extractors and answer them with bot checks. How the image's yt-dlp is
// kept current: runner-image/README.md "Keeping yt-dlp current".
import type { RunnerTools } from '@mediajobs/lib/mediajob/types';
import { runProcess } from './child.js';

/** Longer than any version string; a tool that prints more is not answering --version. */
const MAX_VERSION_LENGTH = 64;

/** The version each tool prints; a tool that cannot be run or says nothing usable is left out. */
export async function toolVersions(bins: { ytdlp: string; ffmpeg: string }, signal?: AbortSignal): Promise<RunnerTools> {
  const [ytdlp, ffmpeg] = await Promise.all([
    runProcess(bins.ytdlp, ['--version'], { captureStdout: true, maxStdoutBytes: 4096, signal }).then((r) => r.stdout.trim().split('\n')[0], () => undefined),
    runProcess(bins.ffmpeg, ['-hide_banner', '-version'], { captureStdout: true, maxStdoutBytes: 64 * 1024, signal })
      .then((r) => /^ffmpeg version (\S+)/.exec(r.stdout)?.[1], () => undefined),
  ]);
  const ok = (v: string | undefined) => (v && v.length <= MAX_VERSION_LENGTH && /^[\w.+~:-]+$/.test(v) ? v : undefined);
  return { ...(ok(ytdlp) ? { ytdlp: ok(ytdlp) } : {}), ...(ok(ffmpeg) ? { ffmpeg: ok(ffmpeg) } : {}) };
}

/** The release date of a yt-dlp version (YYYY.MM.DD, a nightly's time after it); undefined for anything else (a git build). */
export function ytdlpReleaseDate(version: string): Date | undefined {
  const m = /^(\d{4})\.(\d{1,2})\.(\d{1,2})(?:\.\d+)?$/.exec(version);
  if (!m) return undefined;
  const date = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return date.getUTCMonth() === Number(m[2]) - 1 ? date : undefined;
}

/** Whole days since the version's release; undefined when the version names no date. */
export function ytdlpAgeDays(version: string, now: number): number | undefined {
  const date = ytdlpReleaseDate(version);
  return date === undefined ? undefined : Math.floor((now - date.getTime()) / 86_400_000);
}
