// The operator's informer wrapper on the local cluster: periodic relists
// correct a cache whose watch misses changes, and a relist whose watch
// fails as it starts is tried again.
import { createServer, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
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

  it('stops for good when stop() comes while a relist is listing: nothing is announced afterwards', async () => {
    let lists = 0;
    let listing!: () => void;
    let release!: () => void;
    const second = new Promise<void>((resolve) => (listing = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const seen: string[] = [];
    const inf = new ResilientInformer<k8s.V1ConfigMap>({
      name: 'configmaps', kc, path: '/api/v1/namespaces/default/configmaps',
      list: async () => {
        if (++lists === 2) {
          listing();
          await gate;
        }
        return core.listNamespacedConfigMap({ namespace: 'default' });
      },
      onChange: (cm) => seen.push(cm.metadata!.name!), resyncMs: 60_000, watchdogMs: 60_000, relistMs: 200, log,
    });
    informers.push(inf);
    await inf.start();
    await second;
    await inf.stop();
    release();
    await new Promise((resolve) => setTimeout(resolve, 300)); // the relist's list returns, and its watch would start
    seen.length = 0;
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'after-stop' } } });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(seen, 'changes announced by a stopped informer').to.deep.equal([]);
  });

  it('relists again when a relist lists but its watch is refused, as when the API server goes between the two', async () => {
    const proxy = await watchRefusingProxy(tc);
    let lists = 0;
    let refusedBeforeRelist = Infinity;
    try {
      const inf = new ResilientInformer<k8s.V1ConfigMap>({
        name: 'configmaps', kc: proxy.kc, path: '/api/v1/namespaces/default/configmaps',
        list: () => {
          if (++lists === 2) refusedBeforeRelist = proxy.refused;
          return core.listNamespacedConfigMap({ namespace: 'default' });
        },
        onChange: () => undefined, resyncMs: 60_000, watchdogMs: 60_000, relistMs: 3_600_000, log,
      });
      informers.push(inf);
      await inf.start();
      proxy.refuseWatches = true;
      tc.cluster.dropWatches();
      // The dropped watch is an error, so a relist: it lists, and its own watch is refused.
      await eventually(() => proxy.refused > refusedBeforeRelist, 10_000);
      expect(inf.followingSince(), 'a cache that does not follow says so').to.equal(undefined);
      const allowed = Date.now();
      proxy.refuseWatches = false;
      await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'after-refusal' } } });
      await eventually(() => inf.get('after-refusal', 'default') !== undefined, 10_000);
      expect(inf.followingSince()).to.be.at.least(allowed);
    } finally {
      await proxy.stop();
    }
  });
});

/**
 * A plain-HTTP proxy to the local cluster that answers watches 503 (as an
 * API server shutting down does) while refuseWatches is set; lists and the
 * rest pass through. Its kubeconfig uses the cluster's token.
 */
async function watchRefusingProxy(tc: TestCluster) {
  const state = { refuseWatches: false, refused: 0 };
  const server: Server = createServer((req, res) => {
    if (state.refuseWatches && new URL(req.url ?? '/', 'http://proxy').searchParams.get('watch') === 'true') {
      state.refused++;
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'ServiceUnavailable', code: 503 }));
      return;
    }
    const upstream = httpsRequest(new URL(req.url ?? '/', tc.cluster.url), { method: req.method, headers: req.headers, ca: tc.cluster.caCert }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      res.flushHeaders(); // a watch's headers come before its first event
      up.pipe(res);
      up.on('close', () => up.complete || res.destroy()); // the cluster dropped it: so does the proxy
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'proxy', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }], // client-node speaks plain HTTP only so
    users: [{ name: 'admin', token: tc.cluster.token }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'admin' }],
    currentContext: 'proxy',
  });
  return Object.assign(state, {
    kc,
    stop: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
