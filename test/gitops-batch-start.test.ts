// POST /batch/{id}/start on a MediaBatch a pipeline applied paused
// (issue 34 item 7; docs/gitops.md, "Starting a paused MediaBatch"): the
// manifest's field manager owns spec.paused, so the API does not start it
// behind the manifest's back: 409, saying what to do, and nothing moves.
// The manifest applied again with paused: false (the same field manager,
// server-side apply as Argo CD and Flux use it) starts every episode. On
// real parts: the local cluster, Postgres, the gateway, and the operator
// with its batch controller (the scripted runner for the episodes).
import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { pino } from 'pino';
import { insertBatch } from '@mediajobs/lib/db/batches';
import { GROUP, MEDIAJOB_PLURAL, VERSION, type MediaJob } from '@mediajobs/lib/mediajob/types';
import { newRegistry } from '@mediajobs/lib/metrics';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { loadGatewayConfig } from '../api-gateway/src/config.js';
import { createApiKey } from '../api-gateway/src/db/api-keys.js';
import { startGateway, type RunningGateway } from '../api-gateway/src/server.js';
import { eventually, startTestCluster, type TestCluster } from '../local-cluster/test/support.js';
import { loadOperatorConfig } from '../operator/src/config.js';
import { startOperator, type OperatorHandle } from '../operator/src/operator.js';
import { TestLocalStorage } from '../operator/test/support/local-storage.js';
import { createTestDatabase, type TestDatabase } from './support/postgres.js';
import { tsxCommand } from './support/tsx.js';

const RUNNER = fileURLToPath(new URL('../operator/test/support/scripted-runner.ts', import.meta.url));
const CRDS = fileURLToPath(new URL('../crds/', import.meta.url));
const PIPELINE = 'argocd-controller';

describe('POST /batch/{id}/start on a MediaBatch applied paused with kubectl', function () {
  this.timeout(120_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let gateway: RunningGateway;
  let operator: OperatorHandle;
  let storage: TestLocalStorage | undefined;
  let key: { key: string; id: string };
  let custom: k8s.CustomObjectsApi;
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });
  const registry = newRegistry();

  /** Passes of the batch controller finished so far (its work queue's work_duration_seconds count). */
  const batchPasses = async () => {
    const work = (await registry.getMetricsAsJSON()).find((m) => m.name === 'mediajobs_workqueue_work_duration_seconds');
    const count = (work?.values as { metricName?: string; labels: Record<string, unknown>; value: number }[] | undefined)?.find((v) => v.metricName === 'mediajobs_workqueue_work_duration_seconds_count' && v.labels.name === 'mediabatches');
    return count?.value ?? 0;
  };

  const api = async (method: string, path: string) => {
    const res = await fetch(`${gateway.url}${path}`, { method, headers: { 'x-api-key': key.key } });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) as Record<string, unknown> : {} };
  };
  const episodeJobs = async (batchName: string) => {
    const list = await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'default', plural: MEDIAJOB_PLURAL }) as { items: MediaJob[] };
    return list.items.filter((mj) => (mj.metadata as k8s.V1ObjectMeta).ownerReferences?.some((o) => o.kind === 'MediaBatch' && o.name === batchName));
  };
  /** The manifest as a pipeline applies it: server-side apply under its own field manager. */
  const applyManifest = (paused: boolean) => tc.kubectl(['apply', '--server-side', `--field-manager=${PIPELINE}`, '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaBatch', metadata: { name: 'weekly-show', namespace: 'default' },
      spec: {
        showUrl: 'https://podcasts.apple.com/us/podcast/weekly/id5000005', owner: { apiKeyId: key.id }, paused,
        episodes: [1, 2, 3].map((n) => ({ url: `http://scripted.invalid/complete?sleepMs=50&n=${n}`, title: `Episode ${n}` })),
      },
    }),
  });

  before(async () => {
    tc = await startTestCluster({ imageCommands: { 'mediajobs/runner:scripted': tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', '-f', CRDS]);
    db = await createTestDatabase();
    storage = new TestLocalStorage('mj-batch-start-');
    const env = {
      DATABASE_URL: db.url, KUBECONFIG: tc.cluster.kubeconfigPath, SECRET_KEYS: SecretBox.generateSpec('t1'),
      FILE_URL_SECRET: randomBytes(24).toString('hex'), MANAGED_STORAGE: 'local', ...storage.settings,
      HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'silent', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8',
      RUNNER_IMAGE: 'mediajobs/runner:scripted', LEADER_ELECTION: 'false', BATCH_STATUS_SECONDS: '1',
    };
    gateway = await startGateway(loadGatewayConfig(env), { logger: log });
    operator = await startOperator(loadOperatorConfig(env), {
      log, metricsRegistry: registry, storage: storage.access,
    });
    key = await createApiKey(db.pool, { name: 'gitops' });
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(tc.cluster.kubeconfigPath);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });

  after(async () => {
    await operator?.stop();
    await gateway?.close();
    await db?.drop();
    await tc?.stop();
    storage?.remove();
  });

  it('answers 409 saying to unpause the manifest, starts nothing; the manifest applied with paused: false starts every episode', async () => {
    await applyManifest(true);
    const uid = (await tc.kubectl(['get', 'mb', 'weekly-show', '-o', 'jsonpath={.metadata.uid}'])).stdout.trim();
    // Recorded for its owner, paused, and seen paused by the batch controller.
    await eventually(async () => (await api('GET', `/batch/${uid}`)).body.status === 'paused', 15_000, 100);
    await eventually(async () => (await tc.kubectl(['get', 'mb', 'weekly-show', '-o', 'jsonpath={.status.status}'])).stdout === 'paused', 15_000, 100);

    expect(await api('POST', `/batch/${uid}/start`)).to.deep.equal({
      status: 409,
      body: {
        error: 'Batch is paused by the spec of its MediaBatch default/weekly-show, applied with kubectl: '
          + 'set spec.paused to false in that manifest and apply it (in Git, for a GitOps pipeline)',
      },
    });
    // Nothing moved: the row is still paused, no episode MediaJob exists, and the spec is still the pipeline's alone.
    expect((await api('GET', `/batch/${uid}`)).body).to.include({ status: 'paused', completed_episodes: 0 });
    const mb = JSON.parse((await tc.kubectl(['get', 'mb', 'weekly-show', '-o', 'json', '--show-managed-fields'])).stdout) as {
      spec: { paused: boolean }; metadata: { managedFields: { manager: string; operation: string; subresource?: string }[] };
    };
    expect(mb.spec.paused).to.equal(true);
    expect(mb.metadata.managedFields.filter((m) => !m.subresource).map((m) => `${m.manager}/${m.operation}`)).to.deep.equal([`${PIPELINE}/Apply`]);
    // Two passes of the batch controller (one a second) after the answer still create nothing.
    const after = await batchPasses();
    await eventually(async () => (await batchPasses()) >= after + 2, 15_000, 100);
    expect(await episodeJobs('weekly-show')).to.have.length(0);

    // What the answer says to do: the manifest, unpaused, applied by its owner (no conflict: nobody else wrote the field).
    const applied = await applyManifest(false);
    expect(applied.stdout).to.include('mediabatch.mediajobs.io/weekly-show serverside-applied');
    const mjs = await eventually(async () => {
      const x = await episodeJobs('weekly-show');
      return x.length === 3 ? x : undefined;
    }, 20_000, 200);
    expect(mjs.map((mj) => mj.spec.batchId)).to.deep.equal([uid, uid, uid]);
    const done = await eventually(async () => {
      const b = (await api('GET', `/batch/${uid}`)).body;
      return b.status === 'completed' ? b : undefined;
    }, 60_000, 200);
    expect(done).to.include({ total_episodes: 3, completed_episodes: 3, failed_episodes: 0 });
    // Started once, by its spec: the API's start now finds it done.
    expect(await api('POST', `/batch/${uid}/start`)).to.deep.equal({ status: 400, body: { error: 'Batch is not paused (current status: completed)' } });
  });

  it('still starts a paused batch the API made (the row is its truth): 200, and its episodes run', async () => {
    // The gateway's batch, as POST /jobs records it for a show (its expansion is api-gateway/test/batches-api.test.ts's).
    const id = randomUUID();
    const eps = [1, 2].map((n) => ({ id: randomUUID(), url: `http://scripted.invalid/complete?sleepMs=50&api=${n}`, info: { title: `API ${n}` } }));
    expect(await insertBatch(db.pool, {
      id, apiKeyId: key.id, kind: 'show', showUrl: 'https://podcasts.apple.com/us/podcast/api/id5000006', folder: null, paused: true,
      webhookUrl: null, crNamespace: 'default', crName: id, options: {} as never, target: { kind: 'given', destination: { type: 'managed' } },
    }, eps)).to.include({ outcome: 'inserted' });
    await eventually(async () => (await tc.kubectl(['get', 'mb', id, '-o', 'jsonpath={.status.status}'])).stdout === 'paused', 15_000, 100);
    expect(await api('POST', `/batch/${id}/start`)).to.deep.equal({ status: 200, body: { batch_id: id, started_jobs: 2, status: 'processing' } });
    await eventually(async () => (await episodeJobs(id)).length === 2, 20_000, 200);
    await eventually(async () => (await api('GET', `/batch/${id}`)).body.status === 'completed', 60_000, 200);
  });
});
