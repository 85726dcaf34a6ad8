// Two operator replicas electing a leader over a Lease on the local
// cluster: one leads at a time, also when the leader loses the API server.
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { LeaderElector } from '../src/leader.js';

describe('operator: leader election', () => {
  let tc: TestCluster;
  let api: k8s.CoordinationV1Api;
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });
  const electors: LeaderElector[] = [];

  before(async () => {
    tc = await startTestCluster();
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    api = kc.makeApiClient(k8s.CoordinationV1Api);
  });

  afterEach(async () => {
    for (const e of electors.splice(0)) await e.stop();
  });

  after(async () => {
    await tc.stop();
  });

  /** A replica whose calls to the API server fail while `cut` is set (a network partition). */
  const replica = (identity: string, lease: string, events: string[]) => {
    const link = { cut: false };
    const fail = () => Promise.reject(new Error('connect ETIMEDOUT'));
    const reachable = {
      readNamespacedLease: (p: k8s.CoordinationV1ApiReadNamespacedLeaseRequest) => (link.cut ? fail() : api.readNamespacedLease(p)),
      createNamespacedLease: (p: k8s.CoordinationV1ApiCreateNamespacedLeaseRequest) => (link.cut ? fail() : api.createNamespacedLease(p)),
      replaceNamespacedLease: (p: k8s.CoordinationV1ApiReplaceNamespacedLeaseRequest) => (link.cut ? fail() : api.replaceNamespacedLease(p)),
    } as unknown as k8s.CoordinationV1Api;
    const e = new LeaderElector(reachable, log, {
      namespace: 'default', name: lease, identity, leaseDurationSeconds: 3, renewSeconds: 1, renewDeadlineSeconds: 2,
      onStartedLeading: () => void events.push(`${identity} leads`),
      onStoppedLeading: () => void events.push(`${identity} stops`),
    });
    electors.push(e);
    return { e, link };
  };

  it('a leader cut off from the API server stops leading before the other replica takes over', async () => {
    const events: string[] = [];
    const a = replica('a', 'partition', events);
    a.e.start();
    await eventually(async () => a.e.isLeader, 10_000);
    const b = replica('b', 'partition', events);
    b.e.start();
    await new Promise((r) => setTimeout(r, 1500));
    expect(b.e.isLeader, 'the lease is held').to.equal(false);

    a.link.cut = true;
    await eventually(async () => b.e.isLeader, 15_000);
    expect(events).to.deep.equal(['a leads', 'a stops', 'b leads']);
    expect(a.e.isLeader).to.equal(false);
    const lease = await api.readNamespacedLease({ name: 'partition', namespace: 'default' });
    expect(lease.spec).to.include({ holderIdentity: 'b', leaseTransitions: 1 });
  });

  it('a leader that stops hands the lease over at once', async () => {
    const events: string[] = [];
    const a = replica('a', 'handover', events);
    a.e.start();
    await eventually(async () => a.e.isLeader, 10_000);
    const b = replica('b', 'handover', events);
    b.e.start();
    const stoppedAt = Date.now();
    await a.e.stop();
    await eventually(async () => b.e.isLeader, 10_000);
    // Well within the 3 s lease: the released lease is free, not merely expired.
    expect(Date.now() - stoppedAt).to.be.below(2000);
    expect(events).to.deep.equal(['a leads', 'a stops', 'b leads']);
  });
});
