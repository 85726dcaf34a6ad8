// The reduced soak (issue 34 item 3): about two minutes of bursts and idle
// gaps with the operator's timers compressed to seconds, the gateway, the
// operator and the local cluster each in its own process. An operator that
// falls into a relist loop after its first watchdog period or relist (as it
// did: four LISTs a second per informer, forever) fails here; so does one
// that logs warnings while nothing happens. `make soak` is the long run.
import { expect } from 'chai';
import { runSoak } from './run-soak.js';

describe('soak, reduced: an operator that settles', function () {
  // Three cycles of 10 s of load and 25 s of quiet (five watchdog periods each), and the start of four processes;
  // on a loaded machine each quiet gap starts later, when its burst's jobs have ended (run-soak.ts): up to a minute more each.
  this.timeout(420_000);

  it('every job ends as scripted; while idle: no warning, and at most one LIST per kind per relist period', async () => {
    const relistSeconds = 40;
    const r = await runSoak({
      warmUpSeconds: 0, seconds: 105, burstSeconds: 10, idleSeconds: 25, rate: 1,
      timers: { watchdogSeconds: 5, relistSeconds, resyncSeconds: 10, bookmarkMs: 1_000 },
    });
    // The informers' kinds: each is listed at start and once per relist period, whatever the load.
    const allowed = 1 + Math.ceil(r.seconds / relistSeconds);
    for (const kind of ['mediajobs.mediajobs.io', 'jobs.batch', 'pods', 'mediabatches.mediajobs.io']) {
      expect(r.lists[kind] ?? 0, `LISTs of ${kind} in ${r.seconds.toFixed(0)} s`).to.be.within(1, allowed);
    }
    for (const [kind, n] of Object.entries(r.lists)) expect(n, `LISTs of ${kind}`).to.be.at.most(allowed);
    expect(r.errors, 'unexpected answers').to.deep.equal({});
    expect(r.wrongEnd, 'jobs that ended otherwise than their script').to.deep.equal({});
    expect(r.stillRunning).to.equal(0);
    expect(r.accepted).to.be.at.least(25);
    expect(r.idleSeconds, `time spent idle (the longest wait for a burst's jobs to end: ${r.longestDrainSeconds} s)`).to.be.at.least(40);
    expect(r.idleWarnings, 'warning lines while idle').to.deep.equal([]);
  });
});
