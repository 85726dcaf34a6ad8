// The operator's informer wrapper on the local cluster: periodic relists
// correct a cache whose watch misses changes.
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { ResilientInformer } from '../src/informer.js';

describe('operator: resilient informer', () => {
  let tc: TestCluster;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  const informers: ResilientInformer<k8s.V1ConfigMap>[] = [];
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  before(async () => {
    tc = await startTestCluster();
    kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: 'quiet' } } });
  });

  afterEach(async () => {
    for (const inf of informers.splice(0)) await inf.stop();
  });

  after(async () => {
    await tc.stop();
  });

  // Lists ConfigMaps of `default` but watches the empty `quiet` namespace:
  // a watch that looks healthy and never delivers a change, so the cache can
  // only learn of one by listing again.
  const deafInformer = async (relistMs: number) => {
    const inf = new ResilientInformer<k8s.V1ConfigMap>({
      name: 'configmaps', kc, path: '/api/v1/namespaces/quiet/configmaps',
      list: () => core.listNamespacedConfigMap({ namespace: 'default' }),
      onChange: () => undefined, resyncMs: 60_000, watchdogMs: 60_000, relistMs, log,
    });
    informers.push(inf);
    await inf.start();
    return inf;
  };

  it('relists periodically, so a change the watch never delivered reaches the cache, deletions too', async () => {
    const relisting = await deafInformer(300);
    const deaf = await deafInformer(3_600_000);
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'missed' }, data: { a: '1' } } });
    await eventually(async () => relisting.get('missed', 'default') !== undefined, 10_000);
    expect(deaf.get('missed', 'default'), 'without a relist the change stays unseen').to.equal(undefined);

    await core.deleteNamespacedConfigMap({ name: 'missed', namespace: 'default' });
    await eventually(async () => relisting.get('missed', 'default') === undefined, 10_000);
  });

  it('keeps its cache, and announces no deletion, while a relist fails', async () => {
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'kept' } } });
    let lists = 0;
    const deleted: string[] = [];
    const inf = new ResilientInformer<k8s.V1ConfigMap>({
      name: 'configmaps', kc, path: '/api/v1/namespaces/default/configmaps',
      list: () => (++lists === 1 ? core.listNamespacedConfigMap({ namespace: 'default' }) : Promise.reject(new Error('API server unavailable'))),
      onChange: (cm, type) => type === 'delete' && deleted.push(cm.metadata!.name!),
      resyncMs: 60_000, watchdogMs: 60_000, relistMs: 200, log,
    });
    informers.push(inf);
    await inf.start();
    await eventually(async () => lists >= 3, 10_000);
    expect(inf.get('kept', 'default')).to.not.equal(undefined);
    expect(deleted).to.deep.equal([]);
  });
});
