// An optional write throttle that answers as kube-apiserver's API Priority
// and Fairness does when it rejects a request: 429, a Retry-After header in
// whole seconds (at least 1), and the plain-text body of its tooManyRequests
// (k8s.io/apiserver/pkg/server/filters/maxinflight.go, used by
// priority-and-fairness.go) -- not a JSON Status: client-go and client-node
// see the code and the header. Real APF limits concurrency per priority
// level, not a rate; a rate is what tests need to drive a client's backoff
// reproducibly ("past N writes per second, 429").
import type { ServerResponse } from 'node:http';

export const TOO_MANY_REQUESTS_TEXT = 'Too many requests, please try again later.\n';

/** Verbs APF counts as mutating; reads and watches are never throttled here. */
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export class WriteThrottle {
  private tokens: number;
  private last: number;
  /** Writes turned away so far (for tests and the benchmark). */
  rejected = 0;

  constructor(readonly perSecond: number, private readonly now: () => number = Date.now) {
    if (!(perSecond > 0)) throw new RangeError('the write rate must be positive');
    // One second's worth of burst, as a bucket the size of the rate.
    this.tokens = perSecond;
    this.last = now();
  }

  /** Whether this request may go ahead; a write takes a token. */
  admit(method: string): boolean {
    if (!WRITES.has(method)) return true;
    const t = this.now();
    this.tokens = Math.min(this.perSecond, this.tokens + ((t - this.last) / 1000) * this.perSecond);
    this.last = t;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.rejected++;
    return false;
  }

  /** Seconds until a write would be admitted, as APF says it: an integer, at least 1. */
  retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((1 - this.tokens) / this.perSecond));
  }

  /** kube-apiserver's answer to a request it will not serve now. */
  refuse(res: ServerResponse): void {
    res.writeHead(429, {
      'Retry-After': String(this.retryAfterSeconds()),
      'Content-Type': 'text/plain; charset=utf-8',
      'X-Content-Type-Options': 'nosniff',
      'Content-Length': Buffer.byteLength(TOO_MANY_REQUESTS_TEXT),
    });
    res.end(TOO_MANY_REQUESTS_TEXT);
  }
}
