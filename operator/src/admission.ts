// Admission: at most MAX_RUNNING_JOBS MediaJobs hold a runner slot (their
// Job exists or is being made), at most MAX_RUNNING_PER_KEY of one API key
// and MAX_RUNNING_PER_ORG of one organization's keys; the others wait. A
// free slot goes round-robin across the keys that have jobs waiting (the
// key after the last one served, skipping keys at their cap or whose
// organization is), oldest first within one key, so one key that queues
// thousands of jobs or hours of live recording cannot starve the others.
// Owns the admitted and waiting sets only: what a waiting job's status says
// is status.ts's, creating the Job is children.ts's.
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

/** Why a job waits: every slot is taken, or its key or its organization runs as many jobs as it may. */
export type WaitReason = 'capacity' | 'key_limit' | 'organization_limit';

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

  /**
   * `wake` is called for each waiting job a slot was given to (the
   * controller enqueues it); `onAdmitted` with the creation time of every job
   * given a slot (the admission wait-time metric).
   */
  constructor(
    private readonly limits: AdmissionLimits, private readonly wake: (key: string) => void, private readonly onAdmitted?: (createdAt: number) => void,
  ) {}

  /** Jobs holding a slot, and jobs waiting for one. */
  counts(): { running: number; waiting: number } {
    return { running: this.admitted.size, waiting: this.waiting.size };
  }

  /** Start over with the jobs known to hold a slot (on becoming leader, from the caches). */
  reset(holding: Iterable<readonly [string, Owner]>): void {
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

  /** Ask for a slot: admitted now, or in line and why it waits. */
  admit(key: string, owner: Owner, createdAt: number): AdmitOutcome {
    if (!this.admitted.has(key)) {
      this.enqueue(key, owner, createdAt);
      this.fill(key);
    }
    if (this.admitted.has(key)) return { admitted: true };
    const waitingFor = this.atCap(owner) ?? 'capacity';
    return { admitted: false, waitingFor, limit: this.limitOf(waitingFor) };
  }

  /** `key` finished or went away: free its slot and give free slots to the next in turn. */
  release(key: string): void {
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
      const next = this.nextInTurn();
      if (!next) return;
      this.leaveLine(next);
      this.hold(next.key, next.owner);
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
