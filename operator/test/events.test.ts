// The EventRecorder against the local cluster and the real kubectl: an
// Event a person reads in `kubectl describe mediajob` and `kubectl get
// events`, the same event again counted on one Event (count and
// lastTimestamp, as client-go's correlator does), an Event deleted meanwhile
// recorded afresh, similar messages combined, a flood from one object cut
// by the spam filter, and a recorder that cannot reach the apiserver never
// throwing. Also the pure rules of which transitions make which events.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { freePort } from '../../test/support/ports.js';
import { EventCorrelator, EventRecorder, Lru, REPORTING_CONTROLLER } from '../src/events.js';
import { Announced, mediaBatchTransition, mediaJobRef, mediaJobTransition } from '../src/transition-events.js';

const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });
const OWNER = '9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d';

describe('EventRecorder on the local cluster', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;
  let custom: k8s.CustomObjectsApi;

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    core = kc.makeApiClient(k8s.CoreV1Api);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });

  after(async () => {
    await tc?.stop();
  });

  const mediaJob = async (name: string): Promise<MediaJob> => (await custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name }, spec: { url: 'http://127.0.0.1/v.mp4', owner: { apiKeyId: OWNER } } },
  })) as MediaJob;
  /** A clock that moves one second per reading, from a fixed start. */
  const ticking = (start = Date.parse('2030-01-01T00:00:00Z')) => {
    let n = 0;
    return () => new Date(start + 1000 * n++);
  };
  const recorder = (now?: () => Date) => new EventRecorder(core, log, { component: REPORTING_CONTROLLER, instance: 'operator-0', ...(now && { now }) });
  const eventsOf = async (name: string) => {
    const out = await tc.kubectl(['get', 'events', '--field-selector', `involvedObject.name=${name}`, '-o', 'json']);
    return (JSON.parse(out.stdout) as { items: k8s.CoreV1Event[] }).items;
  };

  it('writes an Event that kubectl describe mediajob and kubectl get events show', async () => {
    const mj = await mediaJob('ev-one');
    const r = recorder();
    r.event(mediaJobRef(mj), 'Normal', 'Admitted', 'A runner slot is free: runner Job mj-x is created');
    r.event(mediaJobRef(mj), 'Warning', 'Failed', 'Failed (download_failed): The media could not be downloaded');
    await r.flush();
    const items = await eventsOf('ev-one');
    expect(items.map((e) => [e.type, e.reason, e.count])).to.deep.equal([['Normal', 'Admitted', 1], ['Warning', 'Failed', 1]]);
    const [admitted] = items;
    expect(admitted!.metadata.name).to.match(/^ev-one\.[0-9a-f]+$/);
    expect(admitted!.involvedObject).to.include({ apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', name: 'ev-one', namespace: 'default', uid: mj.metadata.uid });
    expect(admitted!.source).to.deep.equal({ component: REPORTING_CONTROLLER, host: 'operator-0' });
    expect(admitted).to.include({ reportingComponent: REPORTING_CONTROLLER, reportingInstance: 'operator-0' });

    const described = (await tc.kubectl(['describe', 'mediajob', 'ev-one'])).stdout;
    const events = described.slice(described.indexOf('Events:'));
    expect(events).to.match(/Normal\s+Admitted\s+.*mediajobs\.io\/operator\s+A runner slot is free/);
    expect(events).to.match(/Warning\s+Failed\s+.*Failed \(download_failed\): The media could not be downloaded/);
    const table = (await tc.kubectl(['get', 'events', '--field-selector', 'involvedObject.kind=MediaJob,involvedObject.name=ev-one'])).stdout;
    expect(table).to.match(/Warning\s+Failed\s+mediajob\/ev-one\s+Failed \(download_failed\)/);
  });

  it('writes an Event about a cluster-scoped MediaPlatform to the operator\'s namespace, which kubectl describe finds', async () => {
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediaplatform.yaml', import.meta.url))]);
    await tc.kubectl(['create', 'namespace', 'mediajobs-ops']);
    await tc.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({ apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaPlatform', metadata: { name: 'ev-platform' }, spec: { match: { hosts: ['video.example'] } } }),
    });
    const platform = JSON.parse((await tc.kubectl(['get', 'mediaplatform', 'ev-platform', '-o', 'json'])).stdout) as { metadata: { uid: string } };
    const r = new EventRecorder(core, log, { component: REPORTING_CONTROLLER, instance: 'operator-0', clusterScopedNamespace: 'mediajobs-ops' });
    r.event({ apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaPlatform', metadata: { name: 'ev-platform', uid: platform.metadata.uid } }, 'Warning', 'BreakerOpen', 'Breaker open: 5 defences in 120 s');
    await r.flush();
    const all = await tc.kubectl(['get', 'events', '-A', '--field-selector', 'involvedObject.name=ev-platform', '-o', 'json']);
    const [event] = (JSON.parse(all.stdout) as { items: k8s.CoreV1Event[] }).items;
    expect(event!.metadata.namespace, 'the operator\'s own namespace, where its Role creates Events').to.equal('mediajobs-ops');
    const described = (await tc.kubectl(['describe', 'mediaplatform', 'ev-platform'])).stdout;
    expect(described.slice(described.indexOf('Events:'))).to.match(/Warning\s+BreakerOpen\s+.*Breaker open: 5 defences in 120 s/);
  });

  it('counts the same event on one Event: count 3, lastTimestamp of the last, firstTimestamp of the first', async () => {
    const mj = await mediaJob('ev-dedupe');
    const r = recorder(ticking());
    for (let i = 0; i < 3; i++) r.event(mediaJobRef(mj), 'Normal', 'WaitingForSlot', 'Waiting for a free runner slot');
    await r.flush();
    const items = await eventsOf('ev-dedupe');
    expect(items).to.have.length(1);
    expect(items[0]).to.include({ reason: 'WaitingForSlot', count: 3 });
    expect(new Date(items[0]!.firstTimestamp!).toISOString()).to.equal('2030-01-01T00:00:00.000Z');
    expect(new Date(items[0]!.lastTimestamp!).toISOString()).to.equal('2030-01-01T00:00:02.000Z');
    const described = (await tc.kubectl(['describe', 'mediajob', 'ev-dedupe'])).stdout;
    expect(described).to.match(/WaitingForSlot\s+.*\(x3 over /);
  });

  it('records an event afresh when its Event was deleted meanwhile', async () => {
    const mj = await mediaJob('ev-gone');
    const r = recorder();
    r.event(mediaJobRef(mj), 'Normal', 'Admitted', 'once');
    await r.flush();
    const [first] = await eventsOf('ev-gone');
    await core.deleteNamespacedEvent({ name: first!.metadata.name!, namespace: 'default' });
    r.event(mediaJobRef(mj), 'Normal', 'Admitted', 'once');
    await r.flush();
    const items = await eventsOf('ev-gone');
    expect(items.map((e) => [e.reason, e.count])).to.deep.equal([['Admitted', 2]]);
  });

  it('combines the 10th distinct message of one reason, and stops a flood from one object after 25', async () => {
    const similar = await mediaJob('ev-similar');
    const r = recorder(ticking());
    for (let i = 1; i <= 11; i++) r.event(mediaJobRef(similar), 'Normal', 'Progress', `step ${i}`);
    await r.flush();
    const items = await eventsOf('ev-similar');
    expect(items.map((e) => e.message).slice(0, 9)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => `step ${i}`));
    const combined = items.filter((e) => e.message!.startsWith('(combined from similar events): '));
    expect(combined).to.have.length(1);
    expect(combined[0]).to.include({ count: 2, message: '(combined from similar events): step 11' });

    // All within a few seconds: the bucket refills one per 5 minutes.
    const flood = await mediaJob('ev-flood');
    const f = recorder(ticking());
    for (let i = 0; i < 30; i++) f.event(mediaJobRef(flood), 'Normal', `Reason${i}`, 'x');
    await f.flush();
    expect(await eventsOf('ev-flood')).to.have.length(25);
  });

  it('never throws when the apiserver cannot be reached: the event is dropped', async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${await freePort()}` }], users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
    });
    const r = new EventRecorder(kc.makeApiClient(k8s.CoreV1Api), log, { component: REPORTING_CONTROLLER, instance: 'operator-0' });
    r.event({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default' } }, 'Normal', 'X', 'y');
    await r.flush();
  });
});

describe('event correlation and transitions (pure)', () => {
  const base = (name: string, message: string): k8s.CoreV1Event => ({
    metadata: { name: `${name}.1`, namespace: 'default' }, involvedObject: { kind: 'MediaJob', name, namespace: 'default', uid: name },
    type: 'Normal', reason: 'R', message, source: { component: 'c', host: 'h' },
  });

  it('keeps its caches to their size however many objects pass', () => {
    const c = new EventCorrelator(8);
    for (let i = 0; i < 1000; i++) c.correlate(base(`o${i}`, 'm'), new Date(0));
    const caches = c as unknown as { spam: Lru<unknown>; aggregates: Lru<unknown>; seen: Lru<unknown> };
    expect([caches.spam.length, caches.aggregates.length, caches.seen.length]).to.deep.equal([8, 8, 8]);
  });

  it('asks for a PATCH with count + 1 when the same event comes again', () => {
    const c = new EventCorrelator();
    expect(c.correlate(base('a', 'm'), new Date(0))!.patch).to.equal(undefined);
    expect(c.correlate(base('a', 'm'), new Date(5000))!.patch).to.deep.equal({ count: 2, lastTimestamp: new Date(5000), message: 'm' });
    expect(c.correlate(base('a', 'other'), new Date(6000))!.patch, 'another message is another event').to.equal(undefined);
  });

  const waiting = (reason: string, message: string): MediaJobStatus => ({
    status: 'Pending', conditions: [{ type: 'Admitted', status: 'False', reason, message, lastTransitionTime: 't' }],
  });

  it('announces a wait once per wait, and each end of a job with its category', () => {
    const w = waiting('WaitingForCapacity', 'Waiting for a free runner slot');
    expect(mediaJobTransition(undefined, w)).to.deep.equal([{ type: 'Normal', reason: 'WaitingForSlot', message: 'Waiting for a free runner slot' }]);
    expect(mediaJobTransition(w, w), 'a recheck').to.deep.equal([]);
    expect(mediaJobTransition(w, waiting('KeyAtRunningLimit', 'Waiting: its API key runs as many jobs as it may at once (2)')).map((a) => a.reason))
      .to.deep.equal(['WaitingForSlot']);
    const failed: MediaJobStatus = { status: 'Failed', reason: 'storage_unreachable', error: 'The storage destination is unreachable or rejected the credentials' };
    expect(mediaJobTransition({ status: 'Processing' }, failed)).to.deep.equal([
      { type: 'Warning', reason: 'Failed', message: 'Failed (storage_unreachable): The storage destination is unreachable or rejected the credentials' },
      { type: 'Warning', reason: 'StorageUnreachable', message: 'The storage destination is unreachable or rejected the credentials' },
    ]);
    expect(mediaJobTransition(failed, failed)).to.deep.equal([]);
    expect(mediaJobTransition({ status: 'Processing' }, { status: 'Completed', result: { storageKey: 'k/v.mp4' } as never })).to.deep.equal([
      { type: 'Normal', reason: 'Completed', message: 'The media was delivered: k/v.mp4' },
    ]);
    expect(mediaJobTransition({ status: 'Pending' }, { status: 'CancelledByAdmin' }).map((a) => [a.type, a.reason])).to.deep.equal([['Normal', 'Cancelled']]);
  });

  it('announces a batch expanded, its episodes created and its end', () => {
    const cond = (type: string, status: 'True' | 'False', reason: string, message = '') => ({ type, status, reason, message, lastTransitionTime: 't' });
    const creating = { totalEpisodes: 3, conditions: [cond('Accepted', 'True', 'Recorded', 'Batch b: 3 episodes'), cond('EpisodesCreated', 'False', 'Creating')] };
    expect(mediaBatchTransition(undefined, creating).map((a) => a.reason)).to.deep.equal(['Expanded']);
    const finished = {
      totalEpisodes: 3, failedEpisodes: 1,
      conditions: [...creating.conditions.slice(0, 1), cond('EpisodesCreated', 'True', 'AllCreated'), cond('Complete', 'True', 'Finished', '3 episodes done')],
    };
    expect(mediaBatchTransition(creating, finished)).to.deep.equal([
      { type: 'Normal', reason: 'EpisodesCreated', message: '3 episode MediaJobs created' },
      { type: 'Warning', reason: 'Finished', message: '3 episodes done' },
    ]);
    expect(mediaBatchTransition(finished, finished)).to.deep.equal([]);
  });

  it('announces a transition once per object even when a stale cache shows it again', () => {
    const a = new Announced();
    const list = [{ type: 'Normal' as const, reason: 'Completed', message: 'done' }];
    expect(a.fresh('ns/x', list)).to.deep.equal(list);
    expect(a.fresh('ns/x', list)).to.deep.equal([]);
    a.forget('ns/x');
    expect(a.fresh('ns/x', list)).to.deep.equal(list);
  });
});
