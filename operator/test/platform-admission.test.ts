// Per-platform admission (docs/adr/0027) as the Admission classes see it:
// a job of a platform takes a slot of its platform first (maxRunning, fair
// between keys, a gate for the start rate and the breaker), then a global
// one; a job its platform holds back is not in the global line; releases
// free both; and the retry waits a platform's defences get.
import { expect } from 'chai';
import { Admission, type AdmissionGate, type Owner, type WaitReason } from '../src/admission.js';
import { retryDelaySeconds, type RetrySettings } from '../src/retry-policy.js';

const T = Date.parse('2026-11-21T10:00:00Z');
const A: Owner = { apiKeyId: 'key-a' };
const B: Owner = { apiKeyId: 'key-b' };

function setup(global: number, platform: number, gate?: AdmissionGate) {
  const woken: string[] = [];
  const wake = (k: string) => woken.push(k);
  return {
    global: new Admission({ maxRunning: global, perKey: 0, perOrg: 0 }, wake),
    platform: new Admission({ maxRunning: platform, perKey: 0, perOrg: 0 }, wake, undefined, gate, 'platform_limit'),
    woken,
  };
}

describe('platform admission', () => {
  it('never more than the platform\'s maxRunning, while other jobs take the global slots', () => {
    const { global, platform } = setup(5, 2);
    expect(global.admit('ns/p1', A, T, platform)).to.deep.equal({ admitted: true });
    expect(global.admit('ns/p2', A, T + 1, platform)).to.deep.equal({ admitted: true });
    expect(global.admit('ns/p3', B, T + 2, platform)).to.deep.equal({ admitted: false, waitingFor: 'platform_limit', limit: 2 });
    expect(global.admit('ns/other', B, T + 3)).to.deep.equal({ admitted: true });
    expect(global.counts()).to.deep.equal({ running: 3, waiting: 0 });
    expect(platform.counts()).to.deep.equal({ running: 2, waiting: 1 });
  });

  it('a freed platform slot goes round-robin between the keys waiting for it, and frees the global slot too', () => {
    const { global, platform, woken } = setup(5, 1);
    global.admit('ns/a1', A, T, platform);
    for (const [k, o, t] of [['ns/a2', A, 1], ['ns/a3', A, 2], ['ns/b1', B, 3]] as const) global.admit(k, o, T + t, platform);
    global.release('ns/a1');
    expect(woken).to.deep.equal(['ns/b1']);
    expect(global.counts().running).to.equal(0);
    expect(global.admit('ns/b1', B, T + 3, platform)).to.deep.equal({ admitted: true });
    global.release('ns/b1');
    expect(woken).to.deep.equal(['ns/b1', 'ns/a2']);
  });

  it('a closed gate holds every job of the platform with its reason; reopened, a recheck lets the next in', () => {
    let closed: { reason: WaitReason; limit: number } | undefined = { reason: 'platform_paused', limit: 0 };
    const started: string[] = [];
    const { global, platform, woken } = setup(5, 10, { closed: () => closed, started: (k) => started.push(k) });
    expect(global.admit('ns/a', A, T, platform)).to.deep.equal({ admitted: false, waitingFor: 'platform_paused', limit: 0 });
    expect(global.counts()).to.deep.equal({ running: 0, waiting: 0 });
    closed = undefined;
    platform.recheck();
    expect(woken).to.deep.equal(['ns/a']);
    expect(started).to.deep.equal(['ns/a']);
    expect(global.admit('ns/a', A, T, platform)).to.deep.equal({ admitted: true });
  });

  it('a job waiting globally whose platform appears leaves the global line until its platform admits it', () => {
    const { global, platform } = setup(1, 1);
    global.admit('ns/run', A, T);
    expect(global.admit('ns/x', A, T + 1).admitted).to.equal(false);
    expect(global.counts().waiting).to.equal(1);
    platform.admit('ns/holder', B, T);
    expect(global.admit('ns/x', A, T + 1, platform)).to.deep.equal({ admitted: false, waitingFor: 'platform_limit', limit: 1 });
    expect(global.counts().waiting).to.equal(0);
  });

  it('reset gives each platform back the jobs that hold its slots', () => {
    const { global, platform } = setup(5, 2);
    global.reset([['ns/a', A, platform], ['ns/b', B, platform], ['ns/c', B, undefined]]);
    expect(platform.counts()).to.deep.equal({ running: 2, waiting: 0 });
    expect(global.admit('ns/d', A, T, platform).admitted).to.equal(false);
    platform.setMaxRunning(3);
    expect(global.admit('ns/d', A, T, platform)).to.deep.equal({ admitted: true });
  });

  describe('the wait after a platform\'s defence', () => {
    const s: RetrySettings = { maxAttempts: 3, backoffSeconds: 30, platformBackoffSeconds: 900, maxBackoffSeconds: 3600 };
    const cases: [string, Parameters<typeof retryDelaySeconds>, number | undefined][] = [
      ['bot check, another proxy Ready: at once', ['bot_detection', 1, { ...s, newSessionReady: true }, { kind: 'bot_check' }], 0],
      ['bot check, no other proxy Ready: the platform backoff', ['bot_detection', 1, s, { kind: 'bot_check' }], 900],
      ['sign-in, another proxy Ready: at once', ['bot_detection', 2, { ...s, newSessionReady: true }, { kind: 'sign_in' }], 0],
      ['rate limit with Retry-After: that', ['rate_limited', 1, { ...s, newSessionReady: true }, { kind: 'rate_limited', retryAfterSeconds: 42 }], 42],
      ['rate limit with a huge Retry-After: capped', ['rate_limited', 1, s, { kind: 'rate_limited', retryAfterSeconds: 99_999 }], 3600],
      ['rate limit without: the platform backoff', ['rate_limited', 2, s, { kind: 'rate_limited' }], 1800],
      ['expired signed URL: re-probe at once', ['download_failed', 1, s, { kind: 'expired_url' }], 0],
      ['the last attempt: none, defence or not', ['bot_detection', 3, { ...s, newSessionReady: true }, { kind: 'bot_check' }], undefined],
      ['a content failure is never retried', ['private', 1, { ...s, newSessionReady: true }, { kind: 'bot_check' }], undefined],
    ];
    for (const [what, args, want] of cases) it(what, () => expect(retryDelaySeconds(...args)).to.equal(want));
  });
});
