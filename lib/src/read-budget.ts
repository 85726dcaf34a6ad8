// A budget of bytes and time for everything one short-lived client reads from
// an address a user chose (a storage probe's SDK client: POST /user/s3,
// inline storage of POST /jobs). The SDKs read a whole error body into
// memory before they parse it, and none of them stops a transfer when the
// caller stops waiting: a 30 MB error body took a probe 1.2 GB of RSS and
// 16 s, a 300 MB one exhausted the heap. So the bound sits under the SDK, on
// its sockets: the client is built with this budget's agents, every byte
// any of its sockets reads (headers included, after TLS) counts against one
// total, and the first byte past `maxBytes`, or the deadline, destroys every
// socket the budget opened and refuses new ones (the SDK's retries too).
// The SDK then fails with whatever error its socket gave it; the caller
// asks `exceeded` why, and answers through its own error path.
//
// With a `policy`, its agents are also the outbound-address policy's
// (outbound-agents.ts): every connection checked as it opens, a refused one
// failing before a byte is sent; the caller asks `refused` why.
//
// The budget is for one operation, not one response: a client that keeps
// a connection for many requests (an upload, a download served through the
// gateway) needs none. Feeds and lookups have their own bounded GET
// (batches/http-get.ts), webhooks read a fixed excerpt (operator/src/webhook-post.ts).
import type http from 'node:http';
import type https from 'node:https';
import type { Duplex } from 'node:stream';
import type { OutboundPolicy, RefusedCategory } from './outbound.js';
import { checkedAgents, type BoundedAgents } from './outbound-agents.js';

export type BudgetExceeded = 'bytes' | 'deadline';

/** What a socket of an exhausted budget is destroyed with; providers map it as unreachable (storage/types.ts NETWORK_ERROR_CODES). */
export class ReadBudgetError extends Error {
  readonly code: 'ERR_RESPONSE_TOO_LARGE' | 'ERR_READ_DEADLINE';
  constructor(readonly exceeded: BudgetExceeded) {
    super(exceeded === 'bytes' ? 'response larger than the read budget' : 'read deadline passed');
    this.name = 'ReadBudgetError';
    this.code = exceeded === 'bytes' ? 'ERR_RESPONSE_TOO_LARGE' : 'ERR_READ_DEADLINE';
  }
}

export interface ReadBudgetOptions {
  /** Bytes all sockets together may read, headers included. */
  maxBytes: number;
  /**
   * Milliseconds from the first connection after which every socket is
   * destroyed. From the first connection, not from construction: building
   * the client loads its SDK first, seconds on a loaded machine, and that is
   * not the backend's time.
   */
  deadlineMs: number;
  /** The addresses the sockets may connect to; absent: any (an address the service chose, not a user). */
  policy?: OutboundPolicy;
}

export class ReadBudget implements BoundedAgents {
  readonly http: http.Agent;
  readonly https: https.Agent;
  readonly maxBytes: number;
  readonly #deadlineMs: number;
  #bytesRead = 0;
  #exceeded: BudgetExceeded | undefined;
  #refused: RefusedCategory | undefined;
  #closed = false;
  readonly #sockets = new Set<Duplex>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ReadBudgetOptions) {
    this.maxBytes = options.maxBytes;
    this.#deadlineMs = options.deadlineMs;
    const agents = checkedAgents({
      policy: options.policy,
      onRefused: (category) => (this.#refused ??= category),
      onSocket: (socket) => this.#watch(socket),
      // After the budget ran out, a retry's connection fails before anything is opened.
      refuseNew: () => (this.#exceeded || this.#closed ? new ReadBudgetError(this.#exceeded ?? 'deadline') : undefined),
    });
    this.http = agents.http;
    this.https = agents.https;
  }

  /** Why the policy refused a connection, once it has. */
  get refused(): RefusedCategory | undefined {
    return this.#refused;
  }

  /** Bytes read so far by every socket of the budget. */
  get bytesRead(): number {
    return this.#bytesRead;
  }

  /** Why the budget cut its sockets, once it has. */
  get exceeded(): BudgetExceeded | undefined {
    return this.#exceeded;
  }

  /** Destroy every socket and stop the deadline; the agents open nothing afterwards. */
  close(): void {
    clearTimeout(this.#timer);
    this.#closed = true;
    this.http.destroy();
    this.https.destroy();
    for (const socket of this.#sockets) socket.destroy();
  }

  #watch(socket: Duplex): Duplex {
    if (!this.#timer) {
      this.#timer = setTimeout(() => this.#trip('deadline'), this.#deadlineMs);
      this.#timer.unref();
    }
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    // A second 'data' listener beside the HTTP parser's: it sees every chunk the parser does, nothing more.
    socket.on('data', (chunk: Buffer) => {
      this.#bytesRead += chunk.length;
      if (this.#bytesRead > this.maxBytes) this.#trip('bytes');
    });
    return socket;
  }

  #trip(why: BudgetExceeded): void {
    if (this.#exceeded) return;
    this.#exceeded = why;
    clearTimeout(this.#timer);
    for (const socket of this.#sockets) socket.destroy(new ReadBudgetError(why));
  }
}
