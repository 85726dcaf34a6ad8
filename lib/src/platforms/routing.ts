// Which proxy, session and cookie file a run against a platform takes
// (docs/adr/0027), as pure functions over what is known: shared by the
// operator, which routes each attempt of a job (operator/src/platforms.ts),
// and the gateway, which routes its own yt-dlp runs of /metadata,
// /is-short and playlist expansion (api-gateway/src/platform-lookups.ts).
// No I/O and no clock of their own (`now` is an argument).
import { createHash } from 'node:crypto';
import type { CookieStatus, ProxyStatus } from './types.js';

/** `<first 12 hex of sha256(job id)>-<attempt>`: the attempt's proxy session, the same for its probe, download and segments. */
export function sessionId(jobId: string, attempt: number): string {
  return `${createHash('sha256').update(jobId).digest('hex').slice(0, 12)}-${attempt}`;
}

/**
 * The upstream URL the runner chains to: the proxy's URL (from the pool or
 * its Secret, credentials included), with `{session}` of the pool's
 * usernameTemplate in its user name when the pool has one.
 */
export function upstreamUrl(proxyUrl: string, usernameTemplate: string | undefined, session: string): string {
  if (!usernameTemplate) return proxyUrl;
  const u = new URL(proxyUrl);
  u.username = encodeURIComponent(usernameTemplate.replaceAll('{session}', session));
  return u.toString().replace(/\/$/, '');
}

/** A proxy's state now: cooling down until its coolingUntil, Ready after. */
export function proxyStateAt(p: Pick<ProxyStatus, 'coolingUntil'>, now: number): 'Ready' | 'CoolingDown' {
  return p.coolingUntil && Date.parse(p.coolingUntil) > now ? 'CoolingDown' : 'Ready';
}

export type ProxyPick = { id: string } | { wait: 'cooling' | 'proxy_rate' };

/**
 * The proxy of an attempt: `prefer` when it is Ready and below its limit
 * (a re-probe goes back to the exit whose signed URL ran out); else among
 * the Ready ones below their per-minute start limit, the one with the
 * fewest starts in the last minute; on a tie not `avoid` (the proxy whose
 * defence asked for a new session), then by id. None: every proxy cools
 * down, or every Ready one is at its limit.
 */
export function pickProxy(
  proxies: readonly Pick<ProxyStatus, 'id' | 'coolingUntil'>[], startsLastMinute: (id: string) => number, now: number,
  opts: { perProxyPerMinute?: number | undefined; avoid?: string | undefined; prefer?: string | undefined } = {},
): ProxyPick {
  const ready = proxies.filter((p) => proxyStateAt(p, now) === 'Ready');
  if (!ready.length) return { wait: 'cooling' };
  const open = ready.filter((p) => opts.perProxyPerMinute === undefined || startsLastMinute(p.id) < opts.perProxyPerMinute);
  if (!open.length) return { wait: 'proxy_rate' };
  if (opts.prefer !== undefined && open.some((p) => p.id === opts.prefer)) return { id: opts.prefer };
  const rank = (p: { id: string }) => [startsLastMinute(p.id), p.id === opts.avoid ? 1 : 0] as const;
  const best = open.reduce((a, b) => {
    const [ra, rb] = [rank(a), rank(b)];
    return ra[0] !== rb[0] ? (ra[0] < rb[0] ? a : b) : ra[1] !== rb[1] ? (ra[1] < rb[1] ? a : b) : a.id <= b.id ? a : b;
  });
  return { id: best.id };
}

/**
 * The cookie file of an attempt: round-robin (`turn` counts up per pick)
 * over the files not marked unhealthy; when every file is, over all of them
 * (the job may still get through, and the alert is already firing).
 */
export function pickCookie(ids: readonly string[], health: readonly CookieStatus[] | undefined, turn: number): string | undefined {
  if (!ids.length) return undefined;
  const sorted = [...ids].sort();
  const unhealthy = new Set((health ?? []).filter((c) => !c.healthy).map((c) => c.id));
  const healthy = sorted.filter((id) => !unhealthy.has(id));
  const from = healthy.length ? healthy : sorted;
  return from[turn % from.length];
}

