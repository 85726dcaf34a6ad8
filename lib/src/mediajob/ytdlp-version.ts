// What a yt-dlp version says about its age: its versions are release dates
// (2026.08.19, nightlies 2026.08.19.233512). The runner warns on one older
// than YTDLP_MAX_AGE_DAYS; the operator exports the age of each version the
// runners report (mediajobs_runner_ytdlp_age_days), so both read it here,
// and what a tool's version may look like to be reported or exported.

/** A version as tools print it; longer than any real one, or with other characters, it is not a version (and never a metric label). */
export function isToolVersion(v: string | undefined): v is string {
  return v !== undefined && v.length <= 64 && /^[\w.+~:-]+$/.test(v);
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
