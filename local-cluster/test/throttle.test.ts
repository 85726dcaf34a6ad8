// The write throttle: past the rate, a write gets what API Priority and
// Fairness answers (429, Retry-After, its plain-text body); reads and
// watches are never turned away; client-node sees the code and the header,
// and kubectl (client-go) waits as told and retries.
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { retryAfterMs } from '@mediajobs/lib/kube-client';
import { TOO_MANY_REQUESTS_TEXT } from '../src/throttle.js';
import { clusterFetch, startTestCluster, type TestCluster } from './support.js';

describe('local cluster: the write throttle (as API Priority and Fairness)', function () {
  this.timeout(30_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;

  before(async () => {
    tc = await startTestCluster({ maxWritesPerSecond: 5 });
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    core = kc.makeApiClient(k8s.CoreV1Api);
  });
  after(async () => tc?.stop());
  afterEach(() => tc.cluster.throttleWrites(5));

  const configMap = (name: string) => core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name }, data: { a: '1' } } });

  it('turns writes past the rate away with 429, Retry-After and the apiserver text; reads go through', async () => {
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => configMap(`burst-${i}`)));
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => o.reason as unknown);
    // About one second's worth (5) goes through; the bucket refills while the burst is sent.
    expect(outcomes.length - refused.length).to.be.at.least(5).and.below(20);
    expect(refused.length).to.be.above(0);
    for (const err of refused) {
      expect(err).to.be.instanceOf(k8s.ApiException);
      expect((err as k8s.ApiException<unknown>).code).to.equal(429);
      expect(retryAfterMs(err)).to.be.at.least(1000);
    }
    expect(tc.cluster.throttledWrites).to.equal(refused.length);

    const raw = await clusterFetch(tc.cluster, `/api/v1/namespaces/default/configmaps`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name: 'raw' } }),
    });
    expect(raw.status).to.equal(429);
    expect(raw.headers.get('retry-after')).to.match(/^[1-9]\d*$/);
    expect(raw.headers.get('content-type')).to.equal('text/plain; charset=utf-8');
    expect(await raw.text()).to.equal(TOO_MANY_REQUESTS_TEXT);

    const list = await core.listNamespacedConfigMap({ namespace: 'default' });
    expect(list.items.map((c) => c.metadata?.name)).to.include('burst-0');
  });

  it('admits writes again as the rate refills, and not at all once lifted', async () => {
    tc.cluster.throttleWrites(1000);
    await configMap('refilled');
    tc.cluster.throttleWrites(undefined);
    await Promise.all(Array.from({ length: 30 }, (_, i) => configMap(`free-${i}`)));
    expect(tc.cluster.throttledWrites).to.equal(0);
  });

  it('is waited out by kubectl, which honours Retry-After as client-go does', async () => {
    tc.cluster.throttleWrites(1);
    await configMap('takes-the-token').catch(() => undefined);
    await tc.kubectl(['create', 'configmap', 'by-kubectl', '--from-literal=a=1']);
    expect(tc.cluster.throttledWrites, 'refused first').to.be.at.least(1);
    expect((await core.readNamespacedConfigMap({ namespace: 'default', name: 'by-kubectl' })).data).to.deep.equal({ a: '1' });
  });
});
