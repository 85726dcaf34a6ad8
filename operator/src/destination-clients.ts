// Storage clients the operator keeps for users' destinations, so checking a
// completion's claims (stored-files.ts) does not build an SDK client and open
// a connection for every job: a fresh client's three HEADs took 62 ms at p50
// on loopback s3rver, a kept one's 10 ms (issue 35, operator/bench/claims-check.ts).
//
// An entry is keyed by a digest of the destination's whole document
// (credentials included), so jobs share a client only when they would have
// built the same one; the digest and the document are never logged. What a
// kept client may read stays bounded as a one-shot client's is
// (REMOVAL_BUDGET): each entry reads through one ReadBudget (the outbound
// policy checked as each socket opens, bytes counted over the entry's
// life), is retired once it has read half of it or lived ENTRY_MAX_AGE_MS,
// and each use has its own deadline, past which the entry's sockets are
// destroyed (the use fails unreachable: the pass is tried again). A job's
// Secret that now holds another document retires the entry its old one
// used. At most MAX_ENTRIES are kept; a retired entry closes once its last
// use ends.
import { createHash } from 'node:crypto';
import { OutboundPolicy, type OutboundPolicyOptions } from '@mediajobs/lib/outbound';
import { ReadBudget, ReadBudgetError, type ReadBudgetOptions } from '@mediajobs/lib/read-budget';
import { createProvider, type CreateProviderOptions } from '@mediajobs/lib/storage/index';
import { StorageError, type StorageProvider } from '@mediajobs/lib/storage/types';

export const MAX_ENTRIES = 64;
export const ENTRY_MAX_AGE_MS = 60_000;
/** How long an unused entry keeps its connections. */
const IDLE_CLOSE_MS = 30_000;

interface Entry {
  provider: StorageProvider;
  budget: ReadBudget;
  created: number;
  uses: number;
  retired: boolean;
  idle?: NodeJS.Timeout;
}

export class DestinationClients {
  readonly #entries = new Map<string, Entry>();
  /** The digest each job's Secret (namespace/name) last held. */
  readonly #bySecret = new Map<string, string>();

  constructor(
    private readonly budget: ReadBudgetOptions,
    /** OUTBOUND_ALLOWED_CIDRS: what the policy allows beyond public addresses (none when absent). */
    private readonly allowed: OutboundPolicyOptions['allowed'],
    private readonly options: Omit<CreateProviderOptions, 'agents'>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Entries kept (retired ones still in use not counted). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Run `use` with a client for `doc`, read from the Secret `secretRef`,
   * within the per-use deadline. Throws what `use` throws; a use cut by the
   * budget throws StorageError unreachable.
   */
  async with<T>(secretRef: string, doc: unknown, use: (provider: StorageProvider) => Promise<T>): Promise<T> {
    const digest = createHash('sha256').update(JSON.stringify(doc)).digest('hex');
    const before = this.#bySecret.get(secretRef);
    if (before !== undefined && before !== digest) this.#retire(before);
    this.#bySecret.delete(secretRef);
    this.#bySecret.set(secretRef, digest);
    if (this.#bySecret.size > MAX_ENTRIES * 16) this.#bySecret.delete(this.#bySecret.keys().next().value!);
    const entry = await this.#acquire(digest, doc);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.#retire(digest, entry);
        entry.budget.close();
        reject(new StorageError('unreachable', 'read_deadline', new ReadBudgetError('deadline').message, { provider: entry.provider.name }));
      }, this.budget.deadlineMs);
      timer.unref();
    });
    try {
      return await Promise.race([use(entry.provider), deadline]);
    } catch (err) {
      // A client whose connection failed is not kept: the next use opens a fresh one.
      this.#retire(digest, entry);
      throw err;
    } finally {
      clearTimeout(timer);
      this.#release(entry);
    }
  }

  /** Close every entry (the operator stops). */
  close(): void {
    for (const digest of [...this.#entries.keys()]) this.#retire(digest);
  }

  async #acquire(digest: string, doc: unknown): Promise<Entry> {
    const kept = this.#entries.get(digest);
    if (kept && !this.#spent(kept)) {
      this.#entries.delete(digest);
      this.#entries.set(digest, kept); // most recently used last
      clearTimeout(kept.idle);
      kept.uses++;
      return kept;
    }
    if (kept) this.#retire(digest, kept);
    const budget = new ReadBudget({
      // The entry's own deadline is a backstop behind each use's: no use starts after ENTRY_MAX_AGE_MS.
      maxBytes: this.budget.maxBytes, deadlineMs: ENTRY_MAX_AGE_MS + this.budget.deadlineMs,
      policy: new OutboundPolicy({ allowed: this.allowed }),
    });
    let provider: StorageProvider;
    try {
      provider = await createProvider(doc, { ...this.options, agents: budget });
    } catch (err) {
      budget.close();
      throw err;
    }
    const entry: Entry = { provider, budget, created: this.now(), uses: 1, retired: false };
    // Another use may have built one meanwhile: the newer one is kept, the older closes after its uses.
    const raced = this.#entries.get(digest);
    if (raced) this.#retire(digest, raced);
    this.#entries.set(digest, entry);
    while (this.#entries.size > MAX_ENTRIES) this.#retire(this.#entries.keys().next().value!);
    return entry;
  }

  #spent(e: Entry): boolean {
    return e.retired || !!e.budget.exceeded || e.budget.bytesRead * 2 > e.budget.maxBytes || this.now() - e.created >= ENTRY_MAX_AGE_MS;
  }

  #release(e: Entry): void {
    e.uses--;
    if (e.uses > 0) return;
    if (e.retired) return this.#close(e);
    e.idle = setTimeout(() => {
      const digest = [...this.#entries].find(([, v]) => v === e)?.[0];
      if (digest !== undefined) this.#retire(digest, e);
    }, IDLE_CLOSE_MS);
    e.idle.unref();
  }

  /** No new use of the entry; closed now when none runs, else when the last ends. */
  #retire(digest: string, only?: Entry): void {
    const e = this.#entries.get(digest);
    if (e && (!only || e === only)) this.#entries.delete(digest);
    const target = only ?? e;
    if (!target || target.retired) return;
    target.retired = true;
    clearTimeout(target.idle);
    if (target.uses === 0) this.#close(target);
  }

  #close(e: Entry): void {
    (e.provider as { destroy?: () => void }).destroy?.();
    e.budget.close();
  }
}
