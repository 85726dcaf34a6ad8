// Fair admission through the operator on the local cluster, with real
// Postgres: freed runner slots alternate between the keys with jobs waiting
// (one key queueing first does not go first for all of its jobs), and a job
// whose key or organization is at its cap waits Pending with that reason on
// the MediaJob and in the jobs row, while other keys' jobs take the free
// slots; the reason goes once it runs.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { ORGANIZATION_LABEL } from '@mediajobs/lib/mediajob/build';
import { loadOperatorConfig } from '../src/config.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { TestLocalStorage } from './support/local-storage.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const OPTIONS: Omit<MediaJobOptions, 'url'> = {
  format: 'mp4', videoCodec: 'copy', audioBitrate: '192k', videoQuality: 23, maxResolution: 'best', audioOnly: false,
  downloadSubtitles: false, downloadThumbnail: false, liveRecording: false, liveFromStart: false, waitForVideo: false, enableProgressWebhook: false,
};
const RUNNER_JOBS = 'app.kubernetes.io/managed-by=mediajobs-operator';

describe('fair admission on the local cluster', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let kc: k8s.KubeConfig;
  let keyA: string;
  let keyB: string;
  let keyC: string;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;
  const secretKeys = SecretBox.generateSpec('t1');
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const start = (env: Record<string, string>) => startOperator(loadOperatorConfig({
    DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: secretKeys, ...storage.settings,
    RUNNER_IMAGE: 'mediajobs/runner:scripted', LEADER_ELECTION: 'false', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8',
    // No periodic re-check: every admission must come from a finishing job handing its slot on.
    ADMISSION_RECHECK_SECONDS: '3600', ...env,
  }), { log, storage: storage.access });

  const create = (name: string, apiKeyId: string, sleepMs: number, organization?: string) => custom.createNamespacedCustomObject({
    group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL,
    body: {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob',
      metadata: { name, namespace: 'default', ...(organization && { labels: { [ORGANIZATION_LABEL]: organization } }) },
      spec: { ...OPTIONS, url: `http://scripted.invalid/complete?sleepMs=${sleepMs}`, owner: { apiKeyId }, destination: { type: 'managed' } },
    } satisfies MediaJob,
  });
  const get = async (name: string) => (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const statusOf = async (name: string) => (await get(name)).status?.status;
  const row = async (name: string) => (await db.pool.query<{ status: string; step: string; reason: string | null }>(
    'SELECT status, step, reason FROM jobs WHERE cr_name = $1', [name])).rows[0];
  const allCompleted = (names: string[]) => eventually(async () => (await Promise.all(names.map(statusOf))).every((s) => s === 'Completed'), 90_000, 100);

  /** The MediaJobs whose runner Jobs appear, in the order they were created (a watch: resourceVersion order). */
  async function watchAdmissions(prefix: string): Promise<{ admitted: string[]; stop: () => void }> {
    const admitted: string[] = [];
    const req = await new k8s.Watch(kc).watch('/apis/batch/v1/namespaces/default/jobs', { labelSelector: RUNNER_JOBS }, (type: string, job: k8s.V1Job) => {
      const name = job.metadata?.labels?.['mediajobs.io/mediajob'];
      if (type === 'ADDED' && name?.startsWith(prefix) && !admitted.includes(name)) admitted.push(name);
    }, () => undefined);
    return { admitted, stop: () => req.abort() };
  }

  /** The Admitted condition of a MediaJob, without its time. */
  const admittedCondition = async (name: string) => {
    const c = (await get(name)).status?.conditions?.find((x) => x.type === 'Admitted');
    return c && { status: c.status, reason: c.reason, message: c.message };
  };

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', '-f', fileURLToPath(new URL('../../crds/mediajob.yaml', import.meta.url)), '-f', fileURLToPath(new URL('../../crds/mediabatch.yaml', import.meta.url))]);
    db = await createTestDatabase();
    storage = new TestLocalStorage();
    [keyA, keyB, keyC] = [await insertApiKey(db.pool, 'a'), await insertApiKey(db.pool, 'b'), await insertApiKey(db.pool, 'c')];
    kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });

  afterEach(async () => {
    await operator?.stop();
    operator = undefined;
  });

  after(async () => {
    await db.drop();
    await tc.stop();
    storage?.remove();
  });

  it('hands freed slots to the two keys in turn, oldest first within each, though one key queued all its jobs first', async () => {
    operator = await start({ MAX_RUNNING_JOBS: '1' });
    const watch = await watchAdmissions('rr-');
    // Key A holds the only slot while both keys queue: A's three jobs first, then B's.
    await create('rr-a0', keyA, 4000);
    await eventually(async () => (await statusOf('rr-a0')) === 'Processing', 60_000);
    for (const n of ['rr-a1', 'rr-a2', 'rr-a3']) await create(n, keyA, 100);
    for (const n of ['rr-b1', 'rr-b2', 'rr-b3']) await create(n, keyB, 100);
    await eventually(async () => (await row('rr-b3'))?.status === 'Pending');
    expect(await statusOf('rr-a0')).to.equal('Processing');
    await allCompleted(['rr-a0', 'rr-a1', 'rr-a2', 'rr-a3', 'rr-b1', 'rr-b2', 'rr-b3']);
    watch.stop();
    // First in, first out would be a0 a1 a2 a3 b1 b2 b3; A was served last, so B's turn comes first.
    expect(watch.admitted).to.deep.equal(['rr-a0', 'rr-b1', 'rr-a1', 'rr-b2', 'rr-a2', 'rr-b3', 'rr-a3']);
  });

  it('keeps a key at MAX_RUNNING_PER_KEY waiting with that reason, on the MediaJob and in its row, while another key runs', async () => {
    operator = await start({ MAX_RUNNING_JOBS: '3', MAX_RUNNING_PER_KEY: '1' });
    await create('cap-a1', keyA, 3000);
    await eventually(async () => (await statusOf('cap-a1')) === 'Processing', 60_000);
    await create('cap-a2', keyA, 100);
    await create('cap-b1', keyB, 3000);

    const waiting = await eventually(async () => {
      const r = await row('cap-a2');
      return r?.reason ? r : undefined;
    });
    expect(waiting).to.deep.equal({ status: 'Pending', step: 'Queued', reason: 'key_running_limit' });
    const mj = await get('cap-a2');
    expect(mj.status).to.include({ status: 'Pending', step: 'Queued', reason: 'key_running_limit' });
    expect(await admittedCondition('cap-a2')).to.deep.equal({
      status: 'False', reason: 'KeyAtRunningLimit', message: 'Waiting: its API key runs as many jobs as it may at once (1)',
    });
    // A free slot is not held for the key at its cap: B's job takes it while A's first still runs.
    await eventually(async () => (await statusOf('cap-b1')) === 'Processing', 60_000);
    expect(await statusOf('cap-a1')).to.equal('Processing');
    expect(await statusOf('cap-a2')).to.equal('Pending');

    // A's first ends: its second runs, and the waiting reason is gone.
    await allCompleted(['cap-a1', 'cap-a2', 'cap-b1']);
    expect((await get('cap-a2')).status).to.not.have.property('reason');
    expect(await admittedCondition('cap-a2')).to.include({ status: 'True', reason: 'JobCreated' });
    expect(await row('cap-a2')).to.deep.equal({ status: 'Completed', step: 'Finished', reason: null });
  });

  it('counts the keys of one organization together under MAX_RUNNING_PER_ORG; a key without one is not held back', async () => {
    operator = await start({ MAX_RUNNING_JOBS: '3', MAX_RUNNING_PER_ORG: '1' });
    await create('org-a1', keyA, 3000, 'org-1');
    await eventually(async () => (await statusOf('org-a1')) === 'Processing', 60_000);
    await create('org-b1', keyB, 100, 'org-1');
    await create('org-c1', keyC, 100);

    const waiting = await eventually(async () => {
      const r = await row('org-b1');
      return r?.reason ? r : undefined;
    });
    expect(waiting).to.deep.equal({ status: 'Pending', step: 'Queued', reason: 'organization_running_limit' });
    expect(await admittedCondition('org-b1')).to.deep.equal({
      status: 'False', reason: 'OrganizationAtRunningLimit', message: 'Waiting: its organization\'s keys run as many jobs as they may at once (1)',
    });
    await eventually(async () => (await statusOf('org-c1')) === 'Completed', 60_000);
    expect(await statusOf('org-a1')).to.equal('Processing');
    expect(await statusOf('org-b1')).to.equal('Pending');
    await allCompleted(['org-a1', 'org-b1']);
    expect(await row('org-b1')).to.deep.equal({ status: 'Completed', step: 'Finished', reason: null });
  });
});
