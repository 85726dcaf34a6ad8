// The route of a platform's attempt (operator/src/platforms.ts) against the
// local cluster's apiserver: attempts routed at the same time each see the
// others' proxy starts, though each waits on a Secret read meanwhile (the
// per-proxy start limit held); an attempt that gets no route gives its start
// back; a re-probe after an expired URL goes back to its proxy, a new
// session after a bot check goes to another.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { GROUP, VERSION, type MediaJob, type MediaJobAttempt } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { EventRecorder } from '../src/events.js';
import { PLATFORM_ENV, PLATFORM_SECRET_KEYS, Platforms } from '../src/platforms.js';

const CRDS = ['proxypool.yaml', 'mediaplatform.yaml'].map((f) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url)));
const NS = 'default';

describe('platform routes: proxy starts under concurrency', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  let platforms: Platforms | undefined;
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });
  /** Secret reads held until the test lets them go: the slow read of a loaded apiserver, on cue. */
  const held: (() => void)[] = [];
  let holding = false;

  const mj = (name: string, attempts: MediaJobAttempt[] = []): MediaJob => ({
    apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name, namespace: NS, uid: `uid-${name}` },
    spec: { url: `http://www.route.example/watch?v=${name}` } as MediaJob['spec'],
    ...(attempts.length && { status: { attempts } as MediaJob['status'] }),
  });
  const proxyOf = async (route: Promise<{ env: Record<string, string> }>) => (await route).env[PLATFORM_ENV.proxy];

  const apply = (plural: string, body: object) => custom.createClusterCustomObject({ group: GROUP, version: VERSION, plural, body });
  const pool = (name: string, ids: string[]) => apply('proxypools', {
    apiVersion: `${GROUP}/${VERSION}`, kind: 'ProxyPool', metadata: { name },
    spec: { proxies: ids.map((id) => ({ id, urlSecretRef: { namespace: NS, name: `${name}-urls`, key: id } })), coolDownSeconds: 300, session: { usernameTemplate: 'u-{session}' } },
  });
  const platform = (name: string, host: string, perProxy: number) => apply('mediaplatforms', {
    apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaPlatform', metadata: { name },
    spec: { match: { hosts: [host] }, proxyPool: name, startsPerMinutePerProxy: perProxy },
  });
  const urls = (name: string, ids: string[]) => core.createNamespacedSecret({
    namespace: NS, body: { metadata: { name: `${name}-urls` }, stringData: Object.fromEntries(ids.map((id, i) => [id, `http://127.0.0.${20 + i}:3128`])) },
  });

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', ...CRDS.flatMap((f) => ['-f', f])]);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
    await pool('spread', ['p1', 'p2', 'p3']);
    await urls('spread', ['p1', 'p2', 'p3']);
    await platform('spread', 'www.route.example', 1);
    await pool('gone', ['q1']);
    await platform('gone', 'www.gone.example', 1);
    await pool('again', ['r1', 'r2']);
    await urls('again', ['r1', 'r2']);
    await platform('again', 'www.again.example', 5);

    const slowCore = Object.create(core) as k8s.CoreV1Api;
    slowCore.readNamespacedSecret = async (req) => {
      if (holding) await new Promise<void>((release) => held.push(release));
      return core.readNamespacedSecret(req);
    };
    platforms = new Platforms({
      kube: { custom, core: slowCore }, log, events: new EventRecorder(core, log, { component: 'test', instance: 'test' }),
      settings: { kc, resyncMs: 60_000, watchdogMs: 60_000, relistMs: 60_000, log }, wake: () => {},
    });
    await platforms.start();
    const hosts = { spread: 'www.route.example', gone: 'www.gone.example', again: 'www.again.example' };
    await eventually(async () => Object.entries(hosts).every(([name, host]) => platforms!.platformOf({ spec: { url: `http://${host}/` } } as MediaJob) === name), 30_000, 100);
  });

  after(async () => {
    await platforms?.stop();
    await tc?.stop();
  });

  it('attempts routed at once while the proxy Secret is read each take another proxy: none over its one start per minute', async () => {
    holding = true;
    const routes = ['a', 'b', 'c'].map((n) => platforms!.route(mj(n), 'spread', 1));
    // Every pass has picked and is waiting on its read before any read returns.
    await eventually(async () => held.length === 3, 30_000, 20);
    holding = false;
    for (const release of held.splice(0)) release();
    const picked = await Promise.all(routes.map(proxyOf));
    expect([...picked].sort()).to.deep.equal(['p1', 'p2', 'p3']);
    // Each attempt's Secret names the proxy its env does.
    const secrets = await Promise.all(routes.map(async (r) => (await r).secretData[PLATFORM_SECRET_KEYS.upstream]));
    expect(secrets.map((u) => new URL(u!).host)).to.have.members(['127.0.0.20:3128', '127.0.0.21:3128', '127.0.0.22:3128']);
    // The minute's starts are taken: a fourth attempt waits.
    await platforms!.route(mj('d'), 'spread', 1).then(() => expect.fail('a fourth start within the minute'), (err: Error) => expect(err.message).to.match(/no proxy of ProxyPool spread may take a job now/));
  });

  it('an attempt whose proxy Secret cannot be read gives its start back: once readable, the next attempt takes that proxy', async () => {
    const first = await platforms!.route(mj('g1'), 'gone', 1).then(() => undefined, (err: Error) => err);
    expect(first?.message).to.match(/Secret default\/gone-urls named by a platform or pool does not exist/);
    await urls('gone', ['q1']);
    expect(await proxyOf(platforms!.route(mj('g2'), 'gone', 1))).to.equal('q1');
  });

  it('a re-probe after an expired URL goes back to its proxy; a new session after a bot check goes to another', async () => {
    expect(await proxyOf(platforms!.route(mj('e'), 'again', 1))).to.equal('r1');
    const ended = (kind: string): MediaJobAttempt => ({ attempt: 1, defence: { kind, proxyId: 'r1' } } as unknown as MediaJobAttempt);
    // r2 has fewer starts now, and still the re-probe goes to r1.
    expect(await proxyOf(platforms!.route(mj('e', [ended('expired_url')]), 'again', 2))).to.equal('r1');
    // Level the counts (r1 2, r2 2): a bot check's new session then leaves r1, which the tie would have chosen by id.
    expect(await Promise.all(['f1', 'f2'].map((n) => proxyOf(platforms!.route(mj(n), 'again', 1))))).to.deep.equal(['r2', 'r2']);
    expect(await proxyOf(platforms!.route(mj('f', [ended('bot_check')]), 'again', 2))).to.equal('r2');
  });
});
