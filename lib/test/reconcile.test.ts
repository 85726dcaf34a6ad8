// The reconcile result model as the work queue applies it: a pass that asks
// to be looked at again is, after that delay; a temporary failure retries
// (after its own delay, or with growing backoff); a permanent one is never
// retried and goes to its owner once; a pass that succeeds starts backoff over.
import { expect } from 'chai';
import { DONE, PermanentError, TemporaryError, earliest, type ReconcileResult } from '../src/reconcile.js';
import { WorkQueue } from '../src/work-queue.js';

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

/** Runs of a handler, as ms since the first. */
function clock() {
  const at: number[] = [];
  return { at, mark: () => at.push(Date.now()), gaps: () => at.slice(1).map((t, i) => t - at[i]!) };
}

async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await tick(5);
  }
}

describe('reconcile results', () => {
  it('the earliest of several requeue requests wins; none asks for nothing', () => {
    expect(earliest({ requeueAfter: 3000 }, DONE, { requeueAfter: 1000 }, undefined, { requeueAfter: 2000 })).to.deep.equal({ requeueAfter: 1000 });
    expect(earliest(DONE, { requeueAfter: 0 }, undefined)).to.deep.equal({});
    expect(earliest()).to.deep.equal({});
  });

  it('a pass that returns requeueAfter runs again after that delay, and not before', async () => {
    const c = clock();
    const q = new WorkQueue((): ReconcileResult => {
      c.mark();
      return c.at.length === 1 ? { requeueAfter: 80 } : DONE;
    });
    q.add('k');
    await until(() => c.at.length === 2);
    expect(c.gaps()[0]).to.be.within(75, 400);
    await tick(150);
    expect(c.at, 'no further pass without a request').to.have.length(2);
    await q.stop();
  });

  it('a temporary error is retried with growing backoff; one with a delay waits that delay instead', async () => {
    const backoff = clock();
    const q = new WorkQueue(() => {
      backoff.mark();
      if (backoff.at.length < 4) throw new TemporaryError('not ready');
    }, { retryBaseMs: 30, retryMaxMs: 1000 });
    q.add('k');
    await until(() => backoff.at.length === 4);
    const [a, b, c] = backoff.gaps() as [number, number, number];
    expect(a).to.be.at.least(25);
    expect(b).to.be.at.least(55);
    expect(c).to.be.at.least(115);

    const delayed = clock();
    const q2 = new WorkQueue(() => {
      delayed.mark();
      if (delayed.at.length < 3) throw new TemporaryError('waiting for the pod', 40);
    }, { retryBaseMs: 5000 });
    q2.add('k');
    await until(() => delayed.at.length === 3);
    // Its own delay each time, not the (much longer) backoff, and not growing.
    for (const gap of delayed.gaps()) expect(gap).to.be.within(35, 1000);
    await Promise.all([q.stop(), q2.stop()]);
  });

  it('any other error counts as temporary and is retried', async () => {
    const c = clock();
    const errors: unknown[] = [];
    const q = new WorkQueue(() => {
      c.mark();
      if (c.at.length === 1) throw new Error('connection reset');
    }, { retryBaseMs: 20, onError: (_k, err) => errors.push(err) });
    q.add('k');
    await until(() => c.at.length === 2);
    expect(errors.map((e) => (e as Error).message)).to.deep.equal(['connection reset']);
    await q.stop();
  });

  it('a permanent error is never retried: it is reported once to onPermanent, not to onError', async () => {
    const c = clock();
    const permanent: [string, PermanentError][] = [];
    const errors: unknown[] = [];
    const q = new WorkQueue(() => {
      c.mark();
      throw new PermanentError('storage_unreachable', 'The storage destination is unreachable');
    }, {
      retryBaseMs: 5,
      onError: (_k, err) => errors.push(err),
      onPermanent: (key, err) => { permanent.push([key, err]); },
    });
    q.add('ns/job');
    await until(() => permanent.length === 1);
    await tick(100);
    expect(c.at, 'one pass only').to.have.length(1);
    expect(permanent).to.have.length(1);
    expect(permanent[0]![0]).to.equal('ns/job');
    expect(permanent[0]![1]).to.include({ reason: 'storage_unreachable', message: 'The storage destination is unreachable' });
    expect(errors).to.deep.equal([]);
    await q.stop();
  });

  it('recording a permanent error may ask to look again later; a recording that fails is retried until it succeeds', async () => {
    const passes = clock();
    let recordings = 0;
    const q = new WorkQueue(() => {
      passes.mark();
      // Once recorded, the object is finished: the next pass only cleans up.
      if (recordings < 2) throw new PermanentError('invalid_owner', 'no such key');
    }, {
      retryBaseMs: 20,
      onPermanent: () => {
        recordings++;
        if (recordings === 1) throw new Error('status patch failed');
        return { requeueAfter: 60 };
      },
    });
    q.add('k');
    await until(() => passes.at.length === 3);
    const [retry, ttl] = passes.gaps() as [number, number];
    expect(retry, 'the failed recording retried with backoff').to.be.at.least(15);
    expect(ttl, 'the recording asked to look again after 60 ms').to.be.at.least(55);
    expect(recordings).to.equal(2);
    await tick(100);
    expect(passes.at).to.have.length(3);
    await q.stop();
  });

  it('a pass that succeeds resets the key\'s backoff', async () => {
    const c = clock();
    const failOn = new Set([1, 2, 4]);
    const q = new WorkQueue(() => {
      c.mark();
      if (failOn.has(c.at.length)) throw new Error('flaky');
    }, { retryBaseMs: 40, retryMaxMs: 10_000 });
    q.add('k');
    await until(() => c.at.length === 3); // failed, failed (backoff now 80 ms), succeeded
    q.add('k');
    await until(() => c.at.length === 5); // failed again: the retry waits the base delay, not 160 ms
    const gaps = c.gaps();
    expect(gaps[1]).to.be.at.least(75);
    expect(gaps[3]).to.be.within(35, 120);
    await q.stop();
  });

  it('a requeueAfter also resets backoff, as in controller-runtime', async () => {
    const c = clock();
    const q = new WorkQueue((): ReconcileResult | void => {
      c.mark();
      const n = c.at.length;
      if (n === 1 || n === 2 || n === 4) throw new Error('flaky');
      if (n === 3) return { requeueAfter: 10 };
    }, { retryBaseMs: 40, retryMaxMs: 10_000 });
    q.add('k');
    await until(() => c.at.length === 5);
    expect(c.gaps()[3]).to.be.within(35, 120);
    await q.stop();
  });
});
