// Server-side apply and managedFields: the ownership rules as
// structured-merge-diff's own tests state them (merge/leaf_test.go,
// merge/set_test.go, merge/update.go's prune rule), then the real clients:
// kubectl apply --server-side, client-node's KubernetesObjectApi.patch with
// the ServerSideApply strategy, and a MediaJob from the project's CRD.
import * as k8s from '@kubernetes/client-node';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { StatusError } from '../src/errors.js';
import { managerFromUserAgent } from '../src/http.js';
import { FieldSet, fromFieldsV1, pathString, toFieldsV1 } from '../src/ssa/fieldset.js';
import { apply, recordUpdate, type Writer } from '../src/ssa/managed-fields.js';
import type { TypeRef } from '../src/ssa/typed.js';
import type { KubeObject } from '../src/types.js';
import { apiError, clusterFetch, eventually, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

// ---- the rules, on a small schema ------------------------------------------------

const SCHEMA: TypeRef = {
  type: 'object',
  properties: {
    numeric: { type: 'integer' },
    string: { type: 'string' },
    bool: { type: 'boolean' },
    list: { type: 'array', items: { type: 'string' }, 'x-kubernetes-list-type': 'set' },
    atomicList: { type: 'array', items: { type: 'string' } },
    items: {
      type: 'array', 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'],
      items: { type: 'object', properties: { name: { type: 'string' }, value: { type: 'string' } } },
    },
    selector: { type: 'object', additionalProperties: { type: 'string' }, 'x-kubernetes-map-type': 'atomic' },
  },
};

type Op = ['apply' | 'force' | 'update', string, string];

/** Runs operations as one object's history; returns the object, each manager's fields, and the conflicts met. */
function run(ops: Op[]): { object: Record<string, unknown>; managed: Record<string, string[]>; conflicts: string[] } {
  let live: KubeObject | undefined;
  const conflicts: string[] = [];
  for (const [op, manager, yaml] of ops) {
    const config = { apiVersion: 'v1', kind: 'T', metadata: {}, ...(parseYaml(yaml) as object) } as KubeObject;
    const w: Writer = { manager, apiVersion: 'v1', statusSubresource: false };
    if (op === 'update') {
      config.metadata.managedFields = live?.metadata.managedFields;
      recordUpdate(live, config, config.metadata.managedFields, w, SCHEMA);
      live = config;
      continue;
    }
    try {
      live = apply(live, config, w, op === 'force', SCHEMA);
    } catch (e) {
      if (!(e instanceof StatusError)) throw e;
      conflicts.push(e.message);
    }
  }
  const { apiVersion: _a, kind: _k, metadata, ...object } = live!;
  const managed: Record<string, string[]> = {};
  for (const e of (metadata.managedFields ?? []) as { manager: string; fieldsV1: unknown }[]) {
    managed[e.manager] = fromFieldsV1(e.fieldsV1).paths().map(pathString);
  }
  return { object, managed, conflicts };
}

describe('server-side apply rules (structured-merge-diff)', () => {
  it('leaf apply_update_apply_no_conflict: a field another manager added stays theirs', () => {
    expect(run([
      ['apply', 'default', 'numeric: 1\nstring: string'],
      ['update', 'controller', 'numeric: 1\nstring: string\nbool: true'],
      ['apply', 'default', 'numeric: 2\nstring: string'],
    ])).to.deep.equal({
      object: { numeric: 2, string: 'string', bool: true },
      managed: { default: ['.numeric', '.string'], controller: ['.bool'] },
      conflicts: [],
    });
  });

  it('leaf apply_update_apply_with_conflict: changing an updater\'s field conflicts; force takes it', () => {
    const r = run([
      ['apply', 'default', 'numeric: 1\nstring: string'],
      ['update', 'controller', 'numeric: 1\nstring: controller string\nbool: true'],
      ['apply', 'default', 'numeric: 2\nstring: user string'],
      ['force', 'default', 'numeric: 2\nstring: user string'],
    ]);
    expect(r.conflicts).to.deep.equal(['Apply failed with 1 conflict: conflict with "controller" using v1: .string']);
    expect(r.object).to.deep.equal({ numeric: 2, string: 'user string', bool: true });
    expect(r.managed).to.deep.equal({ default: ['.numeric', '.string'], controller: ['.bool'] });
  });

  it('set apply_update_apply_no_overlap: items keep their places, each owned by who added it', () => {
    const r = run([
      ['apply', 'default', 'list: [a, c]'],
      ['update', 'controller', 'list: [a, b, c, d]'],
      ['apply', 'default', 'list: [a, aprime, c, cprime]'],
    ]);
    expect(r.object).to.deep.equal({ list: ['a', 'b', 'aprime', 'c', 'd', 'cprime'] });
    expect(r.managed).to.deep.equal({
      default: ['.list[="a"]', '.list[="aprime"]', '.list[="c"]', '.list[="cprime"]'],
      controller: ['.list[="b"]', '.list[="d"]'],
    });
  });

  it('set apply_update_apply_reorder: the applier\'s order wins and the reordering updater owns nothing', () => {
    const r = run([
      ['apply', 'default', 'list: [a, b, c, d]'],
      ['update', 'controller', 'list: [a, d, c, b]'],
      ['apply', 'default', 'list: [a, b, c, d]'],
    ]);
    expect(r.object).to.deep.equal({ list: ['a', 'b', 'c', 'd'] });
    expect(Object.keys(r.managed)).to.deep.equal(['default']);
  });

  it('set apply_twice_remove: items the applier drops are removed', () => {
    expect(run([['apply', 'default', 'list: [a, b, c, d]'], ['apply', 'default', 'list: [a, c]']]).object)
      .to.deep.equal({ list: ['a', 'c'] });
  });

  it('prune: a dropped field another applier also applied stays, owned by it alone', () => {
    const r = run([
      ['apply', 'a', 'numeric: 1\nstring: x'],
      ['apply', 'b', 'string: x'],
      ['apply', 'a', 'numeric: 1'],
    ]);
    expect(r.object).to.deep.equal({ numeric: 1, string: 'x' });
    expect(r.managed).to.deep.equal({ a: ['.numeric'], b: ['.string'] });
  });

  it('map lists merge by key: two appliers own one item each', () => {
    const r = run([
      ['apply', 'a', 'items: [{name: x, value: "1"}]'],
      ['apply', 'b', 'items: [{name: y, value: "2"}]'],
    ]);
    expect(r.object).to.deep.equal({ items: [{ name: 'x', value: '1' }, { name: 'y', value: '2' }] });
    expect(r.managed.b).to.deep.equal(['.items[name="y"]', '.items[name="y"].name', '.items[name="y"].value']);
  });

  it('atomic lists and maps are one field: a second applier with a different value conflicts on the whole', () => {
    const r = run([
      ['apply', 'a', 'atomicList: [x]\nselector: {app: web}'],
      ['apply', 'b', 'atomicList: [y]\nselector: {app: web, tier: db}'],
    ]);
    expect(r.conflicts).to.deep.equal(['Apply failed with 2 conflicts: conflicts with "a":\n- .atomicList\n- .selector']);
  });

  it('keeps at most ten Update entries: the oldest merge into "ancient-changes" (capmanagers.go)', () => {
    const ops: Op[] = [];
    for (let i = 0; i <= 10; i++) ops.push(['update', `m${String(i).padStart(2, '0')}`, Array.from({ length: i + 1 }, (_, j) => `f${j}: 1`).join('\n')]);
    const { managed } = run(ops);
    expect(Object.keys(managed).sort()).to.deep.equal(['ancient-changes', ...Array.from({ length: 9 }, (_, i) => `m${String(i + 2).padStart(2, '0')}`)]);
    expect(managed['ancient-changes']).to.deep.equal(['.f0', '.f1']);
  });

  it('encodes FieldsV1 with "." on an element that is itself owned and has children', () => {
    const set = FieldSet.fromPaths([['f:items', 'k:{"name":"x"}'], ['f:items', 'k:{"name":"x"}', 'f:value'], ['f:list', 'v:"a"']]);
    expect(toFieldsV1(set)).to.deep.equal({ 'f:items': { 'k:{"name":"x"}': { '.': {}, 'f:value': {} } }, 'f:list': { 'v:"a"': {} } });
    expect(fromFieldsV1(toFieldsV1(set)).paths()).to.deep.equal(set.paths());
  });
});

// ---- real clients ------------------------------------------------------------------

const CONFIGMAP = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: web}
data:
  a: "1"
  b: "2"
`;

const DEPLOYMENT = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
`;

const CONFLICT_HELP = 'Please review the fields above--they currently have other managers.';

describe('server-side apply with real clients', function () {
  this.timeout(60_000);
  let t: TestCluster;
  before(async () => {
    t = await startTestCluster();
  });
  after(async () => t?.stop());

  const getYaml = async (...args: string[]) =>
    parseYaml((await t.kubectl(['get', ...args, '-o', 'yaml', '--show-managed-fields'])).stdout) as KubeObject;

  it('kubectl apply --server-side creates the object, owned by "kubectl" with operation Apply', async () => {
    const r = await t.kubectl(['apply', '--server-side', '-f', '-'], { input: CONFIGMAP });
    expect(r.stdout).to.equal('configmap/settings serverside-applied\n');
    const cm = await getYaml('configmap', 'settings');
    expect(cm.metadata.managedFields).to.have.length(1);
    const [entry] = cm.metadata.managedFields as Record<string, unknown>[];
    expect(entry).to.include({ manager: 'kubectl', operation: 'Apply', apiVersion: 'v1', fieldsType: 'FieldsV1' });
    expect(entry!.time).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(entry!.fieldsV1).to.deep.equal({ 'f:data': { 'f:a': {}, 'f:b': {} }, 'f:metadata': { 'f:labels': { 'f:app': {} } } });
  });

  it('re-applying the same manifest writes nothing', async () => {
    const before = await getYaml('configmap', 'settings');
    await t.kubectl(['apply', '--server-side', '-f', '-'], { input: CONFIGMAP });
    expect((await getYaml('configmap', 'settings')).metadata.resourceVersion).to.equal(before.metadata.resourceVersion);
  });

  it('a field the applier drops is removed', async () => {
    await t.kubectl(['apply', '--server-side', '-f', '-'], { input: CONFIGMAP.replace('  b: "2"\n', '') });
    expect((await getYaml('configmap', 'settings')).data).to.deep.equal({ a: '1' });
  });

  it('another manager changing an applied field gets the conflict; --force-conflicts takes the field over', async () => {
    const changed = CONFIGMAP.replace('a: "1"', 'a: "9"').replace('  b: "2"\n', '');
    const r = await t.kubectl(['apply', '--server-side', '--field-manager', 'ops', '-f', '-'], { input: changed, allowFail: true });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.contain('error: Apply failed with 1 conflict: conflict with "kubectl": .data.a\n' + CONFLICT_HELP);

    await t.kubectl(['apply', '--server-side', '--field-manager', 'ops', '--force-conflicts', '-f', '-'], { input: changed });
    const cm = await getYaml('configmap', 'settings');
    expect(cm.data).to.deep.equal({ a: '9' });
    const owners = Object.fromEntries((cm.metadata.managedFields as { manager: string; fieldsV1: unknown }[]).map((e) => [e.manager, e.fieldsV1]));
    expect(owners).to.deep.equal({
      kubectl: { 'f:metadata': { 'f:labels': { 'f:app': {} } } },
      ops: { 'f:data': { 'f:a': {} }, 'f:metadata': { 'f:labels': { 'f:app': {} } } },
    });
  });

  it('moving from client-side apply: the conflict names "kubectl-client-side-apply" using apps/v1', async () => {
    await t.kubectl(['apply', '-f', '-'], { input: DEPLOYMENT });
    const scaled = DEPLOYMENT.replace('replicas: 2', 'replicas: 3');
    const r = await t.kubectl(['apply', '--server-side', '-f', '-'], { input: scaled, allowFail: true });
    expect(r.stderr).to.contain('error: Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas\n');
    await t.kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], { input: scaled });
    const dep = await getYaml('deployment', 'web');
    expect((dep.spec as { replicas: number }).replicas).to.equal(3);
    // kubectl folds the client-side manager into its own (csaupgrade); the server keeps the annotation current.
    const owners = (dep.metadata.managedFields as { manager: string; fieldsV1: { 'f:spec'?: Record<string, unknown> } }[]);
    expect(owners.map((e) => e.manager)).to.deep.equal(['kubectl-last-applied', 'kubectl']);
    expect(owners[1]!.fieldsV1['f:spec']).to.have.property('f:replicas');
    const lastApplied = JSON.parse(dep.metadata.annotations!['kubectl.kubernetes.io/last-applied-configuration']!) as { spec: { replicas: number } };
    expect(lastApplied.spec.replicas).to.equal(3);
  });

  it('kubectl edit-style writes are recorded as Update under their fieldManager, kubectl create under "kubectl-create"', async () => {
    await t.kubectl(['create', 'configmap', 'made', '--from-literal=k=v']);
    const cm = await getYaml('configmap', 'made');
    expect(cm.metadata.managedFields).to.deep.equal([{
      manager: 'kubectl-create', operation: 'Update', apiVersion: 'v1', time: (cm.metadata.managedFields as { time: string }[])[0]!.time,
      fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { '.': {}, 'f:k': {} } },
    }]);
  });

  it('a write without fieldManager is recorded under the User-Agent up to its first "/"', async () => {
    const res = await clusterFetch(t.cluster, `/api/v1/namespaces/default/configmaps`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'User-Agent': 'my-tool/1.0 (linux)' },
      body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'by-agent' }, data: { k: 'v' } }),
    });
    const made = (await res.json()) as KubeObject;
    expect((made.metadata.managedFields as { manager: string }[]).map((e) => e.manager)).to.deep.equal(['my-tool']);
    expect(managerFromUserAgent(undefined)).to.equal('');
    expect(managerFromUserAgent('x'.repeat(200))).to.equal('x'.repeat(128));
  });

  it('managedFields a client writes: an empty entry resets them, a malformed list is ignored', async () => {
    const patch = (body: unknown) => clusterFetch(t.cluster, `/api/v1/namespaces/default/configmaps/made?fieldManager=ops`, {
      method: 'PATCH', headers: { 'Content-Type': 'application/merge-patch+json' }, body: JSON.stringify(body),
    });
    const before = (await getYaml('configmap', 'made')).metadata.managedFields;
    expect((await patch({ metadata: { managedFields: [{ manager: 'x', operation: 'Bogus', fieldsType: 'FieldsV1', apiVersion: 'v1' }] } })).status).to.equal(200);
    expect((await getYaml('configmap', 'made')).metadata.managedFields).to.deep.equal(before);

    expect((await patch({ metadata: { managedFields: [{}] } })).status).to.equal(200);
    expect((await getYaml('configmap', 'made')).metadata).to.not.have.property('managedFields');
  });

  it('in-process controllers write under their real names: the Job\'s status by kube-controller-manager, its pod\'s by kubelet', async () => {
    await t.kubectl(['create', 'job', 'once', '--image=busybox', '--', 'true']);
    const managers = (o: KubeObject) => (o.metadata.managedFields as { manager: string; operation: string; subresource?: string }[])
      .map((e) => `${e.manager}/${e.operation}${e.subresource ? `/${e.subresource}` : ''}`);
    const job = await eventually(async () => {
      const j = await getYaml('job', 'once');
      return (j.status as { succeeded?: number } | undefined)?.succeeded === 1 ? j : undefined;
    });
    expect(managers(job)).to.have.members(['kubectl-create/Update', 'kube-controller-manager/Update/status']);
    const pod = parseYaml((await t.kubectl(['get', 'pods', '-l', 'job-name=once', '-o', 'yaml', '--show-managed-fields'])).stdout) as { items: KubeObject[] };
    // The binding (spec.nodeName) goes straight to storage on a real server: nobody owns it.
    expect(managers(pod.items[0]!)).to.have.members(['kube-controller-manager/Update', 'kubelet/Update/status']);
    // Pod containers are a map list keyed by name (PodSpec's x-kubernetes-list-map-keys).
    const created = (pod.items[0]!.metadata.managedFields as { manager: string; fieldsV1: { 'f:spec': { 'f:containers': object } } }[])
      .find((e) => e.manager === 'kube-controller-manager')!;
    expect(Object.keys(created.fieldsV1['f:spec']['f:containers'])).to.deep.equal(['.', 'k:{"name":"once"}']);
  });

  describe('client-node and a MediaJob', () => {
    let objects: k8s.KubernetesObjectApi;
    const mediaJob = (owner: string): k8s.KubernetesObject & { spec: unknown } => ({
      apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name: 'clip', namespace: 'default' },
      spec: { url: 'https://media.example.com/videos/intro.mp4', owner: { apiKeyId: owner } },
    });
    const OWNER = '2f1c6a52-8d4e-4b7a-9c1e-5d3b8a7f6e01';
    before(async () => {
      await t.kubectl(['apply', '-f', new URL('../../crds/mediajob.yaml', import.meta.url).pathname]);
      objects = k8s.KubernetesObjectApi.makeApiClient(kubeConfigFor(t.cluster));
    });

    it('applies (creating it), then answers another manager\'s change with 409 and the real Status body', async () => {
      const created = await objects.patch(mediaJob(OWNER), undefined, undefined, 'deployer', undefined, k8s.PatchStrategy.ServerSideApply);
      expect(created.metadata?.managedFields?.map((e) => [e.manager, e.operation])).to.deep.equal([['deployer', 'Apply']]);

      const other = '11111111-2222-4333-8444-555555555555';
      const { code, status } = await apiError(objects.patch(mediaJob(other), undefined, undefined, 'someone-else', undefined, k8s.PatchStrategy.ServerSideApply));
      expect(code).to.equal(409);
      expect(status).to.deep.include({
        status: 'Failure', reason: 'Conflict', code: 409,
        message: 'Apply failed with 1 conflict: conflict with "deployer": .spec.owner.apiKeyId',
        details: { causes: [{ reason: 'FieldManagerConflict', message: 'conflict with "deployer"', field: '.spec.owner.apiKeyId' }] },
      });

      const forced = await objects.patch(mediaJob(other), undefined, undefined, 'someone-else', true, k8s.PatchStrategy.ServerSideApply);
      expect((forced as { spec: { owner: { apiKeyId: string } } }).spec.owner.apiKeyId).to.equal(other);
    });

    it('status conditions are a map list keyed by type (CRD schema): two controllers each own their condition', async () => {
      const condition = (type: string) => ({ type, status: 'True', reason: 'Set', message: '', lastTransitionTime: '2026-11-26T00:00:00Z' });
      const applyStatus = (manager: string, type: string) => fetchApply(
        t, '/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs/clip/status', manager,
        { apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaJob', metadata: { name: 'clip' }, status: { conditions: [condition(type)] } },
      );
      expect((await applyStatus('admission', 'Admitted')).status).to.equal(200);
      const res = await applyStatus('runner', 'Running');
      const body = (await res.json()) as KubeObject;
      expect((body.status as { conditions: { type: string }[] }).conditions.map((c) => c.type)).to.deep.equal(['Admitted', 'Running']);
      const runner = (body.metadata.managedFields as { manager: string; subresource?: string; fieldsV1: Record<string, unknown> }[])
        .find((e) => e.manager === 'runner')!;
      expect(runner.subresource).to.equal('status');
      expect(Object.keys((runner.fieldsV1['f:status'] as Record<string, Record<string, unknown>>)['f:conditions']!)).to.deep.equal(['k:{"type":"Running"}']);
    });

    it('an apply creating the object answers 201, one updating it 200', async () => {
      const path = '/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs/fresh';
      const body = { ...mediaJob(OWNER), metadata: { name: 'fresh' } };
      expect((await fetchApply(t, path, 'deployer', body)).status).to.equal(201);
      expect((await fetchApply(t, path, 'deployer', body)).status).to.equal(200);
    });

    it('an apply without fieldManager is the 422 of PatchOptions validation', async () => {
      const res = await fetchApply(t, '/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs/clip', '', mediaJob(OWNER));
      expect(res.status).to.equal(422);
      expect(await res.json()).to.deep.include({
        message: 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
        reason: 'Invalid',
        details: { group: 'meta.k8s.io', kind: 'PatchOptions', causes: [{ reason: 'FieldValueRequired', message: 'Required value: is required for apply patch', field: 'fieldManager' }] },
      });
    });

    it('an apply in another version is 400; force on a merge patch is the 422 of PatchOptions validation', async () => {
      const res = await fetchApply(t, '/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs/clip', 'x', { ...mediaJob(OWNER), apiVersion: 'mediajobs.io/v1' });
      expect(res.status).to.equal(400);
      expect(((await res.json()) as { message: string }).message)
        .to.equal('Incorrect version specified in apply patch. Specified patch version: mediajobs.io/v1, expected: mediajobs.io/v1alpha1');
      const merge = await clusterFetch(t.cluster, `/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs/clip?force=true`, {
        method: 'PATCH', headers: { 'Content-Type': 'application/merge-patch+json' }, body: '{}',
      });
      expect(merge.status).to.equal(422);
      expect(((await merge.json()) as { message: string }).message)
        .to.equal('PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch');
    });

    it('an apply with a field the schema does not declare is the field manager\'s 500', async () => {
      const body = mediaJob(OWNER);
      (body.metadata as Record<string, unknown>).namespace = 'default';
      const res = await fetchApply(t, '/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs/clip', 'x', { ...body, spec: { ...(body.spec as object), colour: 'red' } });
      expect(res.status).to.equal(500);
      expect(await res.json()).to.deep.equal({
        kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', code: 500,
        message: 'failed to create typed patch object (default/clip; mediajobs.io/v1alpha1, Kind=MediaJob): .spec.colour: field not declared in schema',
      });
    });

    it('an apply that carries managedFields is refused', async () => {
      const res = await fetchApply(t, '/apis/mediajobs.io/v1alpha1/namespaces/default/mediajobs/clip', 'x', { ...mediaJob(OWNER), metadata: { name: 'clip', managedFields: [{}] } });
      expect(res.status).to.equal(400);
      expect(((await res.json()) as { message: string }).message).to.equal('metadata.managedFields must be nil');
    });
  });
});

function fetchApply(t: TestCluster, path: string, manager: string, body: unknown): Promise<Response> {
  const query = manager ? `?fieldManager=${encodeURIComponent(manager)}` : '';
  return clusterFetch(t.cluster, `${path}${query}`, {
    method: 'PATCH', headers: { 'Content-Type': 'application/apply-patch+yaml' }, body: JSON.stringify(body),
  });
}
