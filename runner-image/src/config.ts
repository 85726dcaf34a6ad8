// The runner's settings: the pod's environment (spine.md "Runner contract")
// through the shared config loader, and the job spec it carries.
import { isIP } from 'node:net';
import { z } from 'zod';
import { commonSchema, envInt, envJson, loadConfig, outboundSchema, storageEndpointsSchema, withOutboundAllowance } from '@mediajobs/lib/config';
import { MAX_FILENAME_LENGTH, MAX_FOLDER_LENGTH, normaliseSpecOptions } from '@mediajobs/lib/job-options';
import { invalidSpecMessage, jobOptionProblems } from '@mediajobs/lib/mediajob/spec-check';
import { specOptionsSchema, type NormalisedMediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { namesProxyOption, PROXY_OPTION_REFUSED, refusedYtdlpOptions } from '@mediajobs/lib/platforms/types';
import { DEFAULT_EGRESS_PORTS, parsePortRanges } from './egress-proxy.js';

// storageEndpointsSchema: the GCS/Drive endpoints the operator forwards; a bad value fails here, at start.
// outboundSchema: OUTBOUND_ALLOWED_CIDRS and OUTBOUND_ALLOW_PRIVATE, the gateway's and operator's
// allowance, forwarded by the operator too: the job's egress proxy (egress-proxy.ts) applies the same policy.
export const runnerEnvSchema = commonSchema.merge(storageEndpointsSchema).merge(outboundSchema).extend({
  /** JSON of the MediaJob spec (without webhookUrl). */
  MEDIAJOB_SPEC: z.string().min(2),
  /** The MediaJob to report to; without name and namespace the runner only logs (running outside a cluster). */
  MEDIAJOB_NAME: z.string().min(1).optional(),
  MEDIAJOB_NAMESPACE: z.string().min(1).optional(),
  /** The job id (spec.jobId, or metadata.uid for kubectl-made jobs): names the file when no filename is given. */
  MEDIAJOB_JOB_ID: z.string().min(1).optional(),
  /** The per-job Secret's mount; the local cluster rewrites the value to its local copy. */
  MEDIAJOBS_CREDENTIALS_DIR: z.string().min(1).default('/var/run/mediajobs/credentials'),
  /** Set by the local cluster: where this container's termination message goes instead of /dev/termination-log. */
  LOCAL_CLUSTER_TERMINATION_LOG: z.string().min(1).optional(),
  YTDLP_PATH: z.string().min(1).default('yt-dlp'),
  /**
   * Extra yt-dlp options, split on whitespace (no quoting), e.g. the image's
   * `--js-runtimes node` (current yt-dlp needs a JavaScript runtime for
   * YouTube; older ones reject the option, so it is not built in).
   */
  YTDLP_ARGS: z.string().default('').transform((s) => s.split(/\s+/).filter(Boolean))
    // The job's egress proxy is yt-dlp's only proxy; an upstream is a ProxyPool's (never silently overridden).
    .refine((args) => !namesProxyOption(args), PROXY_OPTION_REFUSED),
  /**
   * yt-dlp warns (logged at start) when its version, a date, is older than
   * this many days: platforms change, and an old extractor draws bot checks.
   */
  YTDLP_MAX_AGE_DAYS: envInt(1).default(90),
  /**
   * Set by the operator when the job's URL belongs to a MediaPlatform (issue
   * 37): its name, the ProxyPool and proxy of this attempt's session, the
   * cookie file chosen (ids only: the proxy's URL and the cookies are in the
   * job's credentials Secret, `upstream-proxy-url` and `cookies.txt`), the
   * platform's yt-dlp options and the attempt's source address. None is set
   * for a job of no platform.
   */
  RUNNER_PLATFORM: z.string().min(1).optional(),
  RUNNER_PROXY_POOL: z.string().min(1).optional(),
  RUNNER_PROXY_ID: z.string().min(1).optional(),
  RUNNER_COOKIE_ID: z.string().min(1).optional(),
  /** A JSON array of strings: the MediaPlatform's ytdlpArgs, after YTDLP_ARGS, from its allow-list, never --proxy. */
  RUNNER_PLATFORM_YTDLP_ARGS: envJson(z.array(z.string()).max(64)
    .refine((args) => !namesProxyOption(args), PROXY_OPTION_REFUSED)
    .refine((args) => refusedYtdlpOptions(args).length === 0, 'names a yt-dlp option a MediaPlatform may not set (see its ytdlpArgs)')).optional(),
  /** The address the job's egress proxy connects from (MediaPlatform sourceAddress): an IP literal of this node. */
  RUNNER_SOURCE_ADDRESS: z.string().refine((a) => isIP(a) !== 0, 'must be an IP address').optional(),
  FFMPEG_PATH: z.string().min(1).default('ffmpeg'),
  FFPROBE_PATH: z.string().min(1).default('ffprobe'),
  /** yt-dlp's socket timeout: how long a stalled connection is waited for. */
  RUNNER_SOCKET_TIMEOUT_SECONDS: envInt(1, 600).default(30),
  /** Minimum interval between progress-only status patches. */
  RUNNER_PROGRESS_INTERVAL_MS: envInt(100, 60_000).default(2000),
  /** Minimum interval between patches that change only the download's figures (status.download). */
  RUNNER_FIGURES_INTERVAL_MS: envInt(100, 600_000).default(10_000),
  /**
   * Live streams (see README "Live streams"): the longest recording (also the
   * cap on a job's maxDuration), the longest wait_for_video wait and its
   * polling interval. Wait + recording + mux and upload must fit in the
   * operator's JOB_ACTIVE_DEADLINE_SECONDS (6 h by default).
   */
  RUNNER_MAX_RECORDING_SECONDS: envInt(1).default(4 * 3600),
  RUNNER_WAIT_FOR_VIDEO_MAX_SECONDS: envInt(0).default(3600),
  RUNNER_WAIT_FOR_VIDEO_POLL_SECONDS: envInt(1, 3600).default(15),
  /**
   * The ports the job's egress proxy lets yt-dlp and ffmpeg connect to:
   * comma-separated ports and ranges. Any address they connect to must
   * pass the outbound policy (OUTBOUND_ALLOWED_CIDRS, OUTBOUND_ALLOW_PRIVATE) as well.
   */
  RUNNER_EGRESS_PORTS: z.string().default(DEFAULT_EGRESS_PORTS).transform((text, ctx) => {
    const ranges = parsePortRanges(text);
    if (ranges) return ranges;
    ctx.addIssue({ code: 'custom', message: 'must be ports or port ranges (80,443,1024-65535)' });
    return z.NEVER;
  }),
});

export type RunnerEnv = z.infer<typeof runnerEnvSchema>;

export function loadRunnerEnv(env: NodeJS.ProcessEnv = process.env): RunnerEnv {
  return withOutboundAllowance(loadConfig(runnerEnvSchema, env));
}

// zod runs the refinement after a failed url() check too: it must not throw on what is no URL.
const httpUrl = z.string().url().refine((u) => URL.canParse(u) && /^https?:$/i.test(new URL(u).protocol), 'must be an http(s) URL');

/**
 * The runner's own guard over the fields it acts on, after the CRD's checks
 * of the options (lib's jobOptionProblems): http(s) sources as WHATWG reads
 * them, so a spec can never make yt-dlp read local files, and names that
 * fit the gateway's limits.
 */
const specSchema = specOptionsSchema.extend({
  url: httpUrl,
  filename: z.string().max(MAX_FILENAME_LENGTH).optional(),
  folder: z.string().max(MAX_FOLDER_LENGTH).optional(),
  jobId: z.string().optional(),
}).loose();

/** MEDIAJOB_SPEC cannot be read at all (not JSON): the operator's bug, an internal error. */
export class SpecError extends Error {
  override readonly name: string = 'SpecError';
}

/**
 * A spec the runner cannot run as asked (the CRD's rules refuse it): the job
 * fails invalid_spec, never run with an option left out. `message` names
 * each field and its problem, never a value.
 */
export class InvalidSpec extends SpecError {
  override readonly name = 'InvalidSpec';
}

/**
 * Parse MEDIAJOB_SPEC: the options checked as the CRD checks them (types,
 * enums, bounds, patterns, clipEnd after clipStart, clip times the runner
 * can read: lib/src/mediajob/spec-check.ts), then by the runner's own guard.
 * The gateway or the operator has checked them already; this is for a spec
 * that reached the runner some other way, and no option is ever dropped:
 * throws InvalidSpec naming the fields. The options come back normalised by
 * lib's one normalisation, so nothing downstream (plan.ts) applies a
 * default of its own.
 */
export function parseSpec(json: string): NormalisedMediaJobSpec {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new SpecError('MEDIAJOB_SPEC is not valid JSON');
  }
  const problems = jobOptionProblems(raw);
  if (problems.length) throw new InvalidSpec(invalidSpecMessage(problems));
  const result = specSchema.safeParse(raw);
  if (!result.success) {
    const fields = [...new Set(result.error.issues.map((i) => ['spec', ...i.path.map(String)].join('.')))];
    throw new InvalidSpec(invalidSpecMessage(fields.map((f) => `${f}: is not valid`)));
  }
  // The gateway or the operator wrote the spec: its bitrate is no client's choice (SpecAuthor).
  return { ...result.data, ...normaliseSpecOptions(result.data, 'service') } as NormalisedMediaJobSpec;
}
