// Admission: at most MAX_RUNNING_JOBS MediaJobs hold a runner slot (their
// Job exists or is being made), at most MAX_RUNNING_PER_KEY of one API key
// and MAX_RUNNING_PER_ORG of one organization's keys; the others wait. A
// free slot goes round-robin across the keys that have jobs waiting (the
// key after the last one served, skipping keys at their cap or whose
// organization is), oldest first within one key, so one key that queues
// thousands of jobs or hours of live recording cannot starve the others.
// Owns the admitted and waiting sets only: what a waiting job's status says
// is status.ts's, creating the Job is children.ts's.
//
// A job of a MediaPlatform (docs/adr/0027) first takes a slot of its
// platform's own Admission (its maxRunning, fair between keys the same
// way, and a gate: the platform's start rate and circuit breaker, which
// platforms.ts keeps), then a slot here. A job that waits for its platform
// is not in line here, so the global slots go to jobs that can run.
import type { MediaJob, Owned } from '@mediajobs/lib/mediajob/types';
import { ORGANIZATION_LABEL } from '@mediajobs/lib/mediajob/build';


export interface Owner {
  apiKeyId: string;
  organizationId?: string;
}

export function ownerOf(mj: Owned<MediaJob>): Owner {
  const organizationId = mj.metadata.labels?.[ORGANIZATION_LABEL];
  return { apiKeyId: mj.spec.owner.apiKeyId, ...(organizationId ? { organizationId } : {}) };
}

/** Running jobs at once: in all, per key, per organization; 0 for the last two means no cap of their own. */
export interface AdmissionLimits {
  maxRunning: number;
  perKey: number;
  perOrg: number;
}

/**
 * Why a job waits: every slot is taken, its key or its organization runs as many jobs as it may, its platform
 * runs or starts as many as it may, or its platform's circuit breaker is open.
 */
export type WaitReason = 'capacity' | 'key_limit' | 'organization_limit' | 'platform_limit' | 'platform_paused';

/** What else may hold a job back than the slots: a start rate, a circuit breaker (platforms.ts). */
export interface AdmissionGate {
  /** Undefined: the next job in turn may start now; else why none may, and the limit that holds them. */
  closed(): { reason: WaitReason; limit: number } | undefined;
  /** `key` was given a slot: a start to count, a probe to record. */
  started(key: string): void;
}

export type AdmitOutcome = { admitted: true } | { admitted: false; waitingFor: WaitReason; limit: number };

interface Waiting {
  key: string;
  owner: Owner;
  createdAt: number;
}

/** Line order: creation time, then name (creation timestamps have one-second resolution, so ties are common). */
const before = (a: Waiting, b: Waiting) => a.createdAt - b.createdAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/** The organization group an owner's jobs count against: its organization, or the key alone. */
const groupOf = (o: Owner) => (o.organizationId ? `org:${o.organizationId}` : `key:${o.apiKeyId}`);

export class Admission {
  /** MediaJob keys holding a runner slot, with the owner they count against. */
  private readonly admitted = new Map<string, Owner>();
  /** MediaJob keys waiting for a slot. */
  private readonly waiting = new Map<string, Waiting>();
  /** Per API key, its waiting jobs in line order: the head is found without looking at the rest. */
  private readonly lines = new Map<string, Waiting[]>();
  /** API keys with jobs waiting, sorted: the round-robin ring. */
  private readonly ring: string[] = [];
  private readonly runningPerKey = new Map<string, number>();
  private readonly runningPerGroup = new Map<string, number>();
  /** The key the last slot went to; the next turn is the one after it in the ring. */
  private lastServed: string | undefined;
  /** Per MediaJob key, the platform Admission it holds or waits for a slot of. */
  private readonly platformOf = new Map<string, Admission>();
  private readonly limits: AdmissionLimits;

  /**
   * `wake` is called for each waiting job a slot was given to (the
   * controller enqueues it); `onAdmitted` with the creation time of every job
   * given a slot (the admission wait-time metric).
   */
  /**
   * A platform's Admission has a `gate` and says `platform_limit` where
   * this one says `capacity`.
   */
  constructor(
    limits: AdmissionLimits, private readonly wake: (key: string) => void, private readonly onAdmitted?: (createdAt: number) => void,
    private readonly gate?: AdmissionGate, private readonly capacityReason: WaitReason = 'capacity',
  ) {
    this.limits = { ...limits };
  }

  /** A changed running cap (a MediaPlatform's maxRunning edited): a higher one lets the next in. */
  setMaxRunning(maxRunning: number): void {
    if (this.limits.maxRunning === maxRunning) return;
    this.limits.maxRunning = maxRunning;
    this.fill(undefined);
  }

  /** Let the next in if the gate opened since (a minute's starts passed, the breaker half-opened). */
  recheck(): void {
    this.fill(undefined);
  }

  /** Jobs holding a slot, and jobs waiting for one. */
  counts(): { running: number; waiting: number } {
    return { running: this.admitted.size, waiting: this.waiting.size };
  }

  /** Start over with the jobs known to hold a slot (on becoming leader, from the caches), and their platforms'. */
  reset(holding: Iterable<readonly [string, Owner, Admission?]>): void {
    const list = [...holding];
    const platforms = new Set([...this.platformOf.values(), ...list.flatMap(([, , p]) => (p ? [p] : []))]);
    for (const p of platforms) p.reset(list.filter(([, , q]) => q === p).map(([k, o]) => [k, o] as const));
    this.platformOf.clear();
    for (const [key, , p] of list) if (p) this.platformOf.set(key, p);
    this.admitted.clear();
    this.waiting.clear();
    this.lines.clear();
    this.ring.length = 0;
    this.runningPerKey.clear();
    this.runningPerGroup.clear();
    this.lastServed = undefined;
    for (const [key, owner] of holding) this.hold(key, owner);
  }

  has(key: string): boolean {
    return this.admitted.has(key);
  }

  /** Ask for a slot (of `platform` first, when the job has one): admitted now, or in line and why it waits. */
  admit(key: string, owner: Owner, createdAt: number, platform?: Admission): AdmitOutcome {
    const before = this.platformOf.get(key);
    if (before !== platform) {
      before?.release(key);
      if (platform) this.platformOf.set(key, platform);
      else this.platformOf.delete(key);
    }
    if (platform && !this.admitted.has(key)) {
      const p = platform.admit(key, owner, createdAt);
      if (!p.admitted) {
        // Not in line here while its platform holds it back (it may have been, before its platform appeared).
        const queued = this.waiting.get(key);
        if (queued) this.leaveLine(queued);
        return p;
      }
    }
    if (!this.admitted.has(key)) {
      this.enqueue(key, owner, createdAt);
      this.fill(key);
    }
    if (this.admitted.has(key)) return { admitted: true };
    const closed = this.gate?.closed();
    if (closed) return { admitted: false, waitingFor: closed.reason, limit: closed.limit };
    const waitingFor = this.atCap(owner) ?? this.capacityReason;
    return { admitted: false, waitingFor, limit: this.limitOf(waitingFor) };
  }

  /** `key` finished or went away: free its slot and give free slots to the next in turn. */
  release(key: string): void {
    this.platformOf.get(key)?.release(key);
    this.platformOf.delete(key);
    const queued = this.waiting.get(key);
    if (queued) this.leaveLine(queued);
    const owner = this.admitted.get(key);
    if (!owner) return;
    this.admitted.delete(key);
    this.count(owner, -1);
    this.fill(undefined);
  }

  /** Give free slots away, each to the next eligible key's oldest job; `asking` is the job whose pass is running (not woken). */
  private fill(asking: string | undefined): void {
    while (this.admitted.size < this.limits.maxRunning) {
      if (this.waiting.size === 0 || this.gate?.closed()) return;
      const next = this.nextInTurn();
      if (!next) return;
      this.leaveLine(next);
      this.hold(next.key, next.owner);
      this.gate?.started(next.key);
      this.onAdmitted?.(next.createdAt);
      this.lastServed = next.owner.apiKeyId;
      if (next.key !== asking) this.wake(next.key);
    }
  }

  /** The oldest job of the first key after the last one served whose key and organization are below their caps: O(keys waiting). */
  private nextInTurn(): Waiting | undefined {
    const n = this.ring.length;
    const start = this.lastServed === undefined ? 0 : upperBound(this.ring, this.lastServed);
    for (let i = 0; i < n; i++) {
      const head = this.lines.get(this.ring[(start + i) % n]!)![0]!;
      if (!this.atCap(head.owner)) return head;
    }
    return undefined;
  }

  private limitOf(reason: WaitReason): number {
    return reason === 'key_limit' ? this.limits.perKey : reason === 'organization_limit' ? this.limits.perOrg : this.limits.maxRunning;
  }

  private atCap(owner: Owner): WaitReason | undefined {
    const { perKey, perOrg } = this.limits;
    if (perKey > 0 && (this.runningPerKey.get(owner.apiKeyId) ?? 0) >= perKey) return 'key_limit';
    if (perOrg > 0 && (this.runningPerGroup.get(groupOf(owner)) ?? 0) >= perOrg) return 'organization_limit';
    return undefined;
  }

  private hold(key: string, owner: Owner): void {
    if (this.admitted.has(key)) return;
    this.admitted.set(key, owner);
    this.count(owner, 1);
  }

  private count(owner: Owner, by: 1 | -1): void {
    bump(this.runningPerKey, owner.apiKeyId, by);
    bump(this.runningPerGroup, groupOf(owner), by);
  }

  /** Put `key` in its owner's line once; a job whose owner changed (a label added since) moves to the new owner's line. */
  private enqueue(key: string, owner: Owner, createdAt: number): void {
    const queued = this.waiting.get(key);
    if (queued && sameOwner(queued.owner, owner)) return;
    if (queued) this.leaveLine(queued);
    this.joinLine({ key, owner, createdAt });
  }

  private joinLine(w: Waiting): void {
    this.waiting.set(w.key, w);
    let line = this.lines.get(w.owner.apiKeyId);
    if (!line) {
      line = [];
      this.lines.set(w.owner.apiKeyId, line);
      this.ring.splice(upperBound(this.ring, w.owner.apiKeyId), 0, w.owner.apiKeyId);
    }
    line.splice(insertionPoint(line, w), 0, w);
  }

  private leaveLine(w: Waiting): void {
    this.waiting.delete(w.key);
    const line = this.lines.get(w.owner.apiKeyId)!;
    line.splice(insertionPoint(line, w), 1);
    if (line.length) return;
    this.lines.delete(w.owner.apiKeyId);
    this.ring.splice(upperBound(this.ring, w.owner.apiKeyId) - 1, 1);
  }
}

function sameOwner(a: Owner, b: Owner): boolean {
  return a.apiKeyId === b.apiKeyId && a.organizationId === b.organizationId;
}

function bump(counts: Map<string, number>, id: string, by: number): void {
  const n = (counts.get(id) ?? 0) + by;
  if (n > 0) counts.set(id, n);
  else counts.delete(id);
}

/** Index of the first entry of the sorted `ids` greater than `id`. */
function upperBound(ids: readonly string[], id: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid]! <= id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the first entry of the line not before `w`: where it goes, or where it is. */
function insertionPoint(line: readonly Waiting[], w: Waiting): number {
  let lo = 0;
  let hi = line.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(line[mid]!, w) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
