// What `kubectl get mb` and `kubectl describe mb` show for each state of a
// batch row (batch-status.ts), and the creation rate's pages (batch-rate.ts):
// pure functions, every rule in a table.
import { expect } from 'chai';
import type { BatchRecord } from '@mediajobs/lib/db/batches';
import type { MediaBatch } from '@mediajobs/lib/mediajob/types';
import { CreationRate } from '../src/batch-rate.js';
import {
  batchStatusChanged, camelCase, deriveBatchStatus, rejectedBatchStatus, rejectedForGeneration, type BatchObserved,
} from '../src/batch-status.js';

const ID = '0193a000-0000-7000-8000-000000000001';
const KEY = '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f';
const T0 = new Date('2026-11-25T10:00:00.000Z');
const T1 = new Date('2026-11-25T10:05:00.000Z');

function row(patch: Partial<BatchRecord> = {}): BatchRecord {
  return {
    id: ID, api_key_id: KEY, kind: 'show', show_url: 'https://podcasts.apple.com/podcast/id1', status: 'processing', folder: null,
    total_episodes: 10, completed_episodes: 0, failed_episodes: 0, skipped_episodes: 0, episode_jobs: ['a', 'b'],
    destination: { type: 'managed' }, cr_namespace: 'default', cr_name: ID, created_at: 0, updated_at: 0, finished_at: null, ...patch,
  };
}

function mb(status?: MediaBatch['status'], generation = 1): MediaBatch {
  return {
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaBatch', metadata: { name: ID, namespace: 'default', generation },
    spec: { showUrl: 'https://podcasts.apple.com/podcast/id1', owner: { apiKeyId: KEY }, paused: false, destination: { type: 'managed' }, options: {} as never },
    ...(status && { status }),
  };
}

const summary = (o: Partial<BatchObserved> & { row: BatchRecord }, now = T0) => {
  const s = deriveBatchStatus({ mb: mb(), creating: 'done', ...o }, now);
  return { status: s.status, done: s.done, conditions: s.conditions!.map((c) => [c.type, c.status, c.reason, c.message]) };
};

describe('batch status', () => {
  it('mirrors each state of the row: Status, Done (completed + failed of total), Failed, and readable conditions', () => {
    const cases: [string, Partial<BatchObserved> & { row: BatchRecord }, ReturnType<typeof summary>][] = [
      ['paused', { row: row({ status: 'paused' }), creating: 'paused' }, {
        status: 'paused', done: '0/10', conditions: [
          ['Accepted', 'True', 'Recorded', `Batch ${ID}: 10 episodes for API key ${KEY}`],
          ['EpisodesCreated', 'False', 'Paused', 'The batch is paused: episode MediaJobs are created when it is started (POST /batch/{id}/start)'],
          ['Complete', 'False', 'Paused', '0 of 10 episodes done'],
        ],
      }],
      ['held by its spec', { row: row(), creating: 'paused', heldBySpec: true }, {
        status: 'processing', done: '0/10', conditions: [
          ['Accepted', 'True', 'Recorded', `Batch ${ID}: 10 episodes for API key ${KEY}`],
          ['EpisodesCreated', 'False', 'Paused', 'spec.paused is true: no episode MediaJob is created until it is false'],
          ['Complete', 'False', 'InProgress', '0 of 10 episodes done'],
        ],
      }],
      ['creating', { row: row({ completed_episodes: 2, failed_episodes: 1, kind: 'playlist' }), creating: 'more' }, {
        status: 'processing', done: '3/10', conditions: [
          ['Accepted', 'True', 'Recorded', `Batch ${ID}: 10 videos for API key ${KEY}`],
          ['EpisodesCreated', 'False', 'Creating', 'Creating the episode MediaJobs at a bounded rate'],
          ['Complete', 'False', 'InProgress', '3 of 10 episodes done'],
        ],
      }],
      ['completed', { row: row({ status: 'completed', completed_episodes: 10 }) }, {
        status: 'completed', done: '10/10', conditions: [
          ['Accepted', 'True', 'Recorded', `Batch ${ID}: 10 episodes for API key ${KEY}`],
          ['EpisodesCreated', 'True', 'AllCreated', 'Every episode has its MediaJob'],
          ['Complete', 'True', 'Completed', 'All 10 episodes completed'],
        ],
      }],
      ['finished, skipped counted under failed', { row: row({ status: 'finished', completed_episodes: 7, failed_episodes: 3, skipped_episodes: 1 }), creating: 'paused' }, {
        status: 'finished', done: '10/10', conditions: [
          ['Accepted', 'True', 'Recorded', `Batch ${ID}: 10 episodes for API key ${KEY}`],
          ['EpisodesCreated', 'True', 'AllCreated', 'Every episode has its MediaJob'],
          ['Complete', 'True', 'Finished', '10 episodes done: 7 completed, 3 failed (1 skipped)'],
        ],
      }],
    ];
    for (const [name, o, want] of cases) expect(summary(o), name).to.deep.equal(want);
  });

  it('keeps a condition\'s transition time while its status holds, and writes only on a change', () => {
    const first = deriveBatchStatus({ mb: mb(), row: row(), creating: 'more' }, T0);
    const again = deriveBatchStatus({ mb: mb(first), row: row(), creating: 'more' }, T1);
    expect(again.conditions!.map((c) => c.lastTransitionTime)).to.deep.equal(['2026-11-25T10:00:00Z', '2026-11-25T10:00:00Z', '2026-11-25T10:00:00Z']);
    expect(batchStatusChanged(first, again)).to.equal(false);
    const moved = deriveBatchStatus({ mb: mb(first), row: row(), creating: 'done' }, T1);
    expect(batchStatusChanged(first, moved)).to.equal(true);
    expect(moved.conditions!.find((c) => c.type === 'EpisodesCreated')!.lastTransitionTime).to.equal('2026-11-25T10:05:00Z');
    expect(batchStatusChanged(first, deriveBatchStatus({ mb: mb(first), row: row({ completed_episodes: 1 }), creating: 'more' }, T1))).to.equal(true);
  });

  it('a rejection: Accepted=False with the reason in CamelCase, recorded once per spec generation', () => {
    const why = { reason: 'invalid_owner', message: 'spec.owner.apiKeyId does not name an active API key' };
    const s = rejectedBatchStatus(mb(), ID, why, T0);
    expect(s).to.deep.equal({
      batchId: ID, observedGeneration: 1,
      conditions: [{ type: 'Accepted', status: 'False', reason: 'InvalidOwner', message: why.message, observedGeneration: 1, lastTransitionTime: '2026-11-25T10:00:00Z' }],
    });
    expect(rejectedForGeneration(mb(s))).to.equal(true);
    expect(batchStatusChanged(s, rejectedBatchStatus(mb(s), ID, why, T1)), 'the same rejection again').to.equal(false);
    // A new spec (kubectl apply) is looked at again.
    expect(rejectedForGeneration(mb(s, 2))).to.equal(false);
    expect(camelCase('show_not_found')).to.equal('ShowNotFound');
    expect(camelCase('too_large')).to.equal('TooLarge');
  });
});

describe('batch creation rate', () => {
  it('a page at once, then pages as the rate refills; unused creations are given back', () => {
    let now = 0;
    const rate = new CreationRate(50, 100, () => now);
    expect(rate.take(500)).to.equal(100);
    expect(rate.take(500)).to.equal(0);
    expect(rate.msUntil()).to.equal(2000);
    now = 1000;
    expect(rate.take(30)).to.equal(30);
    rate.giveBack(10);
    expect(rate.take(500)).to.equal(30);
    now = 100_000;
    expect(rate.take(500), 'never more than a page').to.equal(100);
    // 500 episodes at 50/s in pages of 100: the last page is taken 8 s after the first.
    now = 0;
    const fresh = new CreationRate(50, 100, () => now);
    let made = 0;
    while (made < 500) {
      now += fresh.msUntil();
      made += fresh.take(500 - made);
    }
    expect(now).to.equal(8000);
  });
});
