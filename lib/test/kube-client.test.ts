// The keep-alive transport under client-node's typed clients
// (lib/src/kube-client.ts) against the local cluster: a request with a body
// is framed whatever its method. A DELETE carries DeleteOptions
// (preconditions, propagationPolicy) in its body, and node:http sends a
// DELETE body unframed unless told its length: the API server then read a
// DELETE without options, and the body's bytes as a next request on the
// connection (answered by closing it: the caller's "socket hang up").
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { apiStatus, keepAliveTransport, makeKubeClient } from '../src/kube-client.js';

describe('kube client: the keep-alive transport', () => {
  let tc: TestCluster;
  let core: k8s.CoreV1Api;

  before(async () => {
    tc = await startTestCluster();
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    // One socket: every request below follows the one before on the same connection.
    core = makeKubeClient(kc, k8s.CoreV1Api, keepAliveTransport({ maxSockets: 1 }));
  });
  after(() => tc?.stop());

  it('sends a DELETE\'s options, and the connection serves the next request', async () => {
    const created = await core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'guarded' }, stringData: { a: '1' } } });
    const refused = await core.deleteNamespacedSecret({ name: 'guarded', namespace: 'default', body: { preconditions: { uid: 'not-its-uid' } } })
      .then(() => 200, (err: unknown) => apiStatus(err) ?? String(err));
    expect(refused, 'a precondition the API server read').to.equal(409);
    expect((await core.readNamespacedSecret({ name: 'guarded', namespace: 'default' })).metadata?.uid).to.equal(created.metadata?.uid);

    await core.deleteNamespacedSecret({ name: 'guarded', namespace: 'default', body: { preconditions: { uid: created.metadata!.uid! } } });
    const after = await core.readNamespacedSecret({ name: 'guarded', namespace: 'default' }).then(() => 200, (err: unknown) => apiStatus(err));
    expect(after).to.equal(404);
  });
});
