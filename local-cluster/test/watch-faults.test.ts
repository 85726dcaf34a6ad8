// The watch fault mode (src/watch-faults.ts), seen from real clients: a raw
// HTTPS watch, client-node's Watch and informer, and kubectl. Expiries answer
// 410 in both of kube-apiserver's forms; drops end a stream cleanly, resets
// break it, a mid-event reset leaves half a line; a client that resumes from
// its last resourceVersion still sees every event once; LISTs are held back;
// bookmarks follow the interval set; nothing of this happens by default; the
// environment variable is parsed and a bad value refused; the seed makes a
// run repeatable.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { expect } from 'chai';
import { pino } from 'pino';
import { LocalCluster, WATCH_FAULTS_ENV, watchFaultsFromEnv, type WatchFaultCounts, type WatchFaults } from '../src/index.js';
import { prng } from '../src/watch-faults.js';
import { clusterFetch, eventually, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

interface WatchLine {
  type: string;
  object: { kind?: string; code?: number; reason?: string; message?: string; metadata?: { name?: string; resourceVersion?: string } };
}

interface RawWatch {
  status: number;
  headers: Headers;
  /** Everything received so far, as text. */
  text(): string;
  /** The complete lines received so far, parsed. */
  lines(): WatchLine[];
  /** How the body ended: clean (its last chunk came) or with an error. */
  ended: Promise<{ clean: boolean; error?: unknown }>;
  isEnded(): boolean;
  abort(): void;
}

/** A watch over raw HTTPS (support.ts clusterFetch), reading the body as it comes. */
async function rawWatch(cluster: LocalCluster, path: string, stop?: AbortSignal): Promise<RawWatch> {
  const abort = new AbortController();
  const signal = stop ? AbortSignal.any([stop, abort.signal]) : abort.signal;
  const res = await clusterFetch(cluster, path, { signal });
  let text = '';
  let done = false;
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    try {
      for (;;) {
        const { done: end, value } = await reader.read();
        if (end) return { clean: true };
        text += decoder.decode(value, { stream: true });
      }
    } catch (error) {
      return { clean: false, error };
    } finally {
      done = true;
    }
  })();
  return {
    status: res.status,
    headers: res.headers,
    text: () => text,
    lines: () => text.split('\n').slice(0, -1).map((l) => JSON.parse(l) as WatchLine),
    ended,
    isEnded: () => done,
    abort: () => abort.abort(),
  };
}

const NO_FAULTS: WatchFaultCounts = { drops: 0, resets: 0, midEventResets: 0, expiries: 0, expiriesAsStatus: 0, delayedLists: 0 };

describe('local cluster: the watch fault mode', function () {
  this.timeout(20_000);
  let tc: TestCluster;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let nsCount = 0;
  let ns: string;

  const cfgPath = (namespace = ns) => `/api/v1/namespaces/${namespace}/configmaps`;
  const createConfigMap = async (name: string, namespace = ns): Promise<string> => {
    const cm = await core.createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { a: '1' } } });
    return cm.metadata!.resourceVersion!;
  };
  const rvNow = () => String(tc.cluster.api.store.resourceVersion);

  before(async () => {
    // Off whatever the environment says: these tests set the faults themselves.
    tc = await startTestCluster({ watchFaults: false });
    kc = kubeConfigFor(tc.cluster);
    core = kc.makeApiClient(k8s.CoreV1Api);
  });
  after(async () => tc?.stop());
  beforeEach(async () => {
    ns = `faults-${++nsCount}`;
    await core.createNamespace({ body: { metadata: { name: ns } } });
  });
  afterEach(() => {
    tc.cluster.setWatchFaults(undefined);
    tc.cluster.resetWatchFaultCounts();
    tc.cluster.resetRequestCounts();
  });

  describe('settings', () => {
    const saved = process.env[WATCH_FAULTS_ENV];
    afterEach(() => {
      if (saved === undefined) delete process.env[WATCH_FAULTS_ENV];
      else process.env[WATCH_FAULTS_ENV] = saved;
    });

    it('parses LOCAL_CLUSTER_WATCH_FAULTS; unset or empty is off', () => {
      expect(watchFaultsFromEnv({ [WATCH_FAULTS_ENV]: 'drop=0.05, reset=0.02,midEventReset=0.01,expire=0.1,expireAs=mixed,listDelayMs=200,listDelayMaxMs=400,bookmarkMs=1000,seed=7' }))
        .to.deep.equal({ drop: 0.05, reset: 0.02, midEventReset: 0.01, expire: 0.1, expireAs: 'mixed', listDelayMs: 200, listDelayMaxMs: 400, bookmarkMs: 1000, seed: 7 });
      expect(watchFaultsFromEnv({})).to.equal(undefined);
      expect(watchFaultsFromEnv({ [WATCH_FAULTS_ENV]: ' ' })).to.equal(undefined);
    });

    it('refuses a bad value with a message naming the variable and the setting, not echoing the value', () => {
      const refusal = (value: string) => {
        try {
          watchFaultsFromEnv({ [WATCH_FAULTS_ENV]: value });
        } catch (e) {
          expect((e as Error).name).to.equal('ConfigError');
          return (e as Error).message;
        }
        throw new Error(`accepted ${value}`);
      };
      expect(refusal('expire=2')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.expire: must be a probability from 0 to 1');
      expect(refusal('drop=-1')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.drop: must be a rate per watch per second, 0 or more');
      expect(refusal('drop=fast')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.drop: must be a number').and.not.include('fast');
      expect(refusal('dorp=1')).to.include('LOCAL_CLUSTER_WATCH_FAULTS: unknown setting "dorp" (known: drop, reset, midEventReset');
      expect(refusal('drop=1,drop=2')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.drop: is given twice');
      expect(refusal('reset')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.reset: needs a value (key=value)');
      expect(refusal('listDelayMs=500,listDelayMaxMs=100')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.listDelayMaxMs: must not be below listDelayMs');
      expect(refusal('expireAs=sometimes')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.expireAs: must be event, status or mixed');
      expect(refusal('bookmarkMs=1')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.bookmarkMs: must be at least 10 ms');
      expect(refusal('seed=1.5')).to.include('LOCAL_CLUSTER_WATCH_FAULTS.seed: must be an integer');
      expect(() => tc.cluster.setWatchFaults({ expire: 2 })).to.throw('expire: must be a probability from 0 to 1');
      expect(() => tc.cluster.setWatchFaults({ dorp: 1 } as WatchFaults)).to.throw('unknown setting "dorp"');
    });

    it('is read by LocalCluster.start when the option is not given, and a bad value stops the start', async () => {
      process.env[WATCH_FAULTS_ENV] = 'drop=50,expire=1,expireAs=status,listDelayMs=20,bookmarkMs=500,seed=7';
      const quiet = { logger: pino({ level: 'silent' }) };
      const fromEnv = await LocalCluster.start(quiet);
      try {
        expect(fromEnv.watchFaults).to.deep.equal({ drop: 50, expire: 1, expireAs: 'status', listDelayMs: 20, bookmarkMs: 500, seed: 7 });
        const w = await rawWatch(fromEnv, `${cfgPath('default')}?watch=1`);
        expect(await w.ended).to.deep.equal({ clean: true });
        expect(fromEnv.watchFaultCounts.drops).to.equal(1);
      } finally {
        await fromEnv.stop();
      }
      const optedOut = await LocalCluster.start({ ...quiet, watchFaults: false });
      try {
        expect(optedOut.watchFaults).to.equal(undefined);
      } finally {
        await optedOut.stop();
      }
      process.env[WATCH_FAULTS_ENV] = 'expire=2';
      let refused: Error | undefined;
      await LocalCluster.start(quiet).then((c) => c.stop(), (e: Error) => (refused = e));
      expect(refused?.message).to.equal('invalid configuration:\n  LOCAL_CLUSTER_WATCH_FAULTS.expire: must be a probability from 0 to 1');
    });

    it('stops the command-line cluster at start, with the message', async () => {
      const cli = join(import.meta.dirname, '../src/cli.ts');
      const tsx = join(import.meta.dirname, '../../node_modules/.bin/tsx');
      const run = promisify(execFile)(tsx, [cli, '--kubeconfig', join(tc.home, 'cli-kubeconfig')], {
        env: { ...process.env, [WATCH_FAULTS_ENV]: 'drop=often' }, timeout: 15_000,
      });
      const err = await run.then(() => undefined, (e: { code: number; stderr: string }) => e);
      expect(err?.code).to.equal(1);
      expect(err?.stderr).to.equal('local-cluster: invalid configuration:\n  LOCAL_CLUSTER_WATCH_FAULTS.drop: must be a number\n');
    });
  });

  it('is off by default: a watch from an old version replays, streams stay open, lists are not held back', async () => {
    const saved = process.env[WATCH_FAULTS_ENV];
    delete process.env[WATCH_FAULTS_ENV];
    const plain = await startTestCluster();
    try {
      expect(plain.cluster.watchFaults).to.equal(undefined);
      const plainCore = kubeConfigFor(plain.cluster).makeApiClient(k8s.CoreV1Api);
      const create = (name: string) => plainCore.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name } } });
      const old = (await create('first')).metadata!.resourceVersion!;
      await create('second');
      const w = await rawWatch(plain.cluster, `${cfgPath('default')}?watch=1&resourceVersion=${old}&allowWatchBookmarks=true`);
      for (let i = 0; i < 20; i++) await create(`more-${i}`);
      await eventually(() => w.lines().length === 21);
      expect(w.lines().map((l) => l.type)).to.deep.equal(Array(21).fill('ADDED'));
      expect(w.isEnded()).to.equal(false);
      w.abort();
      const started = Date.now();
      await plainCore.listNamespacedConfigMap({ namespace: 'default' });
      expect(Date.now() - started).to.be.below(1000);
      expect(plain.cluster.watchFaultCounts).to.deep.equal(NO_FAULTS);
    } finally {
      if (saved !== undefined) process.env[WATCH_FAULTS_ENV] = saved;
      await plain.stop();
    }
  });

  describe('expire', () => {
    it('answers a watch from an older version with the ERROR event and 410 Expired, then ends the stream', async () => {
      const old = await createConfigMap('a');
      await createConfigMap('b');
      tc.cluster.setWatchFaults({ expire: 1 });
      const current = rvNow();
      const w = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&resourceVersion=${old}`);
      expect(w.status).to.equal(200);
      expect(await w.ended).to.deep.equal({ clean: true });
      expect(w.text()).to.equal(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: ${old} (${current})","reason":"Expired","code":410}}\n`);

      // client-node's Watch hands the Status to the callback, then ends.
      const events: [string, k8s.V1Status][] = [];
      const ended = new Promise<unknown>((resolve) => {
        void new k8s.Watch(kc).watch(cfgPath(), { resourceVersion: old }, (type, obj: k8s.V1Status) => events.push([type, obj]), resolve);
      });
      expect(await ended).to.equal(null);
      expect(events).to.have.length(1);
      expect(events[0]![0]).to.equal('ERROR');
      expect(events[0]![1]).to.include({ code: 410, reason: 'Expired', message: `too old resource version: ${old} (${current})` });

      // kubectl prints the event as the apiserver sent it.
      const kubectl = await tc.kubectl(['get', '--raw', `${cfgPath()}?watch=1&resourceVersion=${old}`]);
      expect(kubectl.stdout).to.equal(w.text());
      expect(tc.cluster.watchFaultCounts).to.deep.equal({ ...NO_FAULTS, expiries: 3 });
    });

    it('answers HTTP 410 with the Status as the other form', async () => {
      const old = await createConfigMap('a');
      await createConfigMap('b');
      tc.cluster.setWatchFaults({ expire: 1, expireAs: 'status' });
      const current = rvNow();
      const res = await clusterFetch(tc.cluster, `${cfgPath()}?watch=1&resourceVersion=${old}`);
      expect(res.status).to.equal(410);
      expect(res.headers.get('content-type')).to.equal('application/json');
      expect(await res.json()).to.deep.equal({
        kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
        message: `too old resource version: ${old} (${current})`, reason: 'Expired', code: 410,
      });

      const err = await new Promise<{ statusCode?: number } | null>((resolve) => {
        void new k8s.Watch(kc).watch(cfgPath(), { resourceVersion: old }, () => undefined, resolve);
      });
      expect(err?.statusCode).to.equal(410);

      const kubectl = await tc.kubectl(['get', '--raw', `${cfgPath()}?watch=1&resourceVersion=${old}`], { allowFail: true });
      expect(kubectl.code).to.equal(1);
      expect(kubectl.stderr).to.equal(`Error from server (Expired): too old resource version: ${old} (${current})\n`);
      expect(tc.cluster.watchFaultCounts).to.deep.equal({ ...NO_FAULTS, expiries: 3, expiriesAsStatus: 3 });
    });

    it('never expires a watch from the current version, so a relisting client gets through', async () => {
      const old = await createConfigMap('a');
      tc.cluster.setWatchFaults({ expire: 1 });
      const w = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&resourceVersion=${old}`);
      await createConfigMap('b');
      await eventually(() => w.lines().length === 1);
      expect(w.lines()[0]).to.deep.include({ type: 'ADDED' });
      expect(w.lines()[0]!.object.metadata?.name).to.equal('b');
      w.abort();
      expect(tc.cluster.watchFaultCounts.expiries).to.equal(0);
    });

    it('makes an informer relist; requestCounts counts LISTs and WATCHes per kind', async () => {
      const lists = () => tc.cluster.requestCounts()['list configmaps'] ?? 0;
      const informer = k8s.makeInformer<k8s.V1ConfigMap>(kc, cfgPath(), () => core.listNamespacedConfigMap({ namespace: ns }));
      const errors: unknown[] = [];
      informer.on('error', (e) => errors.push(e));
      await informer.start();
      tc.cluster.setWatchFaults({ expire: 1, expireAs: 'mixed', drop: 5, seed: 3 });
      const c = () => tc.cluster.watchFaultCounts;
      try {
        const names: string[] = [];
        // Writes go on while watches are dropped: a resume from before the latest write is expired, in either form.
        for (let i = 0; names.length < 10 || c().expiriesAsStatus === 0 || c().expiries === c().expiriesAsStatus; i++) {
          if (i >= 1000) throw new Error(`no expiry of both forms: ${JSON.stringify(c())}`);
          names.push(`cm-${i}`);
          await createConfigMap(`cm-${i}`);
        }
        tc.cluster.setWatchFaults(undefined);
        await eventually(() => informer.list(ns).length === names.length);
        expect(informer.list(ns).map((o) => o.metadata!.name).sort()).to.deep.equal([...names].sort());
        expect(errors).to.deep.equal([]);
        // Every expiry, in either form, cost one relist; the first list is the informer's start.
        await eventually(() => lists() === 1 + c().expiries);
        expect(tc.cluster.requestCounts()['watch configmaps']).to.be.at.least(c().drops + 1);
      } finally {
        await informer.stop();
      }
    });
  });

  describe('drop and reset', () => {
    it('drop ends the body cleanly; reset ends it with a connection error', async () => {
      // Opened before the fault is set, so that it cannot come before the client has the headers.
      const dropped = await rawWatch(tc.cluster, `${cfgPath()}?watch=1`);
      tc.cluster.setWatchFaults({ drop: 50 });
      expect(await dropped.ended).to.deep.equal({ clean: true });
      expect(tc.cluster.watchFaultCounts).to.deep.equal({ ...NO_FAULTS, drops: 1 });

      tc.cluster.setWatchFaults(undefined);
      const reset = await rawWatch(tc.cluster, `${cfgPath()}?watch=1`);
      tc.cluster.setWatchFaults({ reset: 50 });
      const end = await reset.ended;
      expect(end.clean).to.equal(false);
      expect(tc.cluster.watchFaultCounts).to.deep.equal({ ...NO_FAULTS, drops: 1, resets: 1 });
    });

    it('reset mid-event leaves a truncated line, then a connection error', async () => {
      const w = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&resourceVersion=${rvNow()}`);
      tc.cluster.setWatchFaults({ midEventReset: 50 });
      // Armed at the next tick, the cut happens at the next event.
      let i = 0;
      await eventually(async () => {
        if (!w.isEnded()) await createConfigMap(`cut-${i++}`);
        return w.isEnded();
      }, 5_000, 20);
      expect((await w.ended).clean).to.equal(false);
      const text = w.text();
      const tail = text.slice(text.lastIndexOf('\n') + 1);
      expect(tail).to.match(/^\{"type":"ADDED","object":\{/);
      expect(() => JSON.parse(tail)).to.throw(SyntaxError);
      expect(tc.cluster.watchFaultCounts).to.deep.equal({ ...NO_FAULTS, midEventResets: 1 });
      // The cut event comes whole to a client resuming from the last complete line.
      const last = w.lines().at(-1)?.object.metadata?.resourceVersion;
      tc.cluster.setWatchFaults(undefined);
      const resumed = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&resourceVersion=${last ?? '1'}`);
      const expectedNames = Array.from({ length: i }, (_, k) => `cut-${k}`).slice(w.lines().length);
      await eventually(() => resumed.lines().length === expectedNames.length);
      expect(resumed.lines().map((l) => l.object.metadata?.name)).to.deep.equal(expectedNames);
      expect(tail.length).to.be.below(JSON.stringify(resumed.lines()[0]).length);
      resumed.abort();
    });

    it('a client resuming from its last resourceVersion sees every event exactly once (raw HTTPS and client-node)', async () => {
      const start = rvNow();
      // The raw client: on any end, resume from the last complete event or bookmark.
      const raw = { names: [] as string[], errors: [] as WatchLine[], stop: new AbortController(), rv: start, connects: 0 };
      const rawLoop = (async () => {
        while (!raw.stop.signal.aborted) {
          raw.connects++;
          // A reset can come before the headers: then the request itself fails, and is made again.
          const w = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&allowWatchBookmarks=true&resourceVersion=${raw.rv}`, raw.stop.signal).catch(() => undefined);
          if (!w) continue;
          let seen = 0;
          const take = () => {
            for (const line of w.lines().slice(seen)) {
              if (line.type === 'ADDED') raw.names.push(line.object.metadata!.name!);
              if (line.type === 'ERROR') raw.errors.push(line);
              raw.rv = line.object.metadata?.resourceVersion ?? raw.rv;
            }
            seen = w.lines().length;
          };
          const timer = setInterval(take, 10);
          await w.ended;
          clearInterval(timer);
          take();
        }
      })();
      // client-node's Watch: its done callback resumes.
      const cn = { names: [] as string[], errors: [] as unknown[], stopped: false, controller: undefined as AbortController | undefined, rv: start };
      const watch = new k8s.Watch(kc);
      const connect = async (): Promise<void> => {
        if (cn.stopped) return;
        cn.controller = await watch.watch(cfgPath(), { resourceVersion: cn.rv, allowWatchBookmarks: true }, (type, obj: k8s.KubernetesObject) => {
          if (type === 'ADDED') cn.names.push(obj.metadata!.name!);
          if (type === 'ERROR') cn.errors.push(obj);
          cn.rv = obj.metadata?.resourceVersion ?? cn.rv;
        }, () => void connect());
        // Stopped while connecting: this one is the last.
        if (cn.stopped) cn.controller.abort();
      };
      await connect();

      tc.cluster.setWatchFaults({ drop: 4, reset: 4, midEventReset: 4, bookmarkMs: 100, seed: 11 });
      const names: string[] = [];
      const faults = () => {
        const c = tc.cluster.watchFaultCounts;
        return c.drops + c.resets + c.midEventResets;
      };
      try {
        for (let i = 0; names.length < 30 || Object.values(tc.cluster.watchFaultCounts).filter((n) => n > 0).length < 3; i++) {
          if (i >= 300) throw new Error(`not every fault happened: ${JSON.stringify(tc.cluster.watchFaultCounts)}`);
          names.push(`cm-${i}`);
          await createConfigMap(`cm-${i}`);
          // A few creates, then a fault before the next ones.
          if (i % 3 === 2) {
            const before = faults();
            await eventually(() => faults() > before, 5_000, 10);
          }
        }
        tc.cluster.setWatchFaults(undefined);
        // Said as a difference, should an event be missing or repeated.
        await eventually(() => raw.names.length >= names.length && cn.names.length >= names.length).catch(() => undefined);
        expect(raw.names).to.deep.equal(names);
        expect(cn.names).to.deep.equal(names);
        expect(raw.errors).to.deep.equal([]);
        expect(cn.errors).to.deep.equal([]);
        const counts = tc.cluster.watchFaultCounts;
        expect(counts.drops, 'drops').to.be.above(0);
        expect(counts.resets, 'resets').to.be.above(0);
        expect(counts.midEventResets, 'mid-event resets').to.be.above(0);
        expect(raw.connects).to.be.above(1);
      } finally {
        raw.stop.abort();
        cn.stopped = true;
        cn.controller?.abort();
        await rawLoop;
      }
    });

    it('kubectl get --watch ends quietly when its stream is dropped, as against a real apiserver', async () => {
      await createConfigMap('shown');
      tc.cluster.setWatchFaults({ drop: 20 });
      const { proc, output } = tc.kubectlStream(['get', 'configmaps', '-n', ns, '--watch', '-o', 'name']);
      const code = await new Promise<number | null>((resolve) => proc.on('exit', resolve));
      expect(code).to.equal(0);
      expect(output()).to.equal('configmap/shown\n');
      expect(tc.cluster.watchFaultCounts.drops).to.be.at.least(1);
    });
  });

  describe('slow lists', () => {
    it('holds a LIST back for the delay set; the list is read when asked, gets and watches are not delayed', async () => {
      await createConfigMap('before');
      tc.cluster.setWatchFaults({ listDelayMs: 600 });
      const started = Date.now();
      const listing = core.listNamespacedConfigMap({ namespace: ns });
      // Once the LIST has been read, a write lands during its delay.
      await eventually(() => tc.cluster.requestCounts()['list configmaps'] === 1, 5_000, 5);
      const during = await createConfigMap('during');
      const list = await listing;
      expect(Date.now() - started).to.be.at.least(600);
      expect(list.items.map((c) => c.metadata!.name)).to.deep.equal(['before']);
      expect(Number(list.metadata!.resourceVersion)).to.be.below(Number(during));
      // A watch from the list's version sees the write the list missed.
      const w = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&resourceVersion=${list.metadata!.resourceVersion}`);
      await eventually(() => w.lines().length === 1);
      expect(w.lines()[0]!.object.metadata?.name).to.equal('during');
      w.abort();
      const getStarted = Date.now();
      await core.readNamespacedConfigMap({ namespace: ns, name: 'before' });
      expect(Date.now() - getStarted).to.be.below(600);
      expect(tc.cluster.watchFaultCounts).to.deep.equal({ ...NO_FAULTS, delayedLists: 1 });
    });

    it('draws the delay between listDelayMs and listDelayMaxMs; kubectl waits it out', async () => {
      tc.cluster.setWatchFaults({ listDelayMs: 150, listDelayMaxMs: 300, seed: 5 });
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        await core.listNamespacedConfigMap({ namespace: ns });
        expect(Date.now() - started).to.be.at.least(150).and.below(1300);
      }
      const started = Date.now();
      await tc.kubectl(['get', 'configmaps', '-n', ns]);
      expect(Date.now() - started).to.be.at.least(150);
      expect(tc.cluster.watchFaultCounts.delayedLists).to.equal(4);
    });
  });

  describe('bookmarks', () => {
    it('come at the interval set, to open watches as well', async () => {
      const open = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&allowWatchBookmarks=true&resourceVersion=${rvNow()}`);
      tc.cluster.setWatchFaults({ bookmarkMs: 200 });
      const fresh = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&allowWatchBookmarks=true&resourceVersion=${rvNow()}`);
      const arrivals: number[] = [];
      let seen = 0;
      const started = Date.now();
      await eventually(() => {
        const n = fresh.lines().length;
        for (; seen < n; seen++) arrivals.push(Date.now());
        return n >= 4 && open.lines().length >= 3;
      }, 5_000, 5);
      for (const l of [...fresh.lines(), ...open.lines()]) {
        expect(l).to.deep.include({ type: 'BOOKMARK' });
        expect(l.object.kind).to.equal('ConfigMap');
        expect(l.object.metadata?.resourceVersion).to.match(/^\d+$/);
      }
      expect(arrivals[0]! - started).to.be.at.least(150);
      for (let i = 1; i < arrivals.length; i++) expect(arrivals[i]! - arrivals[i - 1]!).to.be.within(100, 600);
      open.abort();
      fresh.abort();
    });
  });

  describe('the seed', () => {
    it('repeats the same decisions for the same seed', async () => {
      const old = await createConfigMap('a');
      await createConfigMap('b');
      const pattern = async (seed: number): Promise<boolean[]> => {
        tc.cluster.setWatchFaults({ expire: 0.5, seed });
        const out: boolean[] = [];
        for (let i = 0; i < 12; i++) {
          const w = await rawWatch(tc.cluster, `${cfgPath()}?watch=1&resourceVersion=${old}`);
          await eventually(() => w.lines().length >= 1, 5_000, 5);
          out.push(w.lines()[0]!.type === 'ERROR');
          w.abort();
        }
        return out;
      };
      const first = await pattern(42);
      expect(first).to.include(true).and.include(false);
      expect(await pattern(42)).to.deep.equal(first);
      expect(tc.cluster.watchFaults?.seed).to.equal(42);
      // The PRNG itself.
      const a = prng(7);
      const b = prng(7);
      expect(Array.from({ length: 5 }, a)).to.deep.equal(Array.from({ length: 5 }, b));
    });

    it('is chosen at random, and can be read back, when none is given', () => {
      tc.cluster.setWatchFaults({ drop: 1 });
      expect(tc.cluster.watchFaults?.seed).to.be.a('number');
      tc.cluster.setWatchFaults({});
      expect(tc.cluster.watchFaults).to.equal(undefined);
    });
  });
});
