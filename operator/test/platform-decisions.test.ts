// The platform decisions as tables: which proxy and cookie an attempt
// takes, the session and upstream URL, the source address, the answer to
// each defence kind, and every breaker transition.
import { expect } from 'chai';
import { DEFENCE_KINDS } from '@mediajobs/lib/mediajob/types';
import { platformForUrl, refusedYtdlpOptions, namesProxyOption } from '@mediajobs/lib/platforms/types';
import {
  DEFENCE_ANSWERS, afterDefence, afterOutcome, breakerGate, breakerState, coolDownSeconds, defenceAnswer, pickCookie, pickProxy, probeAdmitted,
  sessionId, sourceAddress, upstreamUrl, type BreakerStatus,
} from '../src/platform-decisions.js';
import { loadOperatorConfig } from '../src/config.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const SPEC = { defences: 3, windowSeconds: 60, coolDownSeconds: 600 };

describe('platform decisions', () => {
  describe('platformForUrl', () => {
    const p = (name: string, ...hosts: string[]) => ({ metadata: { name }, spec: { match: { hosts } } });
    const platforms = [p('video', 'www.video.example', 'video.example:8443'), p('any-video', '*.video.example'), p('cdn', '*.cdn.video.example'), p('b', 'x.example'), p('a', 'x.example')];
    const cases: [string, string | undefined][] = [
      ['https://www.video.example/watch?v=1', 'video'],
      ['https://WWW.Video.Example/watch', 'video'],
      ['https://video.example:8443/x', 'video'],
      ['https://video.example/x', undefined], // the entry names port 8443; the apex is not "*.video.example"
      ['https://m.video.example/x', 'any-video'],
      ['https://a.cdn.video.example/seg', 'cdn'], // the longer wildcard wins
      ['https://x.example/', 'a'], // a tie goes to the name first in order
      ['https://notvideo.example/', undefined],
      ['not a url', undefined],
    ];
    for (const [url, want] of cases) it(`${url} → ${want ?? 'none'}`, () => expect(platformForUrl(platforms, url)?.metadata.name).to.equal(want));
  });

  it('yt-dlp options: --proxy is named wherever it is, the allow-list refuses the rest', () => {
    expect(namesProxyOption(['--retries', '3', '--proxy=http://x'])).to.equal(true);
    expect(namesProxyOption(['--sleep-requests', '1'])).to.equal(false);
    expect(refusedYtdlpOptions(['--sleep-requests', '1', '--exec', 'rm', '--extractor-args=youtube:x', '-o', 'f'])).to.deep.equal(['--exec', '-o']);
  });

  it('session: 12 hex of the job id\'s sha256 and the attempt; the upstream URL carries it in its user name', () => {
    expect(sessionId('job-1', 2)).to.match(/^[0-9a-f]{12}-2$/);
    expect(sessionId('job-1', 2).slice(0, 12)).to.equal(sessionId('job-1', 3).slice(0, 12));
    expect(upstreamUrl('http://u:pw@proxy.example:3128', 'user-session-{session}', 'abc-1')).to.equal('http://user-session-abc-1:pw@proxy.example:3128');
    expect(upstreamUrl('socks5h://proxy.example:1080', undefined, 'abc-1')).to.equal('socks5h://proxy.example:1080');
  });

  it('cool-down doubles per defence in a row, capped at 16 times', () => {
    expect([1, 2, 3, 5, 9].map((n) => coolDownSeconds(300, n))).to.deep.equal([300, 600, 1200, 4800, 4800]);
  });

  describe('pickProxy', () => {
    const starts = (m: Record<string, number>) => (id: string) => m[id] ?? 0;
    const cases: [string, { id: string; coolingUntil?: string }[], Record<string, number>, { perProxyPerMinute?: number; avoid?: string; prefer?: string }, unknown][] = [
      ['fewest recent starts', [{ id: 'p1' }, { id: 'p2' }], { p1: 2, p2: 1 }, {}, { id: 'p2' }],
      ['a cooling proxy is skipped', [{ id: 'p1', coolingUntil: at(10) }, { id: 'p2' }], { p2: 5 }, {}, { id: 'p2' }],
      ['cooled down by now: Ready again', [{ id: 'p1', coolingUntil: at(-1) }, { id: 'p2' }], { p2: 1 }, {}, { id: 'p1' }],
      ['on a tie, not the previous attempt\'s', [{ id: 'p1' }, { id: 'p2' }], {}, { avoid: 'p1' }, { id: 'p2' }],
      ['on a tie, by id', [{ id: 'p2' }, { id: 'p1' }], {}, {}, { id: 'p1' }],
      ['at its per-minute limit: another', [{ id: 'p1' }, { id: 'p2' }], { p1: 2, p2: 3 }, { perProxyPerMinute: 3 }, { id: 'p1' }],
      ['every Ready one at its limit: wait', [{ id: 'p1' }, { id: 'p2', coolingUntil: at(5) }], { p1: 3 }, { perProxyPerMinute: 3 }, { wait: 'proxy_rate' }],
      ['every one cooling: wait', [{ id: 'p1', coolingUntil: at(5) }], {}, {}, { wait: 'cooling' }],
      ['a re-probe goes back to its proxy though another has fewer starts', [{ id: 'p1' }, { id: 'p2' }], { p1: 1 }, { prefer: 'p1' }, { id: 'p1' }],
      ['a re-probe whose proxy is at its limit: another', [{ id: 'p1' }, { id: 'p2' }], { p1: 2 }, { prefer: 'p1', perProxyPerMinute: 2 }, { id: 'p2' }],
      ['a re-probe whose proxy cools down: another', [{ id: 'p1', coolingUntil: at(5) }, { id: 'p2' }], {}, { prefer: 'p1' }, { id: 'p2' }],
    ];
    for (const [what, proxies, recent, opts, want] of cases) it(what, () => expect(pickProxy(proxies, starts(recent), T0, opts)).to.deep.equal(want));
  });

  it('pickCookie: round-robin over the healthy files, over all of them when none is', () => {
    const ids = ['b.txt', 'a.txt', 'c.txt'];
    expect([0, 1, 2, 3].map((t) => pickCookie(ids, [], t))).to.deep.equal(['a.txt', 'b.txt', 'c.txt', 'a.txt']);
    const health = [{ id: 'b.txt', healthy: false }, { id: 'a.txt', healthy: true }];
    expect([0, 1, 2].map((t) => pickCookie(ids, health, t))).to.deep.equal(['a.txt', 'c.txt', 'a.txt']);
    const allBad = ids.map((id) => ({ id, healthy: false }));
    expect(pickCookie(ids, allBad, 1)).to.equal('b.txt');
    expect(pickCookie([], [], 0)).to.equal(undefined);
  });

  it('sourceAddress: inside the prefix, stable per attempt, another for the next', () => {
    const a = sourceAddress('2001:db8:1234::/64', 'job-1', 1)!;
    expect(a.split(':').slice(0, 4)).to.deep.equal(['2001', 'db8', '1234', '0']);
    expect(sourceAddress('2001:db8:1234::/64', 'job-1', 1)).to.equal(a);
    expect(sourceAddress('2001:db8:1234::/64', 'job-1', 2)).to.not.equal(a);
    expect(sourceAddress('198.51.100.0/24', 'job-1', 1)).to.match(/^198\.51\.100\.\d+$/);
    expect(sourceAddress('198.51.100.7/32', 'job-1', 1)).to.equal('198.51.100.7');
    expect(sourceAddress('nonsense/8', 'job-1', 1)).to.equal(undefined);
  });

  it('every defence kind has an answer; an unknown kind is answered as a bot check', () => {
    expect(Object.keys(DEFENCE_ANSWERS).sort()).to.deep.equal([...DEFENCE_KINDS].sort());
    expect(defenceAnswer('sign_in')).to.deep.equal({ coolProxy: true, markCookie: true, breaker: true, retry: 'new_session' });
    expect(defenceAnswer('rate_limited').retry).to.equal('backoff');
    expect(defenceAnswer('expired_url')).to.deep.equal({ coolProxy: false, markCookie: false, breaker: false, retry: 'reprobe' });
    expect(defenceAnswer('from_a_newer_runner')).to.deep.equal(DEFENCE_ANSWERS.bot_check);
  });

  describe('circuit breaker', () => {
    const closed: BreakerStatus = {};
    it('Closed admits; defences below the threshold keep it Closed; old ones leave the window', () => {
      let s = afterDefence(closed, SPEC, T0);
      s = afterDefence(s, SPEC, T0 + 10_000);
      expect(breakerState(s, SPEC, T0 + 10_000)).to.equal('Closed');
      expect(breakerGate(s, SPEC, T0 + 10_000)).to.equal('admit');
      // 61 s after the first, it is out of the window: two in it, still Closed.
      s = afterDefence(s, SPEC, T0 + 61_000);
      expect(s.breaker).to.equal('Closed');
      expect(s.recentDefences).to.deep.equal([at(10), at(61)]);
    });
    it('the threshold within the window opens it; new jobs are paused until the cool-down', () => {
      let s = closed;
      for (const t of [0, 5, 9]) s = afterDefence(s, SPEC, T0 + t * 1000);
      expect(s).to.include({ breaker: 'Open', openedAt: at(9) });
      expect(breakerGate(s, SPEC, T0 + 100_000)).to.equal('paused');
      // A defence while Open (a job that ran before) does not move the cool-down.
      s = afterDefence(s, SPEC, T0 + 20_000);
      expect(s.openedAt).to.equal(at(9));
      expect(breakerState(s, SPEC, T0 + 609_000)).to.equal('HalfOpen');
      expect(breakerGate(s, SPEC, T0 + 609_000)).to.equal('probe');
    });
    const halfOpen = (): BreakerStatus => probeAdmitted({ breaker: 'Open', openedAt: at(0), recentDefences: [at(0)] }, 'ns/probe');
    it('HalfOpen: one probe only; its success closes it and clears the window', () => {
      const s = halfOpen();
      expect(breakerGate(s, SPEC, T0 + 700_000)).to.equal('paused');
      expect(afterOutcome(s, SPEC, T0 + 700_000, 'ns/other', true)).to.equal(s);
      expect(afterOutcome(s, SPEC, T0 + 700_000, 'ns/probe', true)).to.deep.equal({ breaker: 'Closed' });
    });
    it('HalfOpen: a defence opens it again, from now', () => {
      const s = afterDefence(halfOpen(), SPEC, T0 + 700_000);
      expect(s).to.include({ breaker: 'Open', openedAt: at(700) });
      expect(s.probe).to.equal(undefined);
      expect(breakerGate(s, SPEC, T0 + 700_000)).to.equal('paused');
    });
    it('HalfOpen: a probe that failed otherwise lets another probe go', () => {
      const s = afterOutcome(halfOpen(), SPEC, T0 + 700_000, 'ns/probe', false);
      expect(s.probe).to.equal(undefined);
      expect(breakerGate(s, SPEC, T0 + 700_000)).to.equal('probe');
    });
  });
});

describe('operator configuration and --proxy', () => {
  const base = { DATABASE_URL: 'postgres://x@127.0.0.1/x', SECRET_KEYS: 'k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' };
  it('refuses YTDLP_ARGS with --proxy in RUNNER_ENV at start, naming ProxyPool and never echoing the value', () => {
    for (const args of ['--proxy http://user:pw@elsewhere.example:3128', '--retries 3 --proxy=socks5://user:pw@x:1']) {
      expect(() => loadOperatorConfig({ ...base, RUNNER_ENV: JSON.stringify({ YTDLP_ARGS: args }) })).to.throw(/YTDLP_ARGS: --proxy is not allowed: .*ProxyPool/)
        .and.satisfy((e: Error) => !e.message.includes('pw'));
    }
    expect(loadOperatorConfig({ ...base, RUNNER_ENV: JSON.stringify({ YTDLP_ARGS: '--retries 3' }) }).RUNNER_ENV).to.deep.equal({ YTDLP_ARGS: '--retries 3' });
  });
});
