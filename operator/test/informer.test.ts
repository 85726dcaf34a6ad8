// The operator's informer on the local cluster, with client-go's reflector
// semantics: it lists once and then resumes its watch from the last
// resourceVersion (dropped streams, server timeouts, a stalled connection),
// lists again only on 410 Expired, periodically, or after failures in a row,
// and stays quiet while idle.
import { createServer, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { FAILED_WATCHES_BEFORE_RELIST, ResilientInformer, type ResilientInformerOptions } from '../src/informer.js';

type Cm = k8s.V1ConfigMap;

describe('operator: resilient informer', () => {
  let tc: TestCluster;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  const informers: ResilientInformer<Cm>[] = [];
  let serial = 0;

  before(async () => {
    // Bookmarks every 200 ms: what keeps a healthy idle watch visibly alive (real clusters: about a minute).
    tc = await startTestCluster({ bookmarkIntervalMs: 200 });
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

  /** A fresh namespace per test, so no test sees another's ConfigMaps. */
  async function namespace(): Promise<string> {
    const name = `inf-${++serial}`;
    await core.createNamespace({ body: { metadata: { name } } });
    return name;
  }

  /** An informer on `ns`'s ConfigMaps that counts its LISTs, records what it announces, and keeps its warning lines. */
  async function informer(ns: string, o: Partial<ResilientInformerOptions<Cm>> & { viaKc?: k8s.KubeConfig; listFails?: () => boolean } = {}) {
    const seen = { lists: 0, events: [] as string[], warnings: [] as string[] };
    const inf = new ResilientInformer<Cm>({
      name: 'configmaps', kc: o.viaKc ?? kc, path: `/api/v1/namespaces/${ns}/configmaps`,
      list: () => {
        seen.lists++;
        return o.listFails?.() ? Promise.reject(new Error('API server unavailable')) : core.listNamespacedConfigMap({ namespace: ns });
      },
      onChange: (cm, type) => seen.events.push(`${type} ${cm.metadata!.name}`),
      resyncMs: 60_000, watchdogMs: 60_000, relistMs: 3_600_000, log: warningsInto(seen.warnings),
      ...o,
    });
    informers.push(inf);
    await inf.start();
    return { inf, seen };
  }

  const create = (ns: string, name: string) => core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name } } });

  it('stays idle for many watchdog periods with one LIST and no warning: bookmarks and resumed watches keep it alive', async () => {
    const ns = await namespace();
    // The watchdog at 600 ms and server-side watch timeouts of 1-2 s: in 5 s the watch ends
    // three times or more and a watchdog without bookmarks would fire eight times.
    const { inf, seen } = await informer(ns, { watchdogMs: 600, minWatchTimeoutSeconds: 1 });
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(seen.lists, 'LISTs while idle').to.equal(1);
    expect(seen.warnings, 'warning lines while idle').to.deep.equal([]);
    await create(ns, 'after-idle');
    await eventually(async () => inf.get('after-idle', ns) !== undefined, 5_000);
    expect(seen.lists).to.equal(1);
  });

  it('resumes a dropped watch from its version: no LIST, no change missed, none announced twice, no warning', async () => {
    const ns = await namespace();
    const { inf, seen } = await informer(ns);
    for (let i = 0; i < 6; i++) {
      await create(ns, `cm-${i}`);
      tc.cluster.dropWatches();
    }
    await eventually(async () => inf.list(ns).length === 6, 10_000);
    expect(seen.events.filter((e) => e.startsWith('add')).sort()).to.deep.equal([0, 1, 2, 3, 4, 5].map((i) => `add cm-${i}`));
    expect(seen.lists).to.equal(1);
    expect(seen.warnings).to.deep.equal([]);
  });

  for (const form of ['an ERROR event', 'an HTTP 410'] as const) {
    it(`lists again, once, when the server answers ${form} (Expired), and announces what it missed`, async () => {
      const ns = await namespace();
      const proxy = await faultyProxy(tc);
      try {
        const { inf, seen } = await informer(ns, { viaKc: proxy.kc });
        await create(ns, 'before');
        await eventually(async () => inf.get('before', ns) !== undefined, 5_000);
        proxy.mode = 'refuse';
        tc.cluster.dropWatches();
        await eventually(() => proxy.refused > 0, 5_000);
        await create(ns, 'missed');
        await core.deleteNamespacedConfigMap({ name: 'before', namespace: ns });
        proxy.mode = form === 'an ERROR event' ? 'expire-event' : 'expire-http';
        await eventually(() => proxy.expired > 0, 10_000);
        await eventually(async () => inf.get('missed', ns) !== undefined && inf.get('before', ns) === undefined, 10_000);
        expect(seen.lists, 'the start and one relist').to.equal(2);
        expect(seen.events).to.include.members(['add missed', 'delete before']);
      } finally {
        await proxy.stop();
      }
    });
  }

  it('backs off while watches are refused, says it does not follow, then resumes from its version without a LIST', async () => {
    const ns = await namespace();
    const proxy = await faultyProxy(tc);
    try {
      const { inf, seen } = await informer(ns, { viaKc: proxy.kc });
      proxy.mode = 'refuse';
      tc.cluster.dropWatches();
      await eventually(() => proxy.refused >= 2, 5_000);
      expect(inf.followingSince(), 'a cache that does not follow says so').to.equal(undefined);
      await create(ns, 'during-refusal');
      const allowed = Date.now();
      proxy.mode = 'pass';
      await eventually(async () => inf.get('during-refusal', ns) !== undefined, 10_000);
      expect(inf.followingSince()).to.be.at.least(allowed);
      expect(seen.lists, 'fewer failures than the relist threshold: resumed, not listed').to.equal(1);
      expect(proxy.refused).to.be.below(FAILED_WATCHES_BEFORE_RELIST);
    } finally {
      await proxy.stop();
    }
  });

  it(`lists again after ${FAILED_WATCHES_BEFORE_RELIST} failed watches in a row, with growing pauses between them`, async () => {
    const ns = await namespace();
    const proxy = await faultyProxy(tc);
    try {
      const { seen } = await informer(ns, { viaKc: proxy.kc });
      proxy.mode = 'refuse';
      const from = Date.now();
      tc.cluster.dropWatches();
      await eventually(() => seen.lists === 2, 20_000);
      // 250 + 500 + 1000 + 2000 ms of backoff (±20%) before the fifth failure's list: a loop would take milliseconds.
      expect(Date.now() - from).to.be.at.least(2_500);
      expect(seen.warnings.length, 'failures in a row are warned of').to.be.at.least(1);
      proxy.mode = 'pass';
    } finally {
      await proxy.stop();
    }
  });

  it('abandons a watch that shows no sign of life and watches again from its version, without a LIST', async () => {
    const ns = await namespace();
    const proxy = await faultyProxy(tc);
    try {
      const { inf, seen } = await informer(ns, { viaKc: proxy.kc, watchdogMs: 500 });
      proxy.mode = 'stall';
      tc.cluster.dropWatches();
      await eventually(() => proxy.stalled >= 3, 10_000);
      await create(ns, 'after-stall');
      proxy.mode = 'pass';
      await eventually(async () => inf.get('after-stall', ns) !== undefined, 10_000);
      expect(seen.lists).to.equal(1);
      expect(seen.warnings).to.deep.equal([]);
    } finally {
      await proxy.stop();
    }
  });

  it('under the local cluster\'s watch faults (drops, resets, cut events, 410s, slow lists) ends with every change, listing only for the 410s', async () => {
    const ns = await namespace();
    tc.cluster.resetWatchFaultCounts();
    tc.cluster.setWatchFaults({ drop: 2, reset: 2, midEventReset: 2, expire: 0.3, expireAs: 'mixed', listDelayMs: 50, listDelayMaxMs: 200, bookmarkMs: 100, seed: 34 });
    try {
      const { inf, seen } = await informer(ns, { watchdogMs: 2_000 });
      for (let i = 0; i < 40; i++) {
        await create(ns, `f-${i}`);
        if (i % 4 === 3) await core.deleteNamespacedConfigMap({ name: `f-${i - 1}`, namespace: ns });
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      const expected = Array.from({ length: 40 }, (_, i) => `f-${i}`).filter((_, i) => i % 4 !== 2).sort();
      await eventually(async () => JSON.stringify(inf.list(ns).map((c) => c.metadata!.name).sort()) === JSON.stringify(expected), 20_000);
      const faults = tc.cluster.watchFaultCounts;
      expect(faults.drops + faults.resets + faults.midEventResets, 'watches broken by the fault mode').to.be.at.least(3);
      // One LIST at start, and one per 410 (or per five failed watches in a row, which the seed does not produce).
      expect(seen.lists).to.be.at.most(1 + faults.expiries + Math.floor((faults.resets + faults.midEventResets) / 5));
      // Deletions announced name only deleted objects (one made and deleted inside a 410's gap is never seen at all).
      const deleted = Array.from({ length: 10 }, (_, k) => `delete f-${4 * k + 2}`);
      expect(seen.events.filter((e) => e.startsWith('delete'))).to.satisfy((ds: string[]) => ds.every((d) => deleted.includes(d)));
    } finally {
      tc.cluster.setWatchFaults(undefined);
    }
  });

  it('relists once per period, so a change its watch never delivered reaches the cache, deletions too', async () => {
    const ns = await namespace();
    // Lists `ns` but watches the empty `quiet` namespace: a watch that looks healthy and never
    // delivers a change, so the cache can only learn of one by listing again.
    const deaf = (relistMs: number) => informer(ns, { path: '/api/v1/namespaces/quiet/configmaps', relistMs });
    const relisting = await deaf(300);
    const never = await deaf(3_600_000);
    const from = Date.now();
    await create(ns, 'missed');
    await eventually(async () => relisting.inf.get('missed', ns) !== undefined, 10_000);
    expect(never.inf.get('missed', ns), 'without a relist the change stays unseen').to.equal(undefined);
    await core.deleteNamespacedConfigMap({ name: 'missed', namespace: ns });
    await eventually(async () => relisting.inf.get('missed', ns) === undefined, 10_000);
    expect(relisting.seen.lists, 'one LIST per period').to.be.at.most(2 + Math.ceil((Date.now() - from) / 300));
    expect(never.seen.lists).to.equal(1);
  });

  it('keeps its cache, and announces no deletion, while a relist fails', async () => {
    const ns = await namespace();
    await create(ns, 'kept');
    let lists = 0;
    const { inf, seen } = await informer(ns, { relistMs: 200, listFails: () => ++lists > 1 });
    await eventually(async () => lists >= 3, 10_000);
    expect(inf.get('kept', ns)).to.not.equal(undefined);
    expect(seen.events).to.deep.equal(['add kept']);
  });

  it('stops for good when stop() comes while a relist is listing: nothing is announced afterwards', async () => {
    const ns = await namespace();
    let lists = 0;
    let listing!: () => void;
    let release!: () => void;
    const second = new Promise<void>((resolve) => (listing = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { inf, seen } = await informer(ns, {
      relistMs: 200,
      list: async () => {
        if (++lists === 2) {
          listing();
          await gate;
        }
        return core.listNamespacedConfigMap({ namespace: ns });
      },
    });
    await second;
    const stopped = inf.stop();
    release();
    await stopped;
    seen.events.length = 0;
    await create(ns, 'after-stop');
    await new Promise((resolve) => setTimeout(resolve, 500)); // a watch left running would announce it by now
    expect(seen.events, 'changes announced by a stopped informer').to.deep.equal([]);
  });
});

/** A logger whose warning lines (and worse) are kept in `into`. */
function warningsInto(into: string[]) {
  return pino({ level: 'info' }, new Writable({
    write(chunk: Buffer, _enc, done) {
      const line = JSON.parse(chunk.toString()) as { level: number; msg: string };
      if (line.level >= 40) into.push(line.msg);
      done();
    },
  }));
}

type ProxyMode = 'pass' | 'refuse' | 'expire-event' | 'expire-http' | 'stall';

/**
 * A plain-HTTP proxy to the local cluster; lists and the rest pass through,
 * and watches are served by `mode`: passed through, refused with 503 (an API
 * server shutting down), answered Expired once (an ERROR event in a 200
 * stream, or an HTTP 410), or stalled (headers, then nothing ever). Its kubeconfig
 * uses the cluster's token.
 */
async function faultyProxy(tc: TestCluster) {
  const state = { mode: 'pass' as ProxyMode, refused: 0, expired: 0, stalled: 0 };
  const expiredStatus = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'too old resource version: 1 (2)', reason: 'Expired', code: 410 };
  const server: Server = createServer((req, res) => {
    const watch = new URL(req.url ?? '/', 'http://proxy').searchParams.get('watch') === 'true';
    if (watch && state.mode === 'refuse') {
      state.refused++;
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'ServiceUnavailable', code: 503 }));
      return;
    }
    if (watch && state.mode === 'expire-event') {
      state.expired++;
      state.mode = 'pass'; // once: the relist's own watch goes through
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'ERROR', object: expiredStatus }) + '\n');
      return;
    }
    if (watch && state.mode === 'expire-http') {
      state.expired++;
      state.mode = 'pass';
      res.writeHead(410, { 'content-type': 'application/json' });
      res.end(JSON.stringify(expiredStatus));
      return;
    }
    if (watch && state.mode === 'stall') {
      state.stalled++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      return; // and never a byte more, until the client goes
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
