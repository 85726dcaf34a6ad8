// Events expire like kube-apiserver's (--event-ttl): a fixed time after
// their last write, with a DELETED to watchers, and nothing else goes.
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { eventually, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

describe('local cluster: Events expire after their TTL', function () {
  this.timeout(30_000);
  const TTL_MS = 4_000;
  let tc: TestCluster;
  let core: k8s.CoreV1Api;

  before(async () => {
    tc = await startTestCluster({ eventTtlMs: TTL_MS });
    core = kubeConfigFor(tc.cluster).makeApiClient(k8s.CoreV1Api);
  });

  after(async () => {
    await tc?.stop();
  });

  const event = (name: string): k8s.CoreV1Event => ({
    metadata: { name, namespace: 'default' },
    involvedObject: { kind: 'ConfigMap', name: 'subject', namespace: 'default', apiVersion: 'v1' },
    reason: 'Tested', message: 'expires', type: 'Normal', count: 1,
    firstTimestamp: new Date(), lastTimestamp: new Date(),
  });
  const names = async () => (await core.listNamespacedEvent({ namespace: 'default' })).items.map((e) => e.metadata!.name);

  it('deletes an Event its TTL after its last write, telling watchers, and keeps everything else', async () => {
    const deleted: string[] = [];
    const watch = await new k8s.Watch(kubeConfigFor(tc.cluster)).watch('/api/v1/namespaces/default/events', {}, (type, obj: k8s.CoreV1Event) => {
      if (type === 'DELETED') deleted.push(obj.metadata!.name!);
    }, () => undefined);
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'subject' } } });
    await core.createNamespacedEvent({ namespace: 'default', body: event('left-alone') });
    await core.createNamespacedEvent({ namespace: 'default', body: event('written-again') });
    const created = Date.now();

    // Written again (as a recorder counts a repeat) after half the TTL: its TTL starts over.
    await new Promise((r) => setTimeout(r, TTL_MS / 2));
    await core.patchNamespacedEvent({ namespace: 'default', name: 'written-again', body: { count: 2, lastTimestamp: new Date() } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));

    await eventually(async () => !(await names()).includes('left-alone'), 20_000, 100);
    expect(Date.now() - created, 'not before its TTL').to.be.at.least(TTL_MS);
    expect(await names(), 'the one written later outlives it').to.include('written-again');
    await eventually(async () => !(await names()).includes('written-again'), 20_000, 100);
    await eventually(() => deleted.includes('left-alone') && deleted.includes('written-again'), 5_000);
    expect((await core.readNamespacedConfigMap({ namespace: 'default', name: 'subject' })).metadata?.name, 'only Events expire').to.equal('subject');
    watch.abort();
  });
});
