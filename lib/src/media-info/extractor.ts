// Metadata lookups with yt-dlp: a lightweight extraction bounded at 6 s and,
// only when that cannot answer, a full one bounded at 20 s in a fresh
// process with a new proxy session (spec: POST /is-short rules 3 and 4,
// Limits). Nothing is cached and nothing is downloaded: `-J` only prints the
// info JSON, and each lookup starts from scratch.
//
// Lightweight vs full:
// - lightweight: no extractor retries, a short socket timeout, and YouTube's
//   cheaper path: skip the DASH manifest (the player response's adaptive
//   formats already carry every dimension) and auto-translated subtitles,
//   and skip fetching per-client configs (`player_skip=configs`), which
//   yt-dlp documents as fewer requests at some risk of missing data;
// - full: yt-dlp's normal extraction with one extractor retry and a longer
//   socket timeout.
// Both pass --ignore-no-formats-error, so a scheduled stream (no formats
// yet) still yields its info with live_status `is_upcoming` instead of an
// error, and a private or removed video yields its reason as a warning.
import { randomBytes } from 'node:crypto';
import { worthFallback, classifyFailedRun, logDetail, type FailureCategory } from './failures.js';
import type { LookupEgress } from './egress.js';
import type { YtDlpInfo } from './info.js';
import { runBounded, type BoundedRun } from './run.js';

export interface MediaInfoOptions {
  /** The extractor program and leading arguments (MEDIA_INFO_YTDLP). */
  command: readonly string[];
  /** Appended to both runs (MEDIA_INFO_YTDLP_ARGS), e.g. `--cookies` or a JS runtime option. */
  extraArgs: readonly string[];
  lightTimeoutMs: number;
  fullTimeoutMs: number;
  /**
   * Proxy for yt-dlp (MEDIA_INFO_PROXY). Every `{session}` is replaced by a
   * fresh random id on each run, so rotating-proxy pools that key sticky
   * sessions on the user name give the fallback a new exit address.
   */
  proxy?: string;
  /**
   * Test seam (MEDIA_INFO_URL_MAP): exact URL → URL actually handed to
   * yt-dlp, applied after validation and canonicalisation. Empty unless
   * configured.
   */
  urlMap: ReadonlyMap<string, string>;
  /**
   * The gateway's egress (egress.ts): every run's --proxy, given last so no
   * MEDIA_INFO_YTDLP_ARGS can replace it, and the runs' environment; `proxy`
   * is then the egress's upstream, not yt-dlp's. The gateway always sets it
   * (server.ts); absent, yt-dlp connects on its own (tests of other parts).
   */
  egress?: LookupEgress;
  /**
   * The MediaPlatforms' routes (api-gateway/src/platform-lookups.ts): a URL
   * of a platform is fetched through a session of its ProxyPool, with its
   * cookies and yt-dlp options. Absent: no platforms.
   */
  routes?: LookupRoutes;
  /** Lookups at once per replica; more are refused with `busy` (503). */
  maxConcurrent: number;
  /** Lookups at once per API key on a replica; more are refused with `key_busy` (429), so one key cannot hold every slot. */
  maxPerKey: number;
}

/** One run's way out for a URL of a MediaPlatform (docs/adr/0027, "The gateway's lookups"). */
export interface LookupRoute {
  /** The platform's name, for the log. */
  platform: string;
  /** yt-dlp options of the platform: its ytdlpArgs, `--cookies <a private copy of one cookie file>`. */
  args: readonly string[];
  /** The run's --proxy when the platform has a pool: an egress chained to the pool proxy's session. */
  proxyUrl?: string;
  /** That proxy's id (never its URL): the next run's new session avoids it. */
  proxyId?: string;
  /** Remove the cookie copy, close the chained egress. */
  close(): Promise<void>;
}

export interface LookupRoutes {
  /**
   * The route of one run for `url` (as the client gave it, before
   * MEDIA_INFO_URL_MAP): undefined for a URL of no platform. `previous` is
   * the route of the run before for the same request, whose proxy the new
   * session avoids. Throws when the platform's route cannot be made (a
   * Secret missing): the run does not go out another way.
   */
  open(url: string, previous?: LookupRoute): Promise<LookupRoute | undefined>;
}

export const LIGHT_TIMEOUT_MS = 6_000;
export const FULL_TIMEOUT_MS = 20_000;

export const DEFAULT_MEDIA_INFO_OPTIONS: MediaInfoOptions = {
  command: ['yt-dlp'],
  extraArgs: [],
  lightTimeoutMs: LIGHT_TIMEOUT_MS,
  fullTimeoutMs: FULL_TIMEOUT_MS,
  urlMap: new Map(),
  maxConcurrent: 16,
  maxPerKey: 4,
};

export type Stage = 'light' | 'full';

/** The judgement of one run's output: a value, or why not. */
export type Verdict<T> = { ok: true; value: T } | { ok: false; failure: FailureCategory };

/** Turns a parsed info JSON (and yt-dlp's warnings) into a verdict for one endpoint. */
export type Assess<T> = (info: YtDlpInfo, stderr: string) => Verdict<T>;

export interface AttemptRecord {
  stage: Stage;
  ms: number;
  outcome: 'ok' | FailureCategory;
  /** yt-dlp's error line, URLs removed (for the log only). */
  detail?: string;
  /** The MediaPlatform the run was routed for, and the pool proxy it went through (ids, never URLs). */
  platform?: string;
  proxy?: string;
}

export type LookupResult<T> =
  | { ok: true; value: T; attempts: AttemptRecord[] }
  | { ok: false; failure: FailureCategory; attempts: AttemptRecord[] }
  /** The caller aborted (client gone): the process was killed, nothing to answer. */
  | { ok: false; aborted: true; attempts: AttemptRecord[] };

/** Options of both runs: config files, caches and downloads off; one item, never a playlist's entries. */
const COMMON_ARGS = [
  '--ignore-config',
  '--no-cache-dir',
  '--dump-single-json',
  '--skip-download',
  '--no-playlist',
  '--flat-playlist',
  '--ignore-no-formats-error',
  '--no-progress',
];

const STAGE_ARGS: Record<Stage, readonly string[]> = {
  light: ['--extractor-retries', '0', '--extractor-args', 'youtube:skip=dash,translated_subs;player_skip=configs'],
  full: ['--extractor-retries', '1'],
};

const MAX_INFO_BYTES = 32 * 1024 * 1024;

export class MediaInfoExtractor {
  readonly options: MediaInfoOptions;
  private inFlight = 0;
  private readonly inFlightOfKey = new Map<string, number>();

  constructor(options: Partial<MediaInfoOptions> = {}) {
    this.options = { ...DEFAULT_MEDIA_INFO_OPTIONS, ...options };
  }

  private boundMs(stage: Stage): number {
    return stage === 'light' ? this.options.lightTimeoutMs : this.options.fullTimeoutMs;
  }

  /** The yt-dlp argv of one run; `session` fills the proxy's `{session}`; `route`, a platform's. */
  argv(stage: Stage, url: string, session: string, route?: LookupRoute): string[] {
    // Half the hard bound: a single stalled connection ends as yt-dlp's own
    // (classifiable) timeout error, well before the kill.
    const socketTimeout = Math.max(1, Math.floor(this.boundMs(stage) / 2000));
    return [
      ...this.options.command,
      ...COMMON_ARGS,
      '--socket-timeout', String(socketTimeout),
      ...STAGE_ARGS[stage],
      ...proxyArgs(this.options, session, route),
      '--', this.options.urlMap.get(url) ?? url,
    ];
  }

  /**
   * Look `url` up: the lightweight run, then, if its failure is one the full
   * run may not share, the full run. `signal` aborts (and kills) whatever
   * runs. `holder` (the API key) is held to maxPerKey lookups at once.
   * `routeUrl` is the URL the client gave when `url` is a rewrite of it (is-short's
   * canonical watch URL): it decides the platform, as a job's URL does (ADR 0027).
   */
  async lookup<T>(url: string, assess: Assess<T>, signal?: AbortSignal, holder?: string, routeUrl = url): Promise<LookupResult<T>> {
    const attempts: AttemptRecord[] = [];
    const held = holder === undefined ? 0 : this.inFlightOfKey.get(holder) ?? 0;
    if (held >= this.options.maxPerKey) return { ok: false, failure: 'key_busy', attempts };
    if (this.inFlight >= this.options.maxConcurrent) return { ok: false, failure: 'busy', attempts };
    this.inFlight++;
    if (holder !== undefined) this.inFlightOfKey.set(holder, held + 1);
    try {
      let failure: FailureCategory = 'extractor_error';
      let previous: LookupRoute | undefined;
      for (const stage of ['light', 'full'] as const) {
        // Each run its own route: the full run's "new proxy session" is a new session of the platform's pool.
        const opened = await openRoute(this.options.routes, routeUrl, previous);
        if ('failure' in opened) {
          attempts.push({ stage, ms: 0, outcome: opened.failure, detail: opened.detail });
          return { ok: false, failure: opened.failure, attempts };
        }
        const route = opened.route;
        const on = route ? { platform: route.platform, ...(route.proxyId !== undefined && { proxy: route.proxyId }) } : {};
        let run: BoundedRun;
        try {
          run = await runBounded(this.argv(stage, url, randomBytes(8).toString('hex'), route), {
            timeoutMs: this.boundMs(stage),
            signal,
            maxStdoutBytes: MAX_INFO_BYTES,
            ...(this.options.egress && { env: this.options.egress.env() }),
          });
        } finally {
          await route?.close();
        }
        if (run.aborted) return { ok: false, aborted: true, attempts };
        const verdict = judge(run, assess);
        if (verdict.ok) {
          attempts.push({ stage, ms: run.ms, outcome: 'ok', ...on });
          return { ok: true, value: verdict.value, attempts };
        }
        const detail = logDetail(run.stderr);
        attempts.push({ stage, ms: run.ms, outcome: verdict.failure, ...(detail !== undefined && { detail }), ...on });
        failure = verdict.failure;
        previous = route;
        if (!worthFallback(failure)) break;
      }
      return { ok: false, failure, attempts };
    } finally {
      this.inFlight--;
      if (holder !== undefined) this.release(holder);
    }
  }

  private release(holder: string): void {
    const n = (this.inFlightOfKey.get(holder) ?? 1) - 1;
    if (n > 0) this.inFlightOfKey.set(holder, n);
    else this.inFlightOfKey.delete(holder);
  }

  /** Lookups running now (for tests and metrics). */
  get running(): number {
    return this.inFlight;
  }
}

/**
 * The proxy and extra arguments of a run, in that order: with the egress,
 * its --proxy comes after MEDIA_INFO_YTDLP_ARGS (yt-dlp keeps the last); the
 * deployment's MEDIA_INFO_PROXY is then the egress's upstream. Without it,
 * MEDIA_INFO_PROXY with `session` in place of every `{session}`.
 */
export function proxyArgs(options: Pick<MediaInfoOptions, 'proxy' | 'egress' | 'extraArgs'>, session: string, route?: LookupRoute): string[] {
  // A platform's options after the deployment's (yt-dlp keeps an option's last value), its pool's session last of all.
  if (route) return [...options.extraArgs, ...route.args, ...(route.proxyUrl ? ['--proxy', route.proxyUrl] : options.egress ? ['--proxy', options.egress.proxyUrl(session)] : [])];
  if (options.egress) return [...options.extraArgs, '--proxy', options.egress.proxyUrl(session)];
  const proxy = options.proxy?.replaceAll('{session}', session);
  return [...(proxy ? ['--proxy', proxy] : []), ...options.extraArgs];
}

/**
 * The route of a run, or the failure when the platform's route cannot be
 * made: a temporary one (the platform's Secrets are the admin's to fix),
 * its cause for the log only (errors of a route name no secret).
 */
export async function openRoute(routes: LookupRoutes | undefined, url: string, previous?: LookupRoute): Promise<{ route: LookupRoute | undefined } | { failure: FailureCategory; detail: string }> {
  try {
    return { route: await routes?.open(url, previous) };
  } catch (err) {
    return { failure: 'upstream_error', detail: `platform route: ${(err as Error)?.message ?? String(err)}` };
  }
}

/** What one finished run says. */
function judge<T>(run: BoundedRun, assess: Assess<T>): Verdict<T> {
  if (run.spawnError) return { ok: false, failure: 'extractor_missing' };
  if (run.timedOut) return { ok: false, failure: 'timeout' };
  if (run.exitCode !== 0) return { ok: false, failure: classifyFailedRun(run.stderr) };
  if (run.stdoutTruncated) return { ok: false, failure: 'extractor_error' };
  let info: unknown;
  try {
    info = JSON.parse(run.stdout);
  } catch {
    return { ok: false, failure: 'extractor_error' };
  }
  // yt-dlp prints `null` when extraction failed outright.
  if (info === null || typeof info !== 'object' || Array.isArray(info)) return { ok: false, failure: classifyFailedRun(run.stderr) };
  return assess(info as YtDlpInfo, run.stderr);
}
