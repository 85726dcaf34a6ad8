// Finished MediaJobs are deleted FINISHED_MEDIAJOB_TTL_SECONDS after they
// finished; before that the pass answers when to look again.
import { expect } from 'chai';
import type * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import type { MediaJob } from '@mediajobs/lib/mediajob/types';
import { deleteAfterTtl, ttlRemainingMs } from '../src/ttl.js';

const mj = { metadata: { name: 'done', namespace: 'default', uid: 'u' }, spec: { jobId: 'j' } } as MediaJob;
const log = pino({ level: 'silent' });

function fakeCustom() {
  const deleted: string[] = [];
  const custom = { deleteNamespacedCustomObject: async (p: { name: string }) => { deleted.push(p.name); } } as unknown as k8s.CustomObjectsApi;
  return { custom, deleted };
}

describe('finished MediaJob TTL', () => {
  it('counts from the finish time; a job without one counts from now', () => {
    const now = Date.parse('2026-11-21T10:00:10Z');
    expect(ttlRemainingMs('2026-11-21T10:00:00Z', 60, now)).to.equal(50_000);
    expect(ttlRemainingMs('2026-11-21T09:00:00Z', 60, now)).to.be.below(0);
    expect(ttlRemainingMs(undefined, 60, now)).to.equal(60_000);
  });

  it('before the TTL: deletes nothing and asks to look again just after it', async () => {
    const { custom, deleted } = fakeCustom();
    const r = await deleteAfterTtl(custom, mj, new Date(Date.now() - 10_000).toISOString(), 60, log);
    expect(deleted).to.deep.equal([]);
    expect(r.requeueAfter).to.be.within(50_000, 52_000);
  });

  it('after the TTL: deletes the MediaJob and asks for nothing more', async () => {
    const { custom, deleted } = fakeCustom();
    expect(await deleteAfterTtl(custom, mj, new Date(Date.now() - 61_000).toISOString(), 60, log)).to.deep.equal({});
    expect(deleted).to.deep.equal(['done']);
  });
});
