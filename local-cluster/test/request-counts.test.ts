// The request counter: each request the local cluster serves is counted once
// by Kubernetes verb and resource (subresources apart, non-resource paths
// together), requests the throttle refuses are not, and a reset starts over.
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { requestVerb } from '../src/request-counts.js';
import { clusterFetch, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

describe('local cluster: request counts by verb and resource', function () {
  this.timeout(30_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;
  let batch: k8s.BatchV1Api;

  before(async () => {
    tc = await startTestCluster();
    const kc = kubeConfigFor(tc.cluster);
    core = kc.makeApiClient(k8s.CoreV1Api);
    batch = kc.makeApiClient(k8s.BatchV1Api);
  });
  after(async () => tc?.stop());
  beforeEach(() => tc.cluster.resetRequestCounts());

  it('names verbs as the apiserver does', () => {
    expect(requestVerb('GET', true, false)).to.equal('get');
    expect(requestVerb('GET', false, false)).to.equal('list');
    expect(requestVerb('GET', false, true)).to.equal('watch');
    expect(requestVerb('POST', false, false)).to.equal('create');
    expect(requestVerb('PUT', true, false)).to.equal('update');
    expect(requestVerb('PATCH', true, false)).to.equal('patch');
    expect(requestVerb('DELETE', true, false)).to.equal('delete');
    expect(requestVerb('DELETE', false, false)).to.equal('deletecollection');
    expect(requestVerb('OPTIONS', false, false)).to.equal(undefined);
  });

  it('counts creates, reads, patches (status apart), deletes and watches by resource', async () => {
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'c1' }, data: { a: '1' } } });
    await core.readNamespacedConfigMap({ namespace: 'default', name: 'c1' });
    await core.listNamespacedConfigMap({ namespace: 'default' });
    await core.patchNamespacedConfigMap({ namespace: 'default', name: 'c1', body: { data: { a: '2' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await core.deleteNamespacedConfigMap({ namespace: 'default', name: 'c1' });
    await batch.createNamespacedJob({ namespace: 'default', body: {
      metadata: { name: 'j1' }, spec: { suspend: true, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'none' }] } } },
    } });
    await batch.patchNamespacedJobStatus({ namespace: 'default', name: 'j1', body: { status: { active: 0 } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    const watch = await clusterFetch(tc.cluster, `/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1`);
    await watch.text();
    await clusterFetch(tc.cluster, `/version`).then((r) => r.text());
    await clusterFetch(tc.cluster, `/apis`).then((r) => r.text());

    expect(tc.cluster.requestCounts()).to.deep.equal({
      'create configmaps': 1,
      'create jobs.batch': 1,
      'delete configmaps': 1,
      'get configmaps': 1,
      'get nonresource': 2,
      'list configmaps': 1,
      'patch configmaps': 1,
      'patch jobs.batch/status': 1,
      'watch pods': 1,
    });
    tc.cluster.resetRequestCounts();
    expect(tc.cluster.requestCounts()).to.deep.equal({});
  });

  it('does not count writes the throttle refuses', async () => {
    tc.cluster.throttleWrites(1);
    try {
      const r1 = await clusterFetch(tc.cluster, `/api/v1/namespaces/default/configmaps`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name: 't1' } }),
      });
      const r2 = await clusterFetch(tc.cluster, `/api/v1/namespaces/default/configmaps`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name: 't2' } }),
      });
      expect([r1.status, r2.status]).to.deep.equal([201, 429]);
      expect(tc.cluster.requestCounts()).to.deep.equal({ 'create configmaps': 1 });
    } finally {
      tc.cluster.throttleWrites(undefined);
    }
  });
});
