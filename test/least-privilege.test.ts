// Least privilege, proven (issue 35, item 5): the operator, the gateway's
// saved-destination vault and the runners run against the local cluster
// (which enforces RBAC) as their own ServiceAccounts, bound by deploy/'s own
// Roles (scripts/deploy-rbac.ts), through a representative run: manifest jobs
// to completion and to failure, a cancel, a batch, TTL cleanup of finished
// MediaJobs, leader election, Events, the statuses of a MediaPlatform and a
// ProxyPool, and the vault's create, replace, read and delete. Every request is recorded per user (requestCountsByUser) and
// compared with the rules that bind the user: a verb the rules grant and the
// run never used, or a request the rules refused, fails the test with the
// list. deploy/ and the chart hold the same rules (test/deploy/kustomize.test.ts).
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { parseAllDocuments } from 'yaml';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { PlatformDirectory } from '@mediajobs/lib/platforms/directory';
import { KubeSecretVault } from '../api-gateway/src/destinations/vault.js';
import { loadOperatorConfig } from '../operator/src/config.js';
import { startOperator, type OperatorHandle } from '../operator/src/operator.js';
import { TestLocalStorage } from '../operator/test/support/local-storage.js';
import { GATEWAY_ACCOUNT, OPERATOR_ACCOUNT, applyDeployRbac } from '../scripts/deploy-rbac.js';
import { eventually, startTestCluster, type TestCluster } from '../local-cluster/test/support.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from './support/postgres.js';
import { tsxCommand } from './support/tsx.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RUNNER = join(ROOT, 'operator/test/support/scripted-runner.ts');
const RUNNER_IMAGE = 'mediajobs/runner:scripted';
const NS = 'mediajobs';
const DESTINATIONS = 'mediajobs-destinations';
const user = (account: string) => `system:serviceaccount:${NS}:${account}`;

interface Rule { apiGroups?: string[]; resources?: string[]; verbs?: string[]; resourceNames?: string[] }

/**
 * What deploy/base/rbac.yaml grants a component's account (its Roles and ClusterRoles), as "verb
 * plural.group[/subresource]", named as requestCountsByUser() names requests.
 */
function granted(account: string): Set<string> {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'deploy/base/rbac.yaml'), 'utf8')).map((d) => d.toJSON() as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any
  const roles = docs.filter((d) => (d.kind === 'RoleBinding' || d.kind === 'ClusterRoleBinding') && d.subjects.some((s: { name: string }) => s.name === account))
    .map((b) => `${b.roleRef.kind as string}/${b.roleRef.name as string}`);
  const out = new Set<string>();
  for (const role of docs.filter((d) => roles.includes(`${d.kind as string}/${d.metadata.name as string}`))) {
    for (const rule of role.rules as Rule[]) {
      for (const group of rule.apiGroups ?? []) for (const resource of rule.resources ?? []) for (const verb of rule.verbs ?? []) {
        const [plural, sub] = resource.split('/');
        out.add(`${verb} ${plural}${group ? `.${group}` : ''}${sub ? `/${sub}` : ''}`);
      }
    }
  }
  return out;
}

/**
 * Granted for what the API server checks on the caller's behalf rather than
 * for a request: OwnerReferencesPermissionEnforcement asks for update on the
 * owner's finalizers when a child sets blockOwnerDeletion, and RBAC's
 * escalation check asks the operator to hold get on mediajobs/status before
 * it creates a runner's Role that grants it (docs/adr/0021).
 */
const CHECKED_NOT_CALLED = new Set([
  'update mediajobs.mediajobs.io/finalizers', 'update mediabatches.mediajobs.io/finalizers', 'get mediajobs.mediajobs.io/status',
]);

/**
 * Called by the operator on paths this run does not take, each named: a
 * child found under its name is read back to check who controls it
 * (children.ts ensureOwned, readExisting); the gateway's batches are
 * created from Postgres by the materializer and unpaused when started (this
 * run's batch is a manifest); an Event that recurs is patched (events.ts).
 */
const OTHER_PATHS = new Set([
  'get jobs.batch', 'get serviceaccounts', 'get roles.rbac.authorization.k8s.io', 'get rolebindings.rbac.authorization.k8s.io',
  'create mediabatches.mediajobs.io', 'patch mediabatches.mediajobs.io', 'patch events',
]);

function used(counts: Record<string, number> | undefined): Set<string> {
  return new Set(Object.keys(counts ?? {}).filter((k) => k !== 'get nonresource'));
}

describe('least privilege: each component\'s requests against deploy/\'s rules', function () {
  this.timeout(180_000);
  let tc: TestCluster;
  let db: TestDatabase;
  let operator: OperatorHandle | undefined;
  let storage: TestLocalStorage | undefined;
  let apiKeyId: string;
  const home = mkdtempSync(join(tmpdir(), 'least-privilege-'));
  const log = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

  const mediaJob = (name: string, url: string, extra: Record<string, unknown> = {}) => JSON.stringify({
    apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name, namespace: NS },
    spec: { url, owner: { apiKeyId }, ttlSecondsAfterFinished: 1, ...extra },
  });
  const statusOf = async (kind: string, name: string) =>
    (await tc.kubectl(['get', kind, name, '-n', NS, '-o', 'jsonpath={.status.status}'], { allowFail: true })).stdout;
  const gone = async (kind: string, name: string) =>
    (await tc.kubectl(['get', kind, name, '-n', NS, '-o', 'name'], { allowFail: true })).code !== 0;

  before(async () => {
    tc = await startTestCluster({ imageCommands: { [RUNNER_IMAGE]: tsxCommand(RUNNER) } });
    await tc.kubectl(['apply', ...['mediajob', 'mediabatch', 'mediaplatform', 'proxypool'].flatMap((c) => ['-f', join(ROOT, `crds/${c}.yaml`)])]);
    await tc.kubectl(['create', 'namespace', NS]);
    await tc.kubectl(['create', 'namespace', DESTINATIONS]);
    applyDeployRbac(tc.cluster, { namespace: NS, destinationsNamespace: DESTINATIONS });
    db = await createTestDatabase();
    apiKeyId = await insertApiKey(db.pool);
    tc.cluster.resetRequestCounts();
  });

  after(async () => {
    await operator?.stop();
    await db?.drop();
    await tc?.stop();
    rmSync(home, { recursive: true, force: true });
    storage?.remove();
  });

  it('a representative run uses every verb each Role grants, and nothing it does not', async () => {
    const operatorKubeconfig = tc.cluster.writeServiceAccountKubeconfig(join(home, 'operator.kubeconfig'), NS, OPERATOR_ACCOUNT);
    const gatewayKubeconfig = tc.cluster.writeServiceAccountKubeconfig(join(home, 'gateway.kubeconfig'), NS, GATEWAY_ACCOUNT);
    storage = new TestLocalStorage('mj-least-privilege-');
    operator = await startOperator(loadOperatorConfig({
      DATABASE_URL: db.url, KUBECONFIG: operatorKubeconfig, MEDIAJOBS_NAMESPACE: NS, DESTINATIONS_NAMESPACE: DESTINATIONS,
      SECRET_KEYS: SecretBox.generateSpec('lp'), ...storage.settings, RUNNER_IMAGE,
      LEASE_DURATION_SECONDS: '2', LEASE_RENEW_SECONDS: '1', FINISHED_MEDIAJOB_TTL_SECONDS: '2',
      MATERIALIZE_SAFETY_SECONDS: '1', OUTBOUND_ALLOWED_CIDRS: '127.0.0.0/8,::1/128',
    }), { log, storage: storage.access });

    // An admin's platform policy, for hosts this run does not fetch: the operator writes both statuses.
    await tc.kubectl(['apply', '-f', '-'], {
      input: [
        { apiVersion: 'mediajobs.io/v1alpha1', kind: 'ProxyPool', metadata: { name: 'pool' }, spec: { proxies: [{ id: 'p1', url: 'http://proxy-1.example:3128' }] } },
        { apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name: 'platform' }, spec: { match: { hosts: ['www.video.example'] }, maxRunning: 2, proxyPool: 'pool' } },
      ].map((o) => JSON.stringify(o)).join('\n'),
    });
    await eventually(async () => (await tc.kubectl(['get', 'proxypool', 'pool', '-o', 'jsonpath={.status.total}'])).stdout === '1', 30_000);
    await eventually(async () => (await tc.kubectl(['get', 'mediaplatform', 'platform', '-o', 'jsonpath={.status.conditions[0].type}'])).stdout !== '', 30_000);

    // Jobs to completion and to failure, a cancel, a batch: as kubectl or a GitOps pipeline applies them.
    await tc.kubectl(['apply', '-f', '-'], {
      input: [
        mediaJob('done', 'http://scripted.invalid/complete'),
        mediaJob('failed', 'http://scripted.invalid/fail'),
        mediaJob('cancelled', 'http://scripted.invalid/complete?sleepMs=120000'),
      ].join('\n'),
    });
    await tc.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaBatch', metadata: { name: 'show', namespace: NS },
        spec: {
          kind: 'show', showUrl: 'http://scripted.invalid/show', owner: { apiKeyId },
          episodes: [{ url: 'http://scripted.invalid/complete', title: 'One' }, { url: 'http://scripted.invalid/complete', title: 'Two' }],
        },
      }),
    });
    await eventually(async () => (await statusOf('mediajob', 'cancelled')) === 'Processing', 60_000);
    await tc.kubectl(['patch', 'mediajob', 'cancelled', '-n', NS, '--type=merge', '-p', '{"spec":{"cancel":true}}']);
    // Finished MediaJobs are deleted after their TTL, their runners' objects with them.
    for (const name of ['done', 'failed', 'cancelled']) await eventually(() => gone('mediajob', name), 90_000);
    await eventually(async () => ['completed', 'finished'].includes(await statusOf('mediabatch', 'show')), 90_000);

    // The gateway's whole use of the API: saved destinations in their own namespace.
    const vault = KubeSecretVault.fromKubeconfig(gatewayKubeconfig, DESTINATIONS);
    const owner = { kind: 'api_key' as const, id: apiKeyId };
    const name = await vault.put(owner, 's3', { accessKeyId: 'a', secretAccessKey: 'first' });
    await vault.put(owner, 's3', { accessKeyId: 'a', secretAccessKey: 'second' });
    expect(await vault.read(name)).to.deep.include({ secretAccessKey: 'second' });
    await vault.remove(owner, 's3');
    // ...and the MediaPlatforms it refuses disabled platforms' jobs from.
    const platforms = PlatformDirectory.fromKubeconfig(gatewayKubeconfig, log, 60_000);
    await platforms.start();
    platforms.stop();
    expect(platforms.disabledFor('https://www.video.example/watch?v=1'), 'the list was read').to.equal(false);

    const byUser = tc.cluster.requestCountsByUser();
    const refused = tc.cluster.refusedRequestsByUser();
    const report: string[] = [];
    for (const account of [OPERATOR_ACCOUNT, GATEWAY_ACCOUNT]) {
      const calls = used(byUser[user(account)]);
      const rules = granted(account);
      const unused = [...rules].filter((r) => !calls.has(r) && !CHECKED_NOT_CALLED.has(r) && !OTHER_PATHS.has(r)).sort();
      const denied = Object.keys(refused[user(account)] ?? {}).sort();
      if (unused.length) report.push(`${account}: granted, never used: ${unused.join(', ')}`);
      if (denied.length) report.push(`${account}: used, never granted (refused): ${denied.join(', ')}`);
    }
    // Runners: each its own account, whose Role (operator/src/job-builder.ts) grants get and patch of its MediaJob's status.
    const runners = Object.keys(byUser).filter((u) => u.startsWith(`system:serviceaccount:${NS}:`) && u.endsWith('-runner'));
    expect(runners.length, 'runner accounts that made requests').to.be.at.least(4);
    for (const runner of runners) {
      const extra = [...used(byUser[runner])].filter((r) => r !== 'patch mediajobs.mediajobs.io/status');
      if (extra.length) report.push(`${runner}: beyond its status patch: ${extra.join(', ')}`);
      const denied = Object.keys(refused[runner] ?? {});
      if (denied.length) report.push(`${runner}: refused: ${denied.join(', ')}`);
    }
    expect(report, JSON.stringify({ byUser, refused }, null, 1)).to.deep.equal([]);
  });
});
