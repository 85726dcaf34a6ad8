import { expect } from 'chai';
import { WorkQueue } from '../src/work-queue.js';

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

/** A handler whose passes the test finishes by hand. */
function gated() {
  const started: string[] = [];
  const open = new Map<string, () => void>();
  const handler = (key: string) => new Promise<void>((resolve) => {
    started.push(key);
    open.set(key, () => { open.delete(key); resolve(); });
  });
  return { started, handler, finish: (key: string) => open.get(key)!() };
}

describe('WorkQueue', () => {
  it('runs a key once however often it is added while waiting', async () => {
    const g = gated();
    const q = new WorkQueue(g.handler, { concurrency: 1 });
    q.add('a');
    q.add('b');
    q.add('b');
    q.add('b');
    await tick();
    g.finish('a');
    await tick(5);
    g.finish('b');
    await q.idle();
    expect(g.started).to.deep.equal(['a', 'b']);
  });

  it('never runs one key twice at once, and runs it again when it was added in flight', async () => {
    const g = gated();
    const q = new WorkQueue(g.handler, { concurrency: 4 });
    q.add('a');
    await tick();
    q.add('a');
    await tick(5);
    expect(g.started).to.deep.equal(['a']);
    g.finish('a');
    await tick(5);
    expect(g.started).to.deep.equal(['a', 'a']);
    g.finish('a');
    await q.idle();
  });

  it('retries a failing key with growing delays', async () => {
    const at: number[] = [];
    const q = new WorkQueue(() => {
      at.push(Date.now());
      if (at.length < 3) throw new Error('not yet');
    }, { retryBaseMs: 40, retryMaxMs: 1000 });
    q.add('k');
    while (at.length < 3) await tick(10);
    expect(at[1]! - at[0]!).to.be.at.least(35);
    expect(at[2]! - at[1]!).to.be.at.least(75);
  });

  it('retries a key soon while a dependency is unreachable, however often it failed: it runs once the dependency is back', async () => {
    const at: number[] = [];
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const q = new WorkQueue(() => {
      at.push(Date.now());
      if (at.length < 7) throw refused;
    }, { retryBaseMs: 40, retryMaxMs: 60_000, unreachableRetryMaxMs: 50 });
    q.add('k');
    while (at.length < 7) await tick(10);
    // Backed off as any failure, the 6th wait would be 40 ms * 2^5 = 1.28 s.
    expect(at[6]! - at[5]!).to.be.below(800);
  });

  it('stop() takes no more work and resolves only when the pass in flight has ended', async () => {
    const g = gated();
    const q = new WorkQueue(g.handler, { concurrency: 1 });
    q.add('a');
    q.add('b');
    await tick();
    let stopped = false;
    const stopping = q.stop().then(() => { stopped = true; });
    await tick(20);
    expect(stopped).to.equal(false);
    g.finish('a');
    await stopping;
    q.add('c');
    await tick(5);
    expect(g.started).to.deep.equal(['a']);
  });
});
