// The operator beyond its own namespace (WATCH_NAMESPACES), on the local
// cluster with real Postgres and kubectl: manifests run next to their
// MediaJob, for the API key an admin bound their namespace to and no other;
// a namespace bound to none, or one not watched, runs nothing; and a
// manifest cannot take over another job's record by naming its id.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { GROUP, MEDIABATCH_PLURAL, MEDIAJOB_PLURAL, VERSION, type MediaBatch, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { startTestCluster, eventually, type TestCluster } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../../test/support/tsx.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { loadOperatorConfig } from '../src/config.js';
import { NAMESPACE_OWNER_ANNOTATION } from '../src/namespace-owners.js';
import { startOperator, type OperatorHandle } from '../src/operator.js';
import { TestLocalStorage } from './support/local-storage.js';

const RUNNER = fileURLToPath(new URL('./support/scripted-runner.ts', import.meta.url));
const CRDS = ['mediajob.yaml', 'mediabatch.yaml'].map((f) => fileURLToPath(new URL(`../../crds/${f}`, import.meta.url)));

describe('operator: every namespace, and who a manifest acts for', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let custom: k8s.CustomObjectsApi;
  let batch: k8s.BatchV1Api;
  let core: k8s.CoreV1Api;
  let teamKey: string;
  let otherKey: string;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage;
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const start = (env: Record<string, string>) => startOperator(loadOperatorConfig({
    DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('t1'), ...storage.settings,
    RUNNER_IMAGE: 'mediajobs/runner:scripted', LEADER_ELECTION: 'false', MATERIALIZE_SAFETY_SECONDS: '1',
    OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8', ...env,
  }), { log, storage: storage.access });

  /** A namespace as an admin makes it: bound to an API key, or not. */
  const namespace = (name: string, boundTo?: string) => tc.kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'v1', kind: 'Namespace',
      metadata: { name, ...(boundTo && { annotations: { [NAMESPACE_OWNER_ANNOTATION]: boundTo } }) },
    }),
  });
  /** A manifest as a team applies it: no owner unless it names one. */
  const apply = (ns: string, name: string, spec: Record<string, unknown> = {}) => tc.kubectl(['apply', '-n', ns, '-f', '-'], {
    input: JSON.stringify({ apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name }, spec: { url: 'http://scripted.invalid/complete?sleepMs=100', ...spec } }),
  });
  const get = async (ns: string, name: string) =>
    (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: MEDIAJOB_PLURAL, name })) as MediaJob;
  const settled = (ns: string, name: string) => eventually(async () => {
    const mj = await get(ns, name);
    return ['Completed', 'Failed'].includes(mj.status?.status ?? '') ? mj : undefined;
  }, 60_000);
  const rowsFor = async (ns: string, name: string) =>
    (await db.pool.query('SELECT id, api_key_id, status FROM jobs WHERE cr_namespace = $1 AND cr_name = $2', [ns, name])).rows as { id: string; api_key_id: string; status: string }[];
  const runnerJobs = async (ns: string) => (await batch.listNamespacedJob({ namespace: ns })).items;

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    for (const crd of CRDS) await tc.kubectl(['apply', '-f', crd]);
    db = await createTestDatabase();
    storage = new TestLocalStorage();
    teamKey = await insertApiKey(db.pool);
    otherKey = await insertApiKey(db.pool);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    batch = kc.makeApiClient(k8s.BatchV1Api);
    core = kc.makeApiClient(k8s.CoreV1Api);
    await namespace('team-a', teamKey);
    await namespace('team-b');
    await namespace('team-c', teamKey);
    await namespace('team-d', teamKey);
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

  it('runs a manifest in a watched namespace next to it, for the key the namespace is bound to', async () => {
    operator = await start({ WATCH_NAMESPACES: 'team-a,team-b' });
    // Applied first, in a namespace not watched: it must still be untouched when the rest have settled.
    await apply('team-c', 'unwatched');
    await apply('team-a', 'episode');
    await apply('team-a', 'named-same', { owner: { apiKeyId: teamKey } });
    await apply('team-a', 'named-other', { owner: { apiKeyId: otherKey } });
    await apply('team-b', 'unbound', { owner: { apiKeyId: teamKey } });

    const done = await settled('team-a', 'episode');
    expect(done.status).to.include({ status: 'Completed' });
    expect(await rowsFor('team-a', 'episode')).to.deep.include({ id: done.metadata.uid, api_key_id: teamKey, status: 'Completed' });
    // Its runner, its identity and its credentials live in its own namespace.
    const job = (await runnerJobs('team-a')).find((j) => j.metadata?.labels?.['mediajobs.io/mediajob'] === 'episode');
    expect(job, 'runner Job in team-a').to.not.equal(undefined);
    await core.readNamespacedServiceAccount({ name: job!.spec!.template.spec!.serviceAccountName!, namespace: 'team-a' });
    expect((await settled('team-a', 'named-same')).status).to.include({ status: 'Completed' });

    const other = await settled('team-a', 'named-other');
    expect(other.status).to.include({ status: 'Failed', reason: 'owner_not_allowed' });
    const unbound = await settled('team-b', 'unbound');
    expect(unbound.status).to.include({ status: 'Failed', reason: 'namespace_not_bound' });
    expect(unbound.status!.error).to.contain(NAMESPACE_OWNER_ANNOTATION);
    // Refused before anything: no record for the key they named, no runner.
    expect(await rowsFor('team-a', 'named-other')).to.deep.equal([]);
    expect(await rowsFor('team-b', 'unbound')).to.deep.equal([]);
    expect((await runnerJobs('team-a')).map((j) => j.metadata?.labels?.['mediajobs.io/mediajob'])).to.not.include('named-other');
    expect(await runnerJobs('team-b')).to.deep.equal([]);

    expect((await get('team-c', 'unwatched')).status).to.equal(undefined);
    expect(await runnerJobs('team-c')).to.deep.equal([]);
  });

  it('watches every namespace with WATCH_NAMESPACES=*, MediaBatches included', async () => {
    operator = await start({ WATCH_NAMESPACES: '*' });
    await apply('team-d', 'anywhere');
    const mb: MediaBatch = {
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaBatch', metadata: { name: 'listed', namespace: 'team-d' },
      spec: { showUrl: 'http://scripted.invalid/show', kind: 'playlist', paused: false, episodes: [{ url: 'http://scripted.invalid/complete' }] },
    } as MediaBatch;
    await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'team-d', plural: MEDIABATCH_PLURAL, body: mb });
    expect((await settled('team-d', 'anywhere')).status).to.include({ status: 'Completed' });
    const recorded = await eventually(async () => {
      const r = await db.pool.query('SELECT api_key_id FROM batches WHERE cr_namespace = $1 AND cr_name = $2', ['team-d', 'listed']);
      return r.rows[0] as { api_key_id: string } | undefined;
    });
    expect(recorded.api_key_id).to.equal(teamKey);
    // Its episode is a MediaJob in the batch's namespace, for the same key.
    const episodes = await eventually(async () => {
      const r = await db.pool.query('SELECT j.api_key_id, j.cr_namespace FROM jobs j JOIN batches b ON j.batch_id = b.id WHERE b.cr_name = $1', ['listed']);
      return r.rows.length ? r.rows : undefined;
    });
    expect(episodes).to.deep.equal([{ api_key_id: teamKey, cr_namespace: 'team-d' }]);
  });

  it('a pipeline syncing with server-side apply, again and again: one run, no conflict with the operator\'s writes', async () => {
    operator = await start({ WATCH_NAMESPACES: 'team-a' });
    // What Argo CD (ServerSideApply=true) and Flux send: an apply under their own field manager. Not forced, so a
    // field the operator had taken would fail the sync with a conflict.
    const manifest = JSON.stringify({
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name: 'synced', namespace: 'team-a' },
      spec: { url: 'http://scripted.invalid/complete?sleepMs=1500' },
    });
    const sync = () => tc.kubectl(['apply', '--server-side', '--field-manager=argocd-controller', '-f', '-'], { input: manifest });
    expect((await sync()).stdout).to.include('mediajob.mediajobs.io/synced serverside-applied');
    // Syncs while it runs, and after it finished.
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 300));
      await sync();
    }
    const done = await settled('team-a', 'synced');
    expect(done.status).to.include({ status: 'Completed' });
    const pipelineEntry = (mj: MediaJob) => ((mj.metadata as k8s.V1ObjectMeta).managedFields ?? []).find((m) => m.manager === 'argocd-controller');
    const beforeSync = await get('team-a', 'synced');
    await sync();
    const after = await get('team-a', 'synced');
    // The operator may still write its own status; the sync itself changes nothing: no new generation, and the
    // pipeline's entry keeps the time of its last real change (a no-op apply does not touch it).
    expect(after.metadata.generation, 'no new generation').to.equal(beforeSync.metadata.generation);
    expect(pipelineEntry(after), 'the pipeline\'s managedFields entry unchanged').to.deep.equal(pipelineEntry(beforeSync));
    expect((await runnerJobs('team-a')).filter((j) => j.metadata?.labels?.['mediajobs.io/mediajob'] === 'synced')).to.have.length(1);
    expect(await rowsFor('team-a', 'synced')).to.have.length(1);
    // The pipeline owns the spec; the operator's status and finalizer are its own, so neither takes the other's fields.
    const fields = (after.metadata as k8s.V1ObjectMeta).managedFields ?? [];
    const managers = fields.map((m) => [m.manager, m.operation, m.subresource ?? '']);
    expect(managers).to.deep.include(['argocd-controller', 'Apply', '']);
    expect(managers.filter(([, , sub]) => sub === 'status').length, 'status written by the operator').to.be.greaterThan(0);
    const pipeline = fields.find((m) => m.manager === 'argocd-controller')!;
    expect(Object.keys((pipeline.fieldsV1 as Record<string, object>)['f:spec'] ?? {})).to.include('f:url');
    expect(JSON.stringify(pipeline.fieldsV1)).to.not.include('f:status');
  });

  it('refuses a manifest whose spec.jobId names another MediaJob\'s record, and leaves that record alone', async () => {
    operator = await start({ WATCH_NAMESPACES: 'team-a' });
    await apply('team-a', 'original');
    const original = await settled('team-a', 'original');
    const before = await db.pool.query('SELECT status, updated_at, api_key_id FROM jobs WHERE id = $1', [original.metadata.uid]);
    await apply('team-a', 'impostor', { jobId: original.metadata.uid, url: 'http://scripted.invalid/fail' });
    const impostor = await settled('team-a', 'impostor');
    expect(impostor.status).to.include({ status: 'Failed', reason: 'job_id_taken' });
    const after = await db.pool.query('SELECT status, updated_at, api_key_id FROM jobs WHERE id = $1', [original.metadata.uid]);
    expect(after.rows).to.deep.equal(before.rows);
    expect((await runnerJobs('team-a')).map((j) => j.metadata?.labels?.['mediajobs.io/mediajob'])).to.not.include('impostor');
    // A fresh id is no one's: the same manifest with its own id runs.
    await apply('team-a', 'own-id', { jobId: randomUUID() });
    expect((await settled('team-a', 'own-id')).status).to.include({ status: 'Completed' });
  });
});
