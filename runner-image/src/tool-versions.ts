// The versions of the tools an attempt runs (issue 37 item 6): yt-dlp and
// ffmpeg, logged at start and reported in status.tools, which the operator
// exports as mediajobs_runner_tool_info{tool,version}. yt-dlp's versions
// are dates (2026.08.19, nightlies 2026.08.19.233512): one older than
// YTDLP_MAX_AGE_DAYS logs a warning, since platforms change under old
// extractors and answer them with bot checks. How the image's yt-dlp is
// kept current: runner-image/README.md "Keeping yt-dlp current".
import type { RunnerTools } from '@mediajobs/lib/mediajob/types';
import { isToolVersion } from '@mediajobs/lib/mediajob/ytdlp-version';
import { runProcess } from './child.js';

/** The version each tool prints; a tool that cannot be run or says nothing usable is left out. */
export async function toolVersions(bins: { ytdlp: string; ffmpeg: string }, signal?: AbortSignal): Promise<RunnerTools> {
  const [ytdlp, ffmpeg] = await Promise.all([
    runProcess(bins.ytdlp, ['--version'], { captureStdout: true, maxStdoutBytes: 4096, signal }).then((r) => r.stdout.trim().split('\n')[0], () => undefined),
    runProcess(bins.ffmpeg, ['-hide_banner', '-version'], { captureStdout: true, maxStdoutBytes: 64 * 1024, signal })
      .then((r) => /^ffmpeg version (\S+)/.exec(r.stdout)?.[1], () => undefined),
  ]);
  return { ...(isToolVersion(ytdlp) && { ytdlp }), ...(isToolVersion(ffmpeg) && { ffmpeg }) };
}

/** A version's date and age are lib's (the operator exports them too). */
export { ytdlpAgeDays, ytdlpReleaseDate } from '@mediajobs/lib/mediajob/ytdlp-version';
