// The retry policy (src/retry.ts) rule by rule: which outcomes send a
// request again, and how long the client waits first.
import { expect } from 'chai';
import { RETRY_DEFAULTS } from '../src/index.js';
import { retryAfterMs, retryDelay, retryable, type Outcome } from '../src/retry.js';

const answer = (status: number, retryAfter: string | null = null): Outcome => ({ status, retryAfter });
const noAnswer: Outcome = { status: undefined };

describe('@mediajobs/client retry policy', () => {
  const table: [string, string, boolean, Outcome, boolean][] = [
    ['429, any request', 'POST', false, answer(429, '1'), true],
    ['503 with Retry-After, any request', 'PATCH', false, answer(503, '2'), true],
    ['503 without Retry-After, an unkeyed POST', 'POST', false, answer(503), false],
    ['503 without Retry-After, a GET', 'GET', false, answer(503), true],
    ['500, a GET', 'GET', false, answer(500), true],
    ['500, a keyed POST (the key is released)', 'POST', true, answer(500), true],
    ['500, an unkeyed POST (it may have run)', 'POST', false, answer(500), false],
    ['no answer, a keyed POST', 'POST', true, noAnswer, true],
    ['no answer, an unkeyed POST', 'POST', false, noAnswer, false],
    ['no answer, a DELETE', 'DELETE', false, noAnswer, true],
    ['409 to a keyed POST (the first is in flight)', 'POST', true, answer(409), true],
    ['409 to an unkeyed POST (a cancel of a finished job)', 'POST', false, answer(409), false],
    ['422 to a keyed POST (the key was used for another body)', 'POST', true, answer(422), false],
    ['400', 'GET', false, answer(400), false],
    ['401', 'GET', false, answer(401), false],
    ['404', 'GET', false, answer(404), false],
    ['408, a GET', 'GET', false, answer(408), true],
  ];
  for (const [what, method, keyed, outcome, expected] of table) {
    it(`${expected ? 'retries' : 'does not retry'}: ${what}`, () => {
      expect(retryable(method, keyed, outcome)).to.equal(expected);
    });
  }

  it('waits what Retry-After says, in seconds or as an HTTP date', () => {
    const now = Date.UTC(2026, 0, 1);
    expect(retryAfterMs('1', now)).to.equal(1000);
    expect(retryAfterMs(new Date(now + 3000).toUTCString(), now)).to.equal(3000);
    expect(retryAfterMs('soon', now)).to.equal(undefined);
    expect(retryDelay(1, answer(429, '2'), RETRY_DEFAULTS, () => 0.5, now)).to.equal(2000);
  });

  it('does not wait a Retry-After beyond maxRetryAfterMs: the error is the answer', () => {
    expect(retryDelay(1, answer(503, '3600'), RETRY_DEFAULTS)).to.equal(undefined);
  });

  it('backs off exponentially otherwise, between half and all of the doubled delay, up to the cap', () => {
    const d = (retry: number, r: number) => retryDelay(retry, noAnswer, RETRY_DEFAULTS, () => r);
    expect([d(1, 0), d(1, 1), d(2, 0), d(3, 1), d(10, 1)]).to.deep.equal([250, 500, 500, 2000, RETRY_DEFAULTS.maxDelayMs]);
  });
});
