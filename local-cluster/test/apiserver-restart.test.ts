// An API server restart with its state kept (restartApiServer), as a
// kube-apiserver restart over the same etcd: open watches end, the port
// refuses connections while it is down, then the same URL serves every
// object as before, a watch resumed from before the restart gets 410
// Expired (a fresh watch cache), and a pod started before keeps running.
// A connection that never finished its TLS handshake does not hold the
// restart: every connection goes, as with a process that exits.
import { connect } from 'node:net';
import { expect } from 'chai';
import { clusterFetch, eventually, startTestCluster, type TestCluster } from './support.js';

describe('local cluster: the API server restarted with its state kept', function () {
  this.timeout(30_000);
  let tc: TestCluster;

  before(async () => {
    tc = await startTestCluster();
  });
  after(async () => tc?.stop());

  const get = (path: string) => clusterFetch(tc.cluster, path);

  it('refuses while down, then serves the same objects, expires old watches and keeps pods running', async () => {
    await tc.kubectl(['create', 'configmap', 'kept', '--from-literal=a=1']);
    await tc.kubectl(['run', 'sleeper', '--image=busybox', '--restart=Never', '--command', '--', 'sleep', '60']);
    await eventually(async () => (await tc.kubectl(['get', 'pod', 'sleeper', '-o', 'jsonpath={.status.phase}'])).stdout === 'Running', 15_000);
    const listed = (await (await get('/api/v1/namespaces/default/configmaps')).json()) as { metadata: { resourceVersion: string } };
    const watch = await get(`/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=${listed.metadata.resourceVersion}`);
    const ended = watch.body!.getReader().closed.then(() => 'ended', () => 'ended');

    await tc.kubectl(['create', 'configmap', 'changed', '--from-literal=a=2']); // so the listed version is behind

    const restart = tc.cluster.restartApiServer(1_000);
    expect(await ended, 'the open watch').to.equal('ended');
    const refused = await get('/api/v1/namespaces/default/configmaps').then(() => 'answered', () => 'refused');
    expect(refused, 'a request while down').to.equal('refused');
    await restart;

    const kept = await tc.kubectl(['get', 'configmap', 'kept', '-o', 'jsonpath={.data.a}']);
    expect(kept.stdout).to.equal('1');
    const resumed = await get(`/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=${listed.metadata.resourceVersion}`);
    const reader = resumed.body!.getReader();
    const { value } = await reader.read();
    await reader.cancel();
    const first = JSON.parse(Buffer.from(value!).toString().split('\n')[0]!) as { type: string; object: { code: number; reason: string } };
    expect([first.type, first.object.code, first.object.reason]).to.deep.equal(['ERROR', 410, 'Expired']);
    expect((await tc.kubectl(['get', 'pod', 'sleeper', '-o', 'jsonpath={.status.phase}'])).stdout).to.equal('Running');
  });

  it('ends a connection still in its TLS handshake instead of waiting for it', async () => {
    const { hostname, port } = new URL(tc.cluster.url);
    const idle = connect(Number(port), hostname);
    const closed = new Promise<string>((resolve) => idle.once('close', () => resolve('closed')));
    idle.on('error', () => undefined);
    await new Promise((resolve) => idle.once('connect', resolve));
    // The handshake timeout of the server is two minutes: past this test's own timeout.
    await tc.cluster.restartApiServer(100);
    expect(await closed).to.equal('closed');
    expect((await get('/api/v1/namespaces/default/configmaps')).status).to.equal(200);
  });
});
