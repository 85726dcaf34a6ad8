// Admission under MAX_RUNNING_JOBS, MAX_RUNNING_PER_KEY and
// MAX_RUNNING_PER_ORG: a job gets a slot while one is free and its key and
// organization are below their caps; a freed slot goes to the next key in
// turn (round-robin over the keys with jobs waiting, skipping keys at a
// cap), oldest job first within a key (ties by name, as creation timestamps
// have one-second resolution); the job a slot is given to is woken, and a
// job that waits is told why, on its status (status.ts) until it runs.
import { expect } from 'chai';
import { ORGANIZATION_LABEL } from '@mediajobs/lib/mediajob/build';
import { Admission, ownerOf, type AdmissionLimits, type Owner } from '../src/admission.js';
import { WAIT_FOR_POD, deriveStatus, statusPatch, type Observed } from '../src/status.js';
import type { MediaJob, MediaJobStatus, Owned } from '@mediajobs/lib/mediajob/types';

const T = Date.parse('2026-11-21T10:00:00Z');
const A: Owner = { apiKeyId: 'key-a' };
const B: Owner = { apiKeyId: 'key-b' };
const C: Owner = { apiKeyId: 'key-c' };
const UNCAPPED = { perKey: 0, perOrg: 0 };

function admission(limits: Partial<AdmissionLimits> & { maxRunning: number }) {
  const woken: string[] = [];
  return { a: new Admission({ ...UNCAPPED, ...limits }, (k) => woken.push(k)), woken };
}

/** With one slot: release the running job, then each job the slot went to in turn; the order they got it. */
function drain(a: Admission, woken: string[], running: string): string[] {
  const order: string[] = [];
  let current: string | undefined = running;
  while (current) {
    const seen = woken.length;
    a.release(current);
    current = woken[seen];
    if (current) order.push(current);
  }
  return order;
}

describe('admission', () => {
  it('admits up to the cap, then keeps the rest waiting for capacity', () => {
    const { a, woken } = admission({ maxRunning: 2 });
    expect(a.admit('ns/a', A, T)).to.deep.equal({ admitted: true });
    expect(a.admit('ns/b', A, T + 1000)).to.deep.equal({ admitted: true });
    expect(a.admit('ns/c', A, T + 2000)).to.deep.equal({ admitted: false, waitingFor: 'capacity', limit: 2 });
    expect([a.has('ns/a'), a.has('ns/b'), a.has('ns/c')]).to.deep.equal([true, true, false]);
    expect(woken).to.deep.equal([]);
  });

  it('a freed slot goes to the oldest waiting job of a key, same second by name, and wakes that one only', () => {
    const { a, woken } = admission({ maxRunning: 1 });
    a.admit('ns/running', A, T);
    // Asked in reverse name order within one second.
    for (const k of ['ns/cap-c', 'ns/cap-b', 'ns/cap-a']) expect(a.admit(k, A, T + 1000).admitted).to.equal(false);
    a.release('ns/running');
    expect(woken).to.deep.equal(['ns/cap-a']);
    // The slot is the woken job's: another job asking meanwhile does not take it.
    expect(a.admit('ns/cap-b', A, T + 1000).admitted).to.equal(false);
    expect(a.admit('ns/cap-a', A, T + 1000)).to.deep.equal({ admitted: true });
    expect(drain(a, woken, 'ns/cap-a')).to.deep.equal(['ns/cap-b', 'ns/cap-c']);
  });

  it('an older job that asks later is still first of its key', () => {
    const { a, woken } = admission({ maxRunning: 1 });
    a.admit('ns/running', A, T);
    a.admit('ns/new', A, T + 5000);
    a.admit('ns/old', A, T + 1000);
    expect(drain(a, woken, 'ns/running')).to.deep.equal(['ns/old', 'ns/new']);
  });

  it('a waiting job that goes away leaves the line; releasing a job that held no slot gives nothing away', () => {
    const { a, woken } = admission({ maxRunning: 1 });
    a.admit('ns/running', A, T);
    a.admit('ns/gone', A, T + 1000);
    a.admit('ns/next', A, T + 2000);
    a.release('ns/gone');
    expect(woken).to.deep.equal([]);
    a.release('ns/running');
    expect(woken).to.deep.equal(['ns/next']);
  });

  it('freed slots go round-robin across keys, oldest first within each, whatever order the jobs were queued in', () => {
    const { a, woken } = admission({ maxRunning: 1 });
    a.admit('ns/running', C, T);
    // Key A queued all of its jobs first and they are the oldest: it still gets one turn in three.
    for (let i = 1; i <= 3; i++) a.admit(`ns/a${i}`, A, T + i);
    for (let i = 1; i <= 3; i++) a.admit(`ns/b${i}`, B, T + 100 + i);
    a.admit('ns/c1', C, T + 200);
    expect(drain(a, woken, 'ns/running')).to.deep.equal(['ns/a1', 'ns/b1', 'ns/c1', 'ns/a2', 'ns/b2', 'ns/a3', 'ns/b3']);
  });

  it('a key at MAX_RUNNING_PER_KEY waits, says so, and its turn is skipped while the others run', () => {
    const { a, woken } = admission({ maxRunning: 10, perKey: 2 });
    expect(a.admit('ns/a1', A, T).admitted).to.equal(true);
    expect(a.admit('ns/a2', A, T + 1).admitted).to.equal(true);
    expect(a.admit('ns/a3', A, T + 2)).to.deep.equal({ admitted: false, waitingFor: 'key_limit', limit: 2 });
    // Free slots remain, and another key's job takes one at once.
    expect(a.admit('ns/b1', B, T + 3)).to.deep.equal({ admitted: true });
    expect(a.admit('ns/b2', B, T + 4)).to.deep.equal({ admitted: true });
    expect(a.admit('ns/b3', B, T + 5)).to.deep.equal({ admitted: false, waitingFor: 'key_limit', limit: 2 });
    // One of B's jobs ending lets in B's next, not A's: A is still at its cap.
    a.release('ns/b1');
    expect(woken).to.deep.equal(['ns/b3']);
    a.release('ns/a1');
    expect(woken).to.deep.equal(['ns/b3', 'ns/a3']);
  });

  it('the keys of one organization share MAX_RUNNING_PER_ORG; a key without organization is a group of its own', () => {
    const { a, woken } = admission({ maxRunning: 10, perOrg: 2 });
    const A1 = { apiKeyId: 'key-a1', organizationId: 'org-1' };
    const A2 = { apiKeyId: 'key-a2', organizationId: 'org-1' };
    const lone = { apiKeyId: 'key-lone' };
    expect(a.admit('ns/x1', A1, T).admitted).to.equal(true);
    expect(a.admit('ns/y1', A2, T + 1).admitted).to.equal(true);
    expect(a.admit('ns/y2', A2, T + 2)).to.deep.equal({ admitted: false, waitingFor: 'organization_limit', limit: 2 });
    expect(a.admit('ns/x2', A1, T + 3)).to.deep.equal({ admitted: false, waitingFor: 'organization_limit', limit: 2 });
    expect(a.admit('ns/l1', lone, T + 4).admitted).to.equal(true);
    expect(a.admit('ns/l2', lone, T + 5).admitted).to.equal(true);
    expect(a.admit('ns/l3', lone, T + 6)).to.deep.equal({ admitted: false, waitingFor: 'organization_limit', limit: 2 });
    expect(a.admit('ns/b1', B, T + 7).admitted).to.equal(true);
    // A slot of the organization freed: the turn after the last key served (key-b) passes key-lone, at its cap, to key-a1.
    a.release('ns/y1');
    expect(woken).to.deep.equal(['ns/x2']);
  });

  it('the key cap is named before the organization cap when both hold', () => {
    const { a } = admission({ maxRunning: 10, perKey: 1, perOrg: 1 });
    const O = { apiKeyId: 'key-o', organizationId: 'org-1' };
    a.admit('ns/o1', O, T);
    expect(a.admit('ns/o2', O, T + 1)).to.deep.equal({ admitted: false, waitingFor: 'key_limit', limit: 1 });
    expect(a.admit('ns/p1', { apiKeyId: 'key-p', organizationId: 'org-1' }, T + 2))
      .to.deep.equal({ admitted: false, waitingFor: 'organization_limit', limit: 1 });
  });

  it('one key with 5,000 waiting jobs does not hold back another key\'s job past its turn, and costs nothing per look', () => {
    const { a, woken } = admission({ maxRunning: 1 });
    const flood = (i: number) => `ns/flood-${String(i).padStart(4, '0')}`;
    a.admit('ns/running', A, T);
    for (let i = 0; i < 5000; i++) a.admit(flood(i), A, T + i);
    // The newest job of all, from a key that has had no turn yet.
    a.admit('ns/b1', B, T + 10_000);
    // Every waiting job looks again (ADMISSION_RECHECK_SECONDS), and the slot turns over a hundred times.
    const started = performance.now();
    for (let i = 0; i < 5000; i++) a.admit(flood(i), A, T + i);
    a.release('ns/running');
    expect(woken).to.deep.equal(['ns/b1']);
    for (let i = 0; i < 100; i++) a.release(woken[woken.length - 1]!);
    const elapsed = performance.now() - started;
    expect(woken.slice(1)).to.deep.equal(Array.from({ length: 100 }, (_, i) => flood(i)));
    // Linear in the waiting jobs per look would be 25 million steps here; one per look is well under a second.
    expect(elapsed).to.be.below(500);
  });

  it('reset() starts over from the slots the caches show held, with their owners\' counts', () => {
    const { a, woken } = admission({ maxRunning: 3, perKey: 2 });
    a.admit('ns/x', B, T);
    a.reset([['ns/held-1', A], ['ns/held-2', A]]);
    expect(a.has('ns/x')).to.equal(false);
    expect(a.admit('ns/a3', A, T)).to.deep.equal({ admitted: false, waitingFor: 'key_limit', limit: 2 });
    expect(a.admit('ns/b1', B, T).admitted).to.equal(true);
    a.release('ns/held-1');
    expect(woken).to.deep.equal(['ns/a3']);
  });

  it('a job whose owner changed while it waited moves to its new key\'s line', () => {
    const { a, woken } = admission({ maxRunning: 1 });
    a.admit('ns/running', C, T);
    a.admit('ns/moved', A, T + 1);
    a.admit('ns/a1', A, T + 2);
    a.admit('ns/moved', B, T + 1);
    // Had it stayed in A's line it would go first, as A's oldest; it goes once, in B's turn.
    expect(drain(a, woken, 'ns/running')).to.deep.equal(['ns/a1', 'ns/moved']);
  });

  it('a MediaJob\'s owner is its spec\'s key and its organization label', () => {
    const mj = (labels?: Record<string, string>) => ({ metadata: { labels }, spec: { owner: { apiKeyId: 'k1' } } }) as unknown as Owned<MediaJob>;
    expect(ownerOf(mj({ [ORGANIZATION_LABEL]: 'org-9' }))).to.deep.equal({ apiKeyId: 'k1', organizationId: 'org-9' });
    expect(ownerOf(mj())).to.deep.equal({ apiKeyId: 'k1' });
  });
});

describe('a waiting job\'s status', () => {
  const NOW = new Date('2026-11-21T10:00:00Z');
  const job = (status?: MediaJobStatus) => ({
    metadata: { name: 'j1', namespace: 'default', uid: 'uid-1', generation: 1 }, spec: { owner: { apiKeyId: 'k' } }, status,
  }) as unknown as MediaJob;
  const derive = (o: Omit<Observed, 'jobName'>): MediaJobStatus => {
    const s = deriveStatus({ ...o, jobName: 'mj-x' }, NOW);
    if (s === WAIT_FOR_POD) throw new Error('unexpected wait');
    return s;
  };
  const admittedCondition = (s: MediaJobStatus) => {
    const { status, reason, message } = s.conditions!.find((c) => c.type === 'Admitted')!;
    return { status, reason, message };
  };

  it('names the cap that holds it: the key\'s or the organization\'s, as status reason and Admitted condition', () => {
    const byKey = derive({ mj: job(), admitted: false, waiting: { reason: 'key_limit', limit: 2 } });
    expect(byKey).to.include({ status: 'Pending', step: 'Queued', reason: 'key_running_limit' });
    expect(admittedCondition(byKey)).to.deep.equal({
      status: 'False', reason: 'KeyAtRunningLimit', message: 'Waiting: its API key runs as many jobs as it may at once (2)',
    });
    const byOrg = derive({ mj: job(), admitted: false, waiting: { reason: 'organization_limit', limit: 5 } });
    expect(byOrg).to.include({ status: 'Pending', reason: 'organization_running_limit' });
    expect(admittedCondition(byOrg)).to.deep.equal({
      status: 'False', reason: 'OrganizationAtRunningLimit', message: 'Waiting: its organization\'s keys run as many jobs as they may at once (5)',
    });
  });

  it('has no reason while it waits for a slot any job could take, nor once it is admitted; the patch removes the old one', () => {
    const held = derive({ mj: job(), admitted: false, waiting: { reason: 'key_limit', limit: 1 } });
    const forCapacity = derive({ mj: job(held), admitted: false, waiting: { reason: 'capacity', limit: 10 } });
    expect(forCapacity).to.not.have.property('reason');
    expect(admittedCondition(forCapacity)).to.deep.equal({ status: 'False', reason: 'WaitingForCapacity', message: 'Waiting for a free runner slot' });
    const admitted = derive({ mj: job(held), admitted: true });
    expect(admitted).to.include({ status: 'Pending', jobName: 'mj-x' }).and.not.have.property('reason');
    // A merge patch keeps what it does not name: the stored reason must be named null to go.
    expect(statusPatch(held, admitted)).to.include({ reason: null, status: 'Pending' });
  });

  it('leaves a reason the runner reported alone', () => {
    const running = { status: 'Processing', step: 'Downloading', reason: 'connection_error' } as const;
    expect(derive({ mj: job(running), job: { metadata: { name: 'mj-x' }, status: {} }, admitted: true }))
      .to.include({ status: 'Processing', reason: 'connection_error' });
  });
});
