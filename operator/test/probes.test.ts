// The operator's probes and leader gauge (issue 34, item 6). First the rules
// (probes.ts) as a table; then two replicas on the local cluster, probed and
// scraped on their metrics listeners as the kubelet and Prometheus would:
// before the CRDs exist a replica is live but not ready (its caches cannot
// sync); once they do, the leader and the standby are both ready, and only
// the leader says mediajobs_operator_leader 1; with the API server gone
// both stay live (a restart mends nothing) but are not ready, naming the
// informers that do not follow, and the leader steps down (every gauge 0);
// back, ready again without a restart, one of them leading.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { LocalCluster } from '@mediajobs/local-cluster';
import { eventually, kubeConfigFor, startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';
import { applyCrds } from '../../scripts/apply-crds.js';
import { scrape } from '../../test/support/metrics.js';
import { freePort } from '../../test/support/ports.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { liveness, readiness, stalledAfterMs, type ProbeState } from '../src/probes.js';

describe('operator probes: the rules', () => {
  const base: ProbeState = { now: 100_000, stopping: false, synced: true, notFollowing: [], election: { lastTurn: 99_000, stalledAfterMs: 80_000 } };
  const cases: [string, Partial<ProbeState>, string | undefined, string | undefined][] = [
    ['leader or standby, loop turning, caches following', {}, undefined, undefined],
    ['without leader election', { election: undefined }, undefined, undefined],
    ['election not started yet (caches still syncing)', { synced: false, election: { lastTurn: 0, stalledAfterMs: 80_000 } }, undefined, 'Informer caches not synced'],
    ['loop turned just within the bound', { election: { lastTurn: 20_000, stalledAfterMs: 80_000 } }, undefined, undefined],
    ['loop stuck past the bound', { election: { lastTurn: 19_999, stalledAfterMs: 80_000 } }, 'Leader election loop stalled: no turn for 80 s', 'Leader election loop stalled: no turn for 80 s'],
    ['a cache not following the API server (an outage: live, not ready)', { notFollowing: ['jobs', 'pods'] }, undefined, 'Informers not following the API server: jobs, pods'],
    ['stopping', { stopping: true }, undefined, 'Shutting down'],
  ];
  for (const [name, change, live, ready] of cases) {
    it(name, () => {
      const s = { ...base, ...change };
      expect([liveness(s), readiness(s)]).to.deep.equal([live, ready]);
    });
  }

  it('a Lease loop turn may take its wait, two API calls at their timeout and the lease duration', () => {
    expect(stalledAfterMs({ durationSeconds: 15, renewSeconds: 5 }, 30_000)).to.equal(80_000);
  });
});

describe('operator probes on the metrics listener', function () {
  this.timeout(120_000);
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });
  const secretKeys = SecretBox.generateSpec('p1');
  let dir: string;
  let clusterPort: number;
  let tc: TestCluster;
  let restarted: LocalCluster | undefined;
  let db: TestDatabase;
  const operators: OperatorHandle[] = [];
  const pending: Promise<OperatorHandle>[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mj-probes-'));
    clusterPort = await freePort();
    tc = await startTestCluster({ port: clusterPort, stateDir: join(dir, 'state') });
    db = await createTestDatabase();
  });
  after(async () => {
    await Promise.all(operators.map((o) => o.stop()));
    await restarted?.stop();
    await tc?.stop().catch(() => undefined);
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A replica with its listener on a port known before it has started (its start waits for the caches). */
  async function replica(name: string): Promise<{ url: string; started: Promise<OperatorHandle> }> {
    const port = await freePort();
    const started = startOperator(loadOperatorConfig({
      DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys, POD_NAME: name,
      LEASE_DURATION_SECONDS: '2', LEASE_RENEW_SECONDS: '1', METRICS_PORT: String(port), METRICS_HOST: '127.0.0.1',
    }), { log, storage: { presign: async (key) => `http://files.test/${key}`, destination: () => ({ provider: 'managed' }) } });
    pending.push(started);
    void started.then((o) => operators.push(o), () => undefined);
    return { url: `http://127.0.0.1:${port}`, started };
  }
  const probe = async (url: string) => {
    const answer = async (path: string) => {
      const res = await fetch(`${url}${path}`);
      return { status: res.status, body: await res.json() as unknown };
    };
    return { live: await answer('/healthz'), ready: await answer('/readyz') };
  };
  const leaderGauge = async (url: string) => (await scrape(`${url}/metrics`)).find('mediajobs_operator_leader').map((s) => s.value);
  const OK = { status: 200, body: { status: 'ok' } };
  const READY = { status: 200, body: { status: 'ready' } };

  it('live and not ready until its caches sync; then the leader and the standby are both ready, and only the leader says 1', async () => {
    const a = await replica('replica-a');
    // No CRDs yet: the MediaJob informer cannot list, so the start waits, and the listener already answers.
    const early = await eventually(() => probe(a.url).catch(() => undefined), 20_000);
    expect(early).to.deep.equal({ live: OK, ready: { status: 503, body: { error: 'Informer caches not synced' } } });
    expect(await leaderGauge(a.url)).to.deep.equal([0]);

    await applyCrds(kubeConfigFor(tc.cluster));
    const opA = await a.started;
    await eventually(() => opA.isLeader(), 20_000);
    expect(await probe(a.url)).to.deep.equal({ live: OK, ready: READY });
    expect(await leaderGauge(a.url)).to.deep.equal([1]);

    const b = await replica('replica-b');
    const opB = await b.started;
    // The standby: ready (its caches follow and its Lease loop turns), not leading.
    await eventually(async () => JSON.stringify(await probe(b.url)) === JSON.stringify({ live: OK, ready: READY }), 20_000);
    expect(opB.isLeader()).to.equal(false);
    expect(await leaderGauge(b.url)).to.deep.equal([0]);
    expect(opB.readiness()).to.equal(undefined);
  });

  it('the API server gone: both stay live but are not ready, naming what does not follow; back, both ready again', async () => {
    const urls = operators.map((o) => o.metricsUrl!);
    expect(urls).to.have.length(2);
    await tc.cluster.stop();
    for (const url of urls) {
      const down = await eventually(async () => {
        const p = await probe(url);
        return p.ready.status === 503 ? p : undefined;
      }, 30_000);
      expect(down.live, url).to.deep.equal(OK);
      expect((down.ready.body as { error: string }).error, url).to.match(/^Informers not following the API server: (mediajobs|jobs|pods|mediabatches)/);
    }
    // The leader's Lease loop turns on, failing, until its renew deadline passes and it steps down: no
    // replica leads (what MediaJobsNoOperatorLeader watches), and every one is still live (a failing call is a turn).
    await eventually(() => operators.every((o) => !o.isLeader()), 20_000);
    for (const url of urls) {
      expect(await leaderGauge(url), url).to.deep.equal([0]);
      expect((await probe(url)).live, url).to.deep.equal(OK);
    }

    restarted = await LocalCluster.start({
      port: clusterPort, stateDir: join(dir, 'state'), kubeconfigPath: tc.cluster.kubeconfigPath, workDir: join(dir, 'work'), logger: log,
    });
    for (const url of urls) {
      await eventually(async () => (await probe(url)).ready.status === 200, 60_000);
      expect(await probe(url), url).to.deep.equal({ live: OK, ready: READY });
    }
    await eventually(async () => (await Promise.all(urls.map(leaderGauge))).flat().sort().join() === '0,1', 20_000);
  });
});
