// The ProxyPool and MediaPlatform custom resources (mediajobs.io/v1alpha1,
// cluster-scoped, docs/adr/0027-platforms-and-proxy-pools.md): their names,
// the zod schemas of spec and status their TypeScript types come from, the
// yt-dlp options a platform may add, and which platform a URL belongs to.
// The CRDs (crd-source.ts beside this) document and validate the same
// fields for the apiserver; the operator parses what it reads with these
// schemas too, since a CRD may be installed without its rules.
import { z } from 'zod';
import { DEFENCE_KINDS } from '../mediajob/types.js';

export { DEFENCE_KINDS, type DefenceKind } from '../mediajob/types.js';

export const PROXYPOOL_PLURAL = 'proxypools';
export const MEDIAPLATFORM_PLURAL = 'mediaplatforms';

export const BREAKER_STATES = ['Closed', 'Open', 'HalfOpen'] as const;
export type BreakerState = (typeof BREAKER_STATES)[number];

export const PROXY_STATES = ['Ready', 'CoolingDown'] as const;
export type ProxyState = (typeof PROXY_STATES)[number];

/** The upstream proxy schemes the runner's egress proxy can chain to. */
export const PROXY_SCHEMES = ['http', 'https', 'socks5', 'socks5h'] as const;

/**
 * The yt-dlp options a MediaPlatform's ytdlpArgs may name (long form, as
 * `--opt value` or `--opt=value`): pacing, retries, headers, impersonation
 * and extractor arguments (proof-of-origin token providers take theirs
 * there). Everything that chooses where yt-dlp connects, what it reads or
 * writes, or what it runs is the runner's or the operator's (--proxy:
 * spec.proxyPool; --cookies: spec.cookies; --source-address:
 * spec.sourceAddress), so it is not on the list.
 */
export const PLATFORM_YTDLP_OPTIONS = [
  'sleep-requests', 'sleep-interval', 'min-sleep-interval', 'max-sleep-interval', 'sleep-subtitles',
  'limit-rate', 'throttled-rate', 'retries', 'fragment-retries', 'extractor-retries', 'retry-sleep', 'socket-timeout',
  'concurrent-fragments', 'http-chunk-size', 'extractor-args', 'user-agent', 'referer', 'add-headers', 'impersonate',
  'geo-bypass', 'no-geo-bypass', 'geo-bypass-country', 'xff', 'force-ipv4', 'force-ipv6',
] as const;

/** What a disabled platform's new job is told: the gateway's 422, a MediaJob's error (reason platform_disabled). */
export const PLATFORM_DISABLED_MESSAGE = 'Downloads from this platform are disabled';

/** The message of a platform's or a deployment's `--proxy`, wherever it is refused. */
export const PROXY_OPTION_REFUSED = '--proxy is not allowed: route a platform\'s downloads through a ProxyPool (MediaPlatform spec.proxyPool)';

/** Whether an argument list names yt-dlp's --proxy (as `--proxy URL` or `--proxy=URL`). */
export function namesProxyOption(args: readonly string[]): boolean {
  return args.some((a) => a === '--proxy' || a.startsWith('--proxy='));
}

/** The options of `args` that are not on PLATFORM_YTDLP_OPTIONS (values, which do not start with "-", pass). */
export function refusedYtdlpOptions(args: readonly string[]): string[] {
  const allowed = new Set<string>(PLATFORM_YTDLP_OPTIONS);
  return args.filter((a) => a.startsWith('-') && !allowed.has(a.replace(/^--/, '').split('=')[0]!)).map((a) => a.split('=')[0]!);
}

const secretKeyRefSchema = z.object({ namespace: z.string(), name: z.string(), key: z.string() });
const secretRefSchema = z.object({ namespace: z.string(), name: z.string() });

export const proxySchema = z.object({
  /** A DNS label, unique in its pool: the proxy's name in status, metrics and Events. */
  id: z.string(),
  /** The proxy's URL without credentials; exactly one of url and urlSecretRef. */
  url: z.string().optional(),
  /** A key of a Secret holding the proxy's URL, credentials included. */
  urlSecretRef: secretKeyRefSchema.optional(),
});

export const proxyPoolSpecSchema = z.object({
  proxies: z.array(proxySchema).min(1),
  /** Providers that pin an exit per user name: `{session}` is replaced by the attempt's session id. */
  session: z.object({ usernameTemplate: z.string() }).optional(),
  /** How long a proxy that drew a defence rests; doubles with each further defence in a row. */
  coolDownSeconds: z.number().int().min(0).default(300),
});

export const proxyStatusSchema = z.object({
  id: z.string(),
  state: z.enum(PROXY_STATES),
  successes: z.number().int().min(0),
  defences: z.number().int().min(0),
  /** Defences since its last success: the cool-down's doubling. */
  consecutiveDefences: z.number().int().min(0).optional(),
  lastDefence: z.string().optional(),
  lastDefenceKind: z.enum(DEFENCE_KINDS).optional(),
  /** Until when it cools down (RFC 3339). */
  coolingUntil: z.string().optional(),
});

export const conditionSchema = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string(),
  message: z.string(),
  lastTransitionTime: z.string(),
  observedGeneration: z.number().int().min(0).optional(),
});

export const proxyPoolStatusSchema = z.object({
  proxies: z.array(proxyStatusSchema).optional(),
  ready: z.number().int().min(0).optional(),
  total: z.number().int().min(0).optional(),
  observedGeneration: z.number().int().min(0).optional(),
  conditions: z.array(conditionSchema).optional(),
});

export const breakerSpecSchema = z.object({
  defences: z.number().int().min(1).default(5),
  windowSeconds: z.number().int().min(1).default(120),
  coolDownSeconds: z.number().int().min(1).default(600),
});

export const mediaPlatformSpecSchema = z.object({
  match: z.object({
    hosts: z.array(z.string()).min(1),
    extractors: z.array(z.string()).optional(),
  }),
  /** Runner Jobs against the platform at once, cluster-wide; absent: no cap of its own. */
  maxRunning: z.number().int().min(1).optional(),
  /** Job starts per minute against the platform; absent: no rate of its own. */
  startsPerMinute: z.number().int().min(1).optional(),
  /** Job starts per minute through one proxy of the pool. */
  startsPerMinutePerProxy: z.number().int().min(1).optional(),
  proxyPool: z.string().optional(),
  cookies: z.object({ secretRef: secretRefSchema }).optional(),
  ytdlpArgs: z.array(z.string()).optional(),
  /** A routed prefix each attempt takes a source address from (yt-dlp --source-address). */
  sourceAddress: z.object({ cidr: z.string() }).optional(),
  breaker: breakerSpecSchema.prefault({}),
  disabled: z.boolean().default(false),
});

export const cookieStatusSchema = z.object({
  id: z.string(),
  healthy: z.boolean(),
  lastFailure: z.string().optional(),
});

export const mediaPlatformStatusSchema = z.object({
  breaker: z.enum(BREAKER_STATES).optional(),
  /** When the breaker last opened (RFC 3339): it half-opens coolDownSeconds later. */
  openedAt: z.string().optional(),
  /** The defences inside the breaker's window, oldest first (RFC 3339 times). */
  recentDefences: z.array(z.string()).optional(),
  /** The MediaJob ("namespace/name") admitted as the half-open breaker's probe. */
  probe: z.string().optional(),
  running: z.number().int().min(0).optional(),
  waiting: z.number().int().min(0).optional(),
  cookies: z.array(cookieStatusSchema).optional(),
  /** The cookie Secret's resourceVersion the health marks are for: a changed Secret clears them. */
  cookiesVersion: z.string().optional(),
  observedGeneration: z.number().int().min(0).optional(),
  conditions: z.array(conditionSchema).optional(),
});

export type ProxySpec = z.output<typeof proxySchema>;
export type ProxyPoolSpec = z.output<typeof proxyPoolSpecSchema>;
export type ProxyStatus = z.output<typeof proxyStatusSchema>;
export type ProxyPoolStatus = z.output<typeof proxyPoolStatusSchema>;
export type MediaPlatformSpec = z.output<typeof mediaPlatformSpecSchema>;
export type MediaPlatformStatus = z.output<typeof mediaPlatformStatusSchema>;
export type BreakerSpec = z.output<typeof breakerSpecSchema>;
export type CookieStatus = z.output<typeof cookieStatusSchema>;
export type PlatformCondition = z.output<typeof conditionSchema>;

interface ClusterMeta {
  name?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
}

export interface ProxyPool {
  apiVersion: 'mediajobs.io/v1alpha1';
  kind: 'ProxyPool';
  metadata: ClusterMeta;
  spec: ProxyPoolSpec;
  status?: ProxyPoolStatus;
}

export interface MediaPlatform {
  apiVersion: 'mediajobs.io/v1alpha1';
  kind: 'MediaPlatform';
  metadata: ClusterMeta;
  spec: MediaPlatformSpec;
  status?: MediaPlatformStatus;
}

/**
 * The platform a URL belongs to: the one whose match.hosts names its host
 * (`host` or `host:port` as the URL writes them, case-insensitive, exact;
 * `*.example.com` any subdomain of example.com, not example.com itself).
 * An exact entry wins over a wildcard, a longer wildcard over a shorter,
 * then the platform's name in order, so two overlapping platforms always
 * give the same answer. Undefined: no platform, the job runs as without.
 */
export function platformForUrl<P extends { metadata: { name?: string }; spec: { match: { hosts: string[] } } }>(
  platforms: Iterable<P>, url: string,
): P | undefined {
  let host: string;
  try {
    host = new URL(url).host.toLowerCase();
  } catch {
    return undefined;
  }
  let best: { p: P; score: number } | undefined;
  for (const p of platforms) {
    for (const entry of p.spec.match.hosts) {
      const score = hostMatchScore(entry.toLowerCase(), host);
      if (score === 0) continue;
      if (!best || score > best.score || (score === best.score && (p.metadata.name ?? '') < (best.p.metadata.name ?? ''))) best = { p, score };
    }
  }
  return best?.p;
}

/** 0: no match; an exact match outranks every wildcard; a wildcard ranks by its length. */
function hostMatchScore(entry: string, host: string): number {
  if (entry === host) return Number.MAX_SAFE_INTEGER;
  if (entry.startsWith('*.') && host.endsWith(entry.slice(1)) && host.length > entry.length - 1) return entry.length;
  return 0;
}
