// Admission: at most MAX_RUNNING_JOBS MediaJobs hold a runner slot (their
// Job exists or is being made); the others wait and are let in oldest
// first. Owns the admitted and waiting sets only: what a waiting job's
// status says is status.ts's, creating the Job is children.ts's.

export class Admission {
  /** MediaJob keys holding a runner slot. */
  private readonly admitted = new Set<string>();
  /** MediaJob keys waiting for a slot, with their creation time (FIFO admission). */
  private readonly waiting = new Map<string, number>();

  /** `wake` is called for each waiting key a freed slot lets in (the controller enqueues it). */
  constructor(private readonly maxRunning: number, private readonly wake: (key: string) => void) {}

  /** Start over with the keys known to hold a slot (on becoming leader, from the caches). */
  reset(holding: Iterable<string>): void {
    this.admitted.clear();
    this.waiting.clear();
    for (const key of holding) this.admitted.add(key);
  }

  has(key: string): boolean {
    return this.admitted.has(key);
  }

  /** Ask for a slot; true when `key` holds one now, false when it waits in line (it is then in line). */
  admit(key: string, createdAt: number): boolean {
    const free = this.maxRunning - this.admitted.size;
    if (!this.waiting.has(key)) this.waiting.set(key, createdAt);
    if (free <= 0) return false;
    if (!this.oldestWaiting(free).includes(key)) return false;
    this.waiting.delete(key);
    this.admitted.add(key);
    return true;
  }

  /** `key` finished or went away: free its slot and wake the ones first in line. */
  release(key: string): void {
    this.waiting.delete(key);
    if (!this.admitted.delete(key)) return;
    for (const k of this.oldestWaiting(this.maxRunning - this.admitted.size)) this.wake(k);
  }

  /**
   * The `n` waiting keys first in line. admit() and release() must agree
   * on this order: creation timestamps have one-second resolution, so ties
   * are common, and a release that woke a different tied job than the one
   * admit() lets in left the right one asleep until its periodic re-check.
   */
  oldestWaiting(n: number): string[] {
    if (n <= 0) return [];
    return [...this.waiting.entries()].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1)).slice(0, n).map(([k]) => k);
  }
}
