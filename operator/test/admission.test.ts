// Admission under MAX_RUNNING_JOBS: a job gets a slot while one is free and
// it is first in line; the others wait, oldest first (ties by name, as
// creation timestamps have one-second resolution), and a freed slot wakes
// exactly the ones admit() will let in.
import { expect } from 'chai';
import { Admission } from '../src/admission.js';

const T = Date.parse('2026-11-21T10:00:00Z');

describe('admission', () => {
  it('admits up to the cap, then keeps the rest waiting', () => {
    const woken: string[] = [];
    const a = new Admission(2, (k) => woken.push(k));
    expect(a.admit('ns/a', T)).to.equal(true);
    expect(a.admit('ns/b', T + 1000)).to.equal(true);
    expect(a.admit('ns/c', T + 2000)).to.equal(false);
    expect([a.has('ns/a'), a.has('ns/b'), a.has('ns/c')]).to.deep.equal([true, true, false]);
    expect(woken).to.deep.equal([]);
  });

  it('a freed slot wakes the oldest waiting job, same second by name, and admits that one only', () => {
    const woken: string[] = [];
    const a = new Admission(1, (k) => woken.push(k));
    expect(a.admit('ns/running', T)).to.equal(true);
    // Asked in reverse name order within one second.
    for (const k of ['ns/cap-c', 'ns/cap-b', 'ns/cap-a']) expect(a.admit(k, T + 1000)).to.equal(false);
    a.release('ns/running');
    expect(woken).to.deep.equal(['ns/cap-a']);
    // A job that is not first in line does not jump it while the woken one is on its way.
    expect(a.admit('ns/cap-b', T + 1000)).to.equal(false);
    expect(a.admit('ns/cap-a', T + 1000)).to.equal(true);
    a.release('ns/cap-a');
    expect(woken).to.deep.equal(['ns/cap-a', 'ns/cap-b']);
  });

  it('an older job that arrives later is still first in line', () => {
    const a = new Admission(1, () => undefined);
    a.admit('ns/running', T);
    a.admit('ns/new', T + 5000);
    a.admit('ns/old', T + 1000);
    expect(a.oldestWaiting(2)).to.deep.equal(['ns/old', 'ns/new']);
  });

  it('a waiting job that goes away leaves the line; releasing a key that held no slot wakes nobody', () => {
    const woken: string[] = [];
    const a = new Admission(1, (k) => woken.push(k));
    a.admit('ns/running', T);
    a.admit('ns/gone', T + 1000);
    a.admit('ns/next', T + 2000);
    a.release('ns/gone');
    expect(woken).to.deep.equal([]);
    a.release('ns/running');
    expect(woken).to.deep.equal(['ns/next']);
  });

  it('reset() starts over from the slots the caches show held', () => {
    const a = new Admission(1, () => undefined);
    a.admit('ns/x', T);
    a.reset(['ns/held']);
    expect(a.has('ns/x')).to.equal(false);
    expect(a.admit('ns/y', T)).to.equal(false);
    expect(a.oldestWaiting(1)).to.deep.equal(['ns/y']);
  });
});
