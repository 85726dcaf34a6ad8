// The decisions of platforms and proxy pools (docs/adr/0027), as pure
// functions over what is known: which proxy and session an attempt takes,
// which cookie file, the upstream URL the runner chains to, a per-attempt
// source address, how a defence is answered, and the circuit breaker's
// transitions. No I/O and no clock of their own (`now` is an argument):
// platforms.ts reads the caches and Secrets, calls these, and writes the
// statuses, metrics and Events.
import { createHash } from 'node:crypto';
import type { BreakerSpec, BreakerState, DefenceKind, MediaPlatformStatus } from '@mediajobs/lib/platforms/types';

// The picks the gateway's lookups make too live in lib.
export { pickCookie, pickProxy, proxyStateAt, sessionId, upstreamUrl, type ProxyPick } from '@mediajobs/lib/platforms/routing';

/** A proxy's cool-down doubles with each defence in a row, up to this many times its coolDownSeconds. */
export const MAX_COOL_DOWN_FACTOR = 16;

/** How long a proxy rests after its `consecutive`-th defence in a row. */
export function coolDownSeconds(base: number, consecutive: number): number {
  return base * Math.min(MAX_COOL_DOWN_FACTOR, 2 ** Math.max(0, consecutive - 1));
}

/**
 * A source address for an attempt from a routed prefix (cobalt's freebind):
 * the prefix's network bits and host bits from sha256(job id, attempt), so
 * an attempt keeps its address across passes and the next one gets another.
 * Undefined for a prefix this cannot read.
 */
export function sourceAddress(cidr: string, jobId: string, attempt: number): string | undefined {
  const [addr, bitsText] = cidr.split('/');
  const bits = Number(bitsText);
  const v4 = /^\d+\.\d+\.\d+\.\d+$/.test(addr ?? '');
  const width = v4 ? 32 : 128;
  const base = v4 ? parseV4(addr!) : parseV6(addr ?? '');
  if (base === undefined || !Number.isInteger(bits) || bits < 0 || bits > width) return undefined;
  const hostBits = BigInt(width - bits);
  const hostMask = (1n << hostBits) - 1n;
  const hash = BigInt(`0x${createHash('sha256').update(`${jobId}/${attempt}`).digest('hex')}`);
  const value = (base & ~hostMask & ((1n << BigInt(width)) - 1n)) | (hash & hostMask);
  return v4 ? formatV4(value) : formatV6(value);
}

function parseV4(s: string): bigint | undefined {
  const parts = s.split('.').map(Number);
  if (parts.some((n) => !Number.isInteger(n) || n < 0 || n > 255)) return undefined;
  return parts.reduce((acc, n) => (acc << 8n) | BigInt(n), 0n);
}

function parseV6(s: string): bigint | undefined {
  if (!/^[0-9a-fA-F:]+$/.test(s)) return undefined;
  const [head, tail, extra] = s.split('::');
  if (extra !== undefined) return undefined;
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const missing = 8 - h.length - t.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return undefined;
  const groups = [...h, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...t];
  if (groups.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(`0x${g}`), 0n);
}

function formatV4(v: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((v >> s) & 255n)).join('.');
}

function formatV6(v: bigint): string {
  const groups = Array.from({ length: 8 }, (_, i) => ((v >> BigInt(112 - 16 * i)) & 0xffffn).toString(16));
  return groups.join(':');
}

/** What the operator does about one defence (docs/adr/0027, the runner's table in runner-image/README.md). */
export interface DefenceAnswer {
  /** The proxy the attempt went through cools down. */
  coolProxy: boolean;
  /** The cookie file it used is marked unhealthy. */
  markCookie: boolean;
  /** Counted against the platform's circuit breaker. */
  breaker: boolean;
  /** The next attempt: at once on another proxy session, at once on the same one (a re-probe), or after a backoff. */
  retry: 'new_session' | 'reprobe' | 'backoff';
}

export const DEFENCE_ANSWERS: Readonly<Record<DefenceKind, DefenceAnswer>> = {
  // The platform wants a human from this exit: another exit may pass at once; this one rests.
  bot_check: { coolProxy: true, markCookie: false, breaker: true, retry: 'new_session' },
  captcha: { coolProxy: true, markCookie: false, breaker: true, retry: 'new_session' },
  forbidden: { coolProxy: true, markCookie: false, breaker: true, retry: 'new_session' },
  // Sign-in demanded: the exit is suspect, and the cookie file that did not satisfy it is stale.
  sign_in: { coolProxy: true, markCookie: true, breaker: true, retry: 'new_session' },
  // Slow down: another exit would be the hammering it complains about; wait as it said.
  rate_limited: { coolProxy: false, markCookie: false, breaker: true, retry: 'backoff' },
  // A signed media URL that ran out: nothing was refused, the page must be read again.
  expired_url: { coolProxy: false, markCookie: false, breaker: false, retry: 'reprobe' },
};

/** The answer to a reported kind; a kind this operator does not know (a newer runner's) is answered as a bot check. */
export function defenceAnswer(kind: string): DefenceAnswer {
  return Object.hasOwn(DEFENCE_ANSWERS, kind) ? DEFENCE_ANSWERS[kind as DefenceKind] : DEFENCE_ANSWERS.bot_check;
}

// ---- the circuit breaker ---------------------------------------------------

/** The breaker's part of a MediaPlatform's status. */
export type BreakerStatus = Pick<MediaPlatformStatus, 'breaker' | 'openedAt' | 'recentDefences' | 'probe'>;

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The breaker's state now: an Open one whose cool-down has passed is HalfOpen. */
export function breakerState(s: BreakerStatus, spec: BreakerSpec, now: number): BreakerState {
  const state = s.breaker ?? 'Closed';
  if (state !== 'Open') return state;
  const opened = s.openedAt ? Date.parse(s.openedAt) : NaN;
  return Number.isFinite(opened) && now >= opened + spec.coolDownSeconds * 1000 ? 'HalfOpen' : 'Open';
}

/** Whether a new job of the platform may start now: yes, only as the half-open probe, or not (paused). */
export function breakerGate(s: BreakerStatus, spec: BreakerSpec, now: number): 'admit' | 'probe' | 'paused' {
  const state = breakerState(s, spec, now);
  if (state === 'Closed') return 'admit';
  if (state === 'HalfOpen' && !s.probe) return 'probe';
  return 'paused';
}

/** The breaker after the half-open probe `key` was admitted. */
export function probeAdmitted(s: BreakerStatus, key: string): BreakerStatus {
  return { ...s, breaker: 'HalfOpen', probe: key };
}

/**
 * The breaker after a defence at `now` of the job `key`: counted in the
 * window; Closed opens once the window holds `defences` of them; a
 * half-open breaker opens again on any defence (its probe's or a job's that
 * ran before it opened).
 */
export function afterDefence(s: BreakerStatus, spec: BreakerSpec, now: number): BreakerStatus {
  const since = now - spec.windowSeconds * 1000;
  const recent = [...(s.recentDefences ?? []).filter((t) => Date.parse(t) > since), iso(now)].slice(-spec.defences);
  const state = breakerState(s, spec, now);
  if (state === 'Open') return { ...s, recentDefences: recent };
  if (state === 'HalfOpen' || recent.length >= spec.defences) {
    const { probe: _p, ...rest } = s;
    return { ...rest, breaker: 'Open', openedAt: iso(now), recentDefences: recent };
  }
  return { ...s, breaker: 'Closed', recentDefences: recent };
}

/**
 * The breaker after a job of the platform ended without a defence. The
 * half-open probe's success (the platform served it: Completed, Warning or
 * Skipped) closes it; the probe's failure of another kind lets another
 * probe go. Other jobs change nothing.
 */
export function afterOutcome(s: BreakerStatus, spec: BreakerSpec, now: number, key: string, served: boolean): BreakerStatus {
  if (s.probe !== key) return s;
  const { probe: _p, ...rest } = s;
  if (!served) return rest;
  if (breakerState(s, spec, now) !== 'HalfOpen') return rest;
  const { recentDefences: _r, openedAt: _o, ...closed } = rest;
  return { ...closed, breaker: 'Closed' };
}
