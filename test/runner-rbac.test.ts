// A runner's token in the local cluster (issue 35, item 4): the identity the
// operator makes for each MediaJob (operator/src/job-builder.ts
// buildRunnerIdentity, docs/adr/0021) lets its pod patch its own MediaJob's
// status and nothing else, as kube-apiserver's RBAC authorizer decides it,
// with its 403 Status. Checked through a raw HTTP client, kubectl and
// client-node, with the token a runner pod is given.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { parse } from 'yaml';
import { buildRunnerIdentity, runnerIdentityName } from '../operator/src/job-builder.js';
import type { MediaJob } from '../lib/src/mediajob/types.js';
import { apiError, clusterFetch, kubeConfigFor, startTestCluster, type TestCluster } from '../local-cluster/test/support.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const NS = 'default';
const MJ = `/apis/mediajobs.io/v1alpha1/namespaces/${NS}/mediajobs`;
const SA_USER = (name: string) => `system:serviceaccount:${NS}:${name}`;

function forbiddenStatus(message: string, details: Record<string, unknown>) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: 'Forbidden', details, code: 403 };
}

describe('a runner\'s token in the local cluster: its own MediaJob\'s status, nothing else', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let mine: MediaJob;
  let runner: string;
  let token: string;
  const asRunner = (path: string, init: RequestInit = {}) => clusterFetch(tc.cluster, path, init, token);
  const mergePatch = (body: unknown): RequestInit => ({
    method: 'PATCH', headers: { 'Content-Type': 'application/merge-patch+json' }, body: JSON.stringify(body),
  });

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', join(ROOT, 'crds/mediajob.yaml')]);
    const example = readFileSync(join(ROOT, 'crds/examples/mediajob-minimal.yaml'), 'utf8');
    for (const name of ['mine', 'theirs']) {
      await tc.kubectl(['apply', '-f', '-'], { input: example.replace('name: minimal', `name: ${name}`) });
    }
    await tc.kubectl(['create', 'secret', 'generic', 'someone-elses-destination', '--from-literal=secretKey=s3cr3t']);
    mine = JSON.parse((await tc.kubectl(['get', 'mediajob', 'mine', '-o', 'json'])).stdout) as MediaJob;
    // Exactly what the operator creates before the runner's Job.
    const id = buildRunnerIdentity(mine);
    await tc.kubectl(['apply', '-f', '-'], { input: [id.serviceAccount, id.role, id.roleBinding].map((o) => JSON.stringify(o)).join('\n') });
    runner = runnerIdentityName(mine);
    token = tc.cluster.serviceAccountToken(NS, runner);
  });
  after(() => tc?.stop());

  describe('raw HTTP', () => {
    it('patches its own MediaJob\'s status, and reads it', async () => {
      const res = await asRunner(`${MJ}/mine/status`, mergePatch({ status: { step: 'Downloading', progress: 5 } }));
      expect(res.status, await res.clone().text()).to.equal(200);
      expect(((await res.json()) as { status: { progress: number } }).status.progress).to.equal(5);
      expect((await asRunner(`${MJ}/mine/status`)).status).to.equal(200);
    });

    it('cannot patch its own spec, with kube-apiserver\'s 403 Status', async () => {
      const res = await asRunner(`${MJ}/mine`, mergePatch({ spec: { url: 'https://elsewhere.example/x.mp4' } }));
      expect(res.status).to.equal(403);
      expect(await res.json()).to.deep.equal(forbiddenStatus(
        `mediajobs.mediajobs.io "mine" is forbidden: User "${SA_USER(runner)}" cannot patch resource "mediajobs" in API group "mediajobs.io" in the namespace "default"`,
        { name: 'mine', group: 'mediajobs.io', kind: 'mediajobs' },
      ));
      const spec = JSON.parse((await tc.kubectl(['get', 'mediajob', 'mine', '-o', 'json'])).stdout) as MediaJob;
      expect(spec.spec.url).to.equal(mine.spec.url);
    });

    it('cannot patch another MediaJob\'s status, which stays as it was', async () => {
      const res = await asRunner(`${MJ}/theirs/status`, mergePatch({ status: { storedFiles: { 'someone/else.mp4': 1 } } }));
      expect(res.status).to.equal(403);
      expect(await res.json()).to.deep.equal(forbiddenStatus(
        `mediajobs.mediajobs.io "theirs" is forbidden: User "${SA_USER(runner)}" cannot patch resource "mediajobs/status" in API group "mediajobs.io" in the namespace "default"`,
        { name: 'theirs', group: 'mediajobs.io', kind: 'mediajobs' },
      ));
      const theirs = JSON.parse((await tc.kubectl(['get', 'mediajob', 'theirs', '-o', 'json'])).stdout) as MediaJob;
      expect(theirs.status?.storedFiles).to.equal(undefined);
    });

    it('cannot read a Secret, list MediaJobs or see a namespace', async () => {
      const secret = await asRunner(`/api/v1/namespaces/${NS}/secrets/someone-elses-destination`);
      expect(secret.status).to.equal(403);
      expect(await secret.json()).to.deep.equal(forbiddenStatus(
        `secrets "someone-elses-destination" is forbidden: User "${SA_USER(runner)}" cannot get resource "secrets" in API group "" in the namespace "default"`,
        { name: 'someone-elses-destination', kind: 'secrets' },
      ));
      const list = await asRunner(MJ);
      expect(((await list.json()) as { message: string }).message).to.equal(
        `mediajobs.mediajobs.io is forbidden: User "${SA_USER(runner)}" cannot list resource "mediajobs" in API group "mediajobs.io" in the namespace "default"`);
      const namespaces = await asRunner('/api/v1/namespaces');
      expect(((await namespaces.json()) as { message: string }).message).to.equal(
        `namespaces is forbidden: User "${SA_USER(runner)}" cannot list resource "namespaces" in API group "" at the cluster scope`);
    });

    it('still discovers the API (system:discovery), but not /metrics', async () => {
      expect((await asRunner('/apis')).status).to.equal(200);
      expect((await asRunner('/api/v1')).status).to.equal(200);
      const metrics = await asRunner('/metrics');
      expect(metrics.status).to.equal(403);
      expect(await metrics.json()).to.deep.equal(forbiddenStatus(`forbidden: User "${SA_USER(runner)}" cannot get path "/metrics"`, {}));
    });
  });

  describe('kubectl, with the runner\'s token', () => {
    const kubectlAs = (args: string[]) => tc.kubectl([...args, `--token=${token}`], { allowFail: true });

    it('kubectl get secrets is refused with the server\'s words', async () => {
      const r = await kubectlAs(['get', 'secrets']);
      expect(r.code).to.not.equal(0);
      expect(r.stderr).to.contain(`Error from server (Forbidden): secrets is forbidden: User "${SA_USER(runner)}" cannot list resource "secrets" in API group "" in the namespace "default"`);
    });

    it('kubectl auth can-i answers from the same rules', async () => {
      const can = async (...args: string[]) => (await kubectlAs(['auth', 'can-i', ...args])).stdout.trim();
      expect(await can('patch', 'mediajobs.mediajobs.io/mine', '--subresource=status')).to.equal('yes');
      expect(await can('get', 'mediajobs.mediajobs.io/mine', '--subresource=status')).to.equal('yes');
      expect(await can('patch', 'mediajobs.mediajobs.io/theirs', '--subresource=status')).to.equal('no');
      expect(await can('patch', 'mediajobs.mediajobs.io/mine')).to.equal('no');
      expect(await can('get', 'secrets')).to.equal('no');
      expect(await can('create', 'pods')).to.equal('no');
      // The administrator's token stays all-powerful.
      expect((await tc.kubectl(['auth', 'can-i', '*', '*'])).stdout.trim()).to.equal('yes');
    });
  });

  describe('client-node, with the runner\'s token', () => {
    let api: k8s.CustomObjectsApi;
    let core: k8s.CoreV1Api;
    before(() => {
      const kc = kubeConfigFor(tc.cluster);
      kc.loadFromString(readFileSync(tc.cluster.kubeconfigPath, 'utf8').replace(tc.cluster.token, token));
      api = kc.makeApiClient(k8s.CustomObjectsApi);
      core = kc.makeApiClient(k8s.CoreV1Api);
    });
    const statusPatch = (name: string) => api.patchNamespacedCustomObjectStatus({
      group: 'mediajobs.io', version: 'v1alpha1', plural: 'mediajobs', namespace: NS, name, body: { status: { progress: 42 } },
    }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));

    it('patches its own status; another\'s status, a Secret and its own spec are 403', async () => {
      const patched = await statusPatch('mine') as { status: { progress: number } };
      expect(patched.status.progress).to.equal(42);
      expect((await apiError(statusPatch('theirs'))).code).to.equal(403);
      const secret = await apiError(core.readNamespacedSecret({ name: 'someone-elses-destination', namespace: NS }));
      expect(secret.code).to.equal(403);
      expect(secret.status.reason).to.equal('Forbidden');
      const spec = await apiError(api.patchNamespacedCustomObject({
        group: 'mediajobs.io', version: 'v1alpha1', plural: 'mediajobs', namespace: NS, name: 'mine', body: { spec: { url: 'https://x.example/y' } },
      }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch)));
      expect(spec.code).to.equal(403);
    });
  });

  it('a runner pod is given its own account\'s token, not the administrator\'s', async () => {
    const pod = {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'whoami', namespace: NS },
      spec: { restartPolicy: 'Never', serviceAccountName: runner, containers: [{ name: 'main', image: 'busybox', command: ['sh', '-c', 'cat "$KUBECONFIG"'] }] },
    };
    await tc.kubectl(['apply', '-f', '-'], { input: JSON.stringify(pod) });
    await tc.kubectl(['wait', '--for=jsonpath={.status.phase}=Succeeded', 'pod/whoami', '--timeout=20s']);
    const kubeconfig = parse((await tc.kubectl(['logs', 'whoami'])).stdout) as { users: { user: { token: string } }[] };
    expect(kubeconfig.users[0]!.user.token).to.equal(token);
    expect(kubeconfig.users[0]!.user.token).to.not.equal(tc.cluster.token);
  });
});
