// The rate at which episode MediaJobs are created, shared by every batch the
// controller works on: a token bucket of BATCH_CREATE_PER_SECOND, holding at
// most one page (BATCH_CREATE_PAGE). A 500-episode show is created in pages
// over about ten seconds at the default 50/s, so neither the apiserver nor
// the MediaJob controller's queue takes it all at once (issue 13, part 8).

export class CreationRate {
  private tokens: number;
  private last: number;

  constructor(
    readonly perSecond: number,
    /** Most taken in one pass, and the bucket's size. */
    readonly page: number,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = page;
    this.last = now();
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.page, this.tokens + ((t - this.last) / 1000) * this.perSecond);
    this.last = t;
  }

  /** Take up to `wanted` creations now (at most a page); may be 0. */
  take(wanted: number): number {
    this.refill();
    const n = Math.max(0, Math.min(wanted, this.page, Math.floor(this.tokens)));
    this.tokens -= n;
    return n;
  }

  /** Return creations taken but not used (fewer episodes were left than taken). */
  giveBack(n: number): void {
    if (n > 0) this.tokens = Math.min(this.page, this.tokens + n);
  }

  /** How long until a full page (or `n`) can be taken: when the next pass is worth running. */
  msUntil(n = this.page): number {
    this.refill();
    const missing = Math.min(n, this.page) - this.tokens;
    return missing <= 0 ? 0 : Math.ceil((missing / this.perSecond) * 1000);
  }
}
