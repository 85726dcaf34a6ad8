// @kubernetes/client-node 2.x against the emulator, used exactly as an
// operator uses it against a real cluster: informers over custom resources
// (surviving 410 Expired and dropped connections), CustomObjectsApi CRUD with
// both patch types and the status subresource, ApiException errors, Jobs run
// as local processes via BatchV1Api, pod logs, and Lease-based leader election
// including the MicroTime format a real apiserver insists on.
import * as k8s from '@kubernetes/client-node';
import { expect } from 'chai';
import type { KubeObject } from '../src/index.js';
import { EXAMPLE_CRD, apiError, eventually, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

const GROUP = 'media.example.com';
const VERSION = 'v1';
const PLURAL = 'mediajobs';

interface MediaJob extends k8s.KubernetesObject {
  spec?: { input?: string; preset?: string; retries?: number };
  status?: { phase?: string };
}

const mediaJob = (name: string, input: string, labels?: Record<string, string>): MediaJob => ({
  apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: { name, labels }, spec: { input },
});

async function createNamespace(core: k8s.CoreV1Api, name: string): Promise<void> {
  await core.createNamespace({ body: { metadata: { name } } });
}

describe('client-node against the local cluster', function () {
  let tc: TestCluster;
  let kc: k8s.KubeConfig;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;

  before(async () => {
    tc = await startTestCluster({ backoffBaseMs: 20 });
    kc = kubeConfigFor(tc.cluster);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
    const ext = kc.makeApiClient(k8s.ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({ body: k8s.loadYaml<k8s.V1CustomResourceDefinition>(EXAMPLE_CRD) });
    // What a client does against a real cluster: wait for Established before using the kind.
    await eventually(async () => {
      const crd = await ext.readCustomResourceDefinition({ name: `${PLURAL}.${GROUP}` });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });
  });

  after(async () => {
    await tc?.stop();
  });

  describe('informer over custom resources', () => {
    const ns = 'informer';
    const path = `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}`;
    let informer: k8s.Informer<MediaJob> & k8s.ObjectCache<MediaJob>;
    let stopped = false;
    let lists = 0;
    const events: { verb: 'add' | 'update' | 'delete'; name: string; rv: string }[] = [];
    const errors: unknown[] = [];
    const seen = (verb: string, name: string) => events.some((e) => e.verb === verb && e.name === name);
    const count = (verb: string, name: string) => events.filter((e) => e.verb === verb && e.name === name).length;

    /** The informer cache and a fresh list from the server hold the same objects at the same resourceVersions. */
    async function cacheMatchesServer(): Promise<boolean> {
      const list = (await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL })) as k8s.KubernetesListObject<MediaJob>;
      const server = list.items.map((o) => `${o.metadata!.name}@${o.metadata!.resourceVersion}`).sort();
      const cached = informer.list(ns).map((o) => `${o.metadata!.name}@${o.metadata!.resourceVersion}`).sort();
      return JSON.stringify(server) === JSON.stringify(cached);
    }

    before(async () => {
      await createNamespace(core, ns);
      informer = k8s.makeInformer<MediaJob>(kc, path, () => {
        lists += 1;
        return custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL }) as Promise<k8s.KubernetesListObject<MediaJob>>;
      });
      for (const verb of ['add', 'update', 'delete'] as const) {
        informer.on(verb, (o) => events.push({ verb, name: o.metadata!.name!, rv: o.metadata!.resourceVersion! }));
      }
      // client-node's documented pattern: a watch that fails (a dropped connection
      // is an error, not a clean end) stops the informer; restart it.
      informer.on('error', (err) => {
        errors.push(err);
        if (!stopped) setTimeout(() => { if (!stopped) void informer.start(); }, 50);
      });
      await informer.start();
      expect(lists).to.equal(1);
    });

    after(async () => {
      stopped = true;
      await informer?.stop();
    });

    it('sees ADDED, MODIFIED and DELETED for creates, patches and deletes', async () => {
      const created = (await custom.createNamespacedCustomObject({
        group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, body: mediaJob('one', 'a.mp4'),
      })) as MediaJob;
      await eventually(() => seen('add', 'one'));
      expect(informer.get('one', ns)?.spec).to.deep.equal({ input: 'a.mp4', preset: 'fast', retries: 2 });

      const patched = (await custom.patchNamespacedCustomObject({
        group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name: 'one',
        body: [{ op: 'replace', path: '/spec/input', value: 'b.mp4' }],
      })) as MediaJob;
      expect(Number(patched.metadata!.resourceVersion)).to.be.greaterThan(Number(created.metadata!.resourceVersion));
      await eventually(() => informer.get('one', ns)?.metadata?.resourceVersion === patched.metadata!.resourceVersion);
      expect(count('update', 'one')).to.equal(1);
      expect(informer.get('one', ns)?.spec?.input).to.equal('b.mp4');

      await custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name: 'one' });
      await eventually(() => seen('delete', 'one'));
      expect(informer.get('one', ns)).to.equal(undefined);
      expect(events.filter((e) => e.name === 'one').map((e) => e.verb)).to.deep.equal(['add', 'update', 'delete']);
      expect(lists).to.equal(1);
      expect(errors).to.deep.equal([]);
    });

    it('relists after a forced 410 and keeps delivering; the cache matches the server', async () => {
      for (const name of ['keep', 'gone']) {
        await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, body: mediaJob(name, `${name}.mp4`) });
      }
      await eventually(() => seen('add', 'keep') && seen('add', 'gone'));
      const listsBefore = lists;

      // In one tick, so the informer cannot reconnect in between: the connection
      // drops, the world changes behind its back, and etcd compacts that history.
      // (Compacting alone would not do: resuming at the current revision is
      // still allowed, on etcd as here; the writes put the informer behind it.)
      const api = tc.cluster.api;
      const rt = api.resource(GROUP, VERSION, PLURAL)!;
      tc.cluster.dropWatches();
      api.delete(rt, ns, 'gone');
      api.create(rt, ns, mediaJob('sneaky', 'sneaky.mp4') as KubeObject);
      tc.cluster.compactHistory();

      // Resuming from its old resourceVersion gets 410 Expired: the informer relists,
      // which reports the missed delete and create.
      await eventually(() => lists > listsBefore && seen('delete', 'gone') && seen('add', 'sneaky'));
      expect(informer.get('gone', ns)).to.equal(undefined);

      // And it watches again from the new list: later changes still arrive.
      await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, body: mediaJob('after410', 'x.mp4') });
      await eventually(() => seen('add', 'after410'));
      await custom.patchNamespacedCustomObject(
        { group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name: 'keep', body: { spec: { preset: 'slow' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
      await eventually(() => informer.get('keep', ns)?.spec?.preset === 'slow');
      await eventually(cacheMatchesServer);
      expect(count('add', 'keep')).to.equal(1);
    });

    it('with a labelSelector, turns objects entering and leaving the selector into add and delete', async () => {
      const selected: string[] = [];
      const gold = k8s.makeInformer<MediaJob>(kc, path, () => custom.listNamespacedCustomObject({
        group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, labelSelector: 'tier=gold',
      }) as Promise<k8s.KubernetesListObject<MediaJob>>, 'tier=gold');
      for (const verb of ['add', 'update', 'delete'] as const) gold.on(verb, (o) => selected.push(`${verb} ${o.metadata!.name}`));
      await gold.start();
      try {
        await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, body: mediaJob('sel', 's.mp4') });
        const label = (tier: string | null) => custom.patchNamespacedCustomObject(
          { group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name: 'sel', body: { metadata: { labels: { tier } } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );
        await label('gold');
        await eventually(() => gold.get('sel', ns));
        await label('bronze');
        await eventually(() => !gold.get('sel', ns));
        expect(selected).to.deep.equal(['add sel', 'delete sel']);
        await custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name: 'sel' });
        await eventually(() => seen('delete', 'sel'));
        expect(selected).to.deep.equal(['add sel', 'delete sel']);
      } finally {
        await gold.stop();
      }
    });

    it('resumes after a dropped connection without losing or repeating events', async () => {
      const listsBefore = lists;
      const errorsBefore = errors.length;
      tc.cluster.dropWatches();
      // Made while the informer reconnects: it must still arrive, exactly once.
      await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, body: mediaJob('during-drop', 'd.mp4') });
      await custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name: 'after410' });
      await eventually(() => seen('add', 'during-drop') && seen('delete', 'after410'));
      await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, body: mediaJob('after-drop', 'e.mp4') });
      await eventually(() => seen('add', 'after-drop'));
      await eventually(cacheMatchesServer);
      expect(count('add', 'during-drop')).to.equal(1);
      expect(count('delete', 'after410')).to.equal(1);
      // It resumed from its resourceVersion (history is still there): no relist.
      expect(lists).to.equal(listsBefore);
      expect(errors.length).to.be.greaterThan(errorsBefore);
    });
  });

  describe('Watch', () => {
    const ns = 'watch';
    const req = { group: GROUP, version: VERSION, namespace: ns, plural: PLURAL };
    const path = `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}`;
    const controllers: AbortController[] = [];

    before(async () => {
      await createNamespace(core, ns);
    });
    after(() => {
      for (const c of controllers) c.abort();
    });

    it('streams ADDED, MODIFIED and DELETED from a list resourceVersion, DELETED at a new resourceVersion', async () => {
      const list = (await custom.listNamespacedCustomObject(req)) as k8s.KubernetesListObject<MediaJob>;
      const seen: { type: string; name: string; rv: number; phase?: string }[] = [];
      controllers.push(await new k8s.Watch(kc).watch(path, { resourceVersion: list.metadata!.resourceVersion }, (type, obj: MediaJob) => {
        seen.push({ type, name: obj.metadata!.name!, rv: Number(obj.metadata!.resourceVersion), phase: obj.status?.phase });
      }, () => {}));
      await custom.createNamespacedCustomObject({ ...req, body: mediaJob('w', 'a.mp4') });
      await custom.patchNamespacedCustomObjectStatus({ ...req, name: 'w', body: [{ op: 'add', path: '/status', value: { phase: 'Running' } }] });
      await custom.deleteNamespacedCustomObject({ ...req, name: 'w' });
      await eventually(() => seen.length >= 3);
      expect(seen.map((e) => `${e.type} ${e.name} ${e.phase ?? ''}`)).to.deep.equal(['ADDED w ', 'MODIFIED w Running', 'DELETED w Running']);
      expect(seen[2]!.rv).to.be.greaterThan(seen[1]!.rv);
      expect(seen[1]!.rv).to.be.greaterThan(seen[0]!.rv);
    });

    it('sends one 410 Expired ERROR event for a compacted resourceVersion, then ends the stream', async () => {
      const list = (await custom.listNamespacedCustomObject(req)) as k8s.KubernetesListObject<MediaJob>;
      await custom.createNamespacedCustomObject({ ...req, body: mediaJob('x', 'a.mp4') });
      tc.cluster.compactHistory();
      const seen: { type: string; obj: k8s.V1Status }[] = [];
      let ended: unknown = 'not yet';
      controllers.push(await new k8s.Watch(kc).watch(path, { resourceVersion: list.metadata!.resourceVersion }, (type, obj: k8s.V1Status) => {
        seen.push({ type, obj });
      }, (err: unknown) => { ended = err; }));
      await eventually(() => ended !== 'not yet');
      expect(ended).to.equal(null);
      expect(seen).to.have.length(1);
      expect(seen[0]!.type).to.equal('ERROR');
      expect(seen[0]!.obj).to.deep.include({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410 });
      expect(seen[0]!.obj.message).to.match(new RegExp(`^too old resource version: ${list.metadata!.resourceVersion} \\(\\d+\\)$`));
    });
  });

  describe('CustomObjectsApi', () => {
    const ns = 'crud';
    const req = { group: GROUP, version: VERSION, namespace: ns, plural: PLURAL };
    const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

    before(async () => {
      await createNamespace(core, ns);
    });

    it('creates, gets and lists with a labelSelector', async () => {
      const created = (await custom.createNamespacedCustomObject({ ...req, body: mediaJob('demo', 'a.mp4', { tier: 'gold' }) })) as MediaJob;
      expect(created).to.deep.include({ apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob' });
      expect(created.metadata).to.include({ name: 'demo', namespace: ns, generation: 1 });
      expect(created.metadata!.uid).to.match(/^[0-9a-f-]{36}$/);
      expect(created.spec).to.deep.equal({ input: 'a.mp4', preset: 'fast', retries: 2 });
      await custom.createNamespacedCustomObject({ ...req, body: mediaJob('other', 'b.mp4', { tier: 'bronze' }) });

      const got = (await custom.getNamespacedCustomObject({ ...req, name: 'demo' })) as MediaJob;
      expect(got).to.deep.equal(created);

      const gold = (await custom.listNamespacedCustomObject({ ...req, labelSelector: 'tier=gold' })) as k8s.KubernetesListObject<MediaJob>;
      expect(gold).to.include({ apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJobList' });
      expect(gold.items.map((o) => o.metadata!.name)).to.deep.equal(['demo']);
      expect(gold.items[0]).to.include({ kind: 'MediaJob', apiVersion: `${GROUP}/${VERSION}` });
      const notGold = (await custom.listNamespacedCustomObject({ ...req, labelSelector: 'tier!=gold' })) as k8s.KubernetesListObject<MediaJob>;
      expect(notGold.items.map((o) => o.metadata!.name)).to.deep.equal(['other']);
      const all = (await custom.listNamespacedCustomObject(req)) as k8s.KubernetesListObject<MediaJob>;
      expect(all.items.map((o) => o.metadata!.name)).to.deep.equal(['demo', 'other']);
    });

    it('patches with JSON patch by default and with merge patch on request', async () => {
      const json = (await custom.patchNamespacedCustomObject({
        ...req, name: 'demo',
        body: [
          { op: 'test', path: '/spec/input', value: 'a.mp4' },
          { op: 'replace', path: '/spec/input', value: 'c.mp4' },
          { op: 'add', path: '/metadata/labels/stage', value: 'one' },
        ],
      })) as MediaJob;
      expect(json.spec?.input).to.equal('c.mp4');
      expect(json.metadata!.labels).to.deep.equal({ tier: 'gold', stage: 'one' });
      expect(json.metadata!.generation).to.equal(2);

      const merged = (await custom.patchNamespacedCustomObject(
        { ...req, name: 'demo', body: { metadata: { labels: { stage: null } }, spec: { preset: 'slow' } } },
        mergePatch,
      )) as MediaJob;
      expect(merged.spec).to.deep.equal({ input: 'c.mp4', preset: 'slow', retries: 2 });
      expect(merged.metadata!.labels).to.deep.equal({ tier: 'gold' });
      expect(merged.metadata!.generation).to.equal(3);

      // A failing JSON patch test op is a 422 from the server, as on a real cluster.
      const failed = await apiError(custom.patchNamespacedCustomObject({
        ...req, name: 'demo', body: [{ op: 'test', path: '/spec/input', value: 'nope' }],
      }));
      // patch.go answers NewGenericServerResponse(422, …), which drops the detail.
      expect(failed.code).to.equal(422);
      expect(failed.status).to.deep.include({
        kind: 'Status', status: 'Failure', reason: 'Invalid', code: 422, details: {},
        message: 'the server rejected our request due to an error in our request',
      });
    });

    it('writes status only through the status subresource, without bumping generation', async () => {
      const before = (await custom.getNamespacedCustomObject({ ...req, name: 'demo' })) as MediaJob;
      const replaced = (await custom.replaceNamespacedCustomObjectStatus({
        ...req, name: 'demo', body: { ...before, spec: { ...before.spec, input: 'ignored.mp4' }, status: { phase: 'Running' } },
      })) as MediaJob;
      expect(replaced.status).to.deep.equal({ phase: 'Running' });
      expect(replaced.spec?.input).to.equal('c.mp4');
      expect(replaced.metadata!.generation).to.equal(before.metadata!.generation);

      const patched = (await custom.patchNamespacedCustomObjectStatus(
        { ...req, name: 'demo', body: { status: { phase: 'Done' } } },
        mergePatch,
      )) as MediaJob;
      expect(patched.status).to.deep.equal({ phase: 'Done' });
      const jsonPatched = (await custom.patchNamespacedCustomObjectStatus({
        ...req, name: 'demo', body: [{ op: 'replace', path: '/status/phase', value: 'Archived' }],
      })) as MediaJob;
      expect(jsonPatched.status).to.deep.equal({ phase: 'Archived' });
      expect(jsonPatched.metadata!.generation).to.equal(before.metadata!.generation);

      // The main resource ignores .status: nothing changes, not even the resourceVersion.
      const ignored = (await custom.patchNamespacedCustomObject(
        { ...req, name: 'demo', body: { status: { phase: 'Hacked' } } },
        mergePatch,
      )) as MediaJob;
      expect(ignored.status).to.deep.equal({ phase: 'Archived' });
      expect(ignored.metadata!.resourceVersion).to.equal(jsonPatched.metadata!.resourceVersion);
    });

    it('surfaces errors as ApiException with .code and a Status body', async () => {
      const notFound = await apiError(custom.getNamespacedCustomObject({ ...req, name: 'missing' }));
      expect(notFound.code).to.equal(404);
      expect(notFound.status).to.deep.include({
        kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404,
        message: `${PLURAL}.${GROUP} "missing" not found`,
      });
      expect(notFound.status.details).to.deep.include({ name: 'missing', group: GROUP, kind: PLURAL });

      const exists = await apiError(custom.createNamespacedCustomObject({ ...req, body: mediaJob('demo', 'a.mp4') }));
      expect(exists.code).to.equal(409);
      expect(exists.status).to.include({ reason: 'AlreadyExists', message: `${PLURAL}.${GROUP} "demo" already exists` });

      const current = (await custom.getNamespacedCustomObject({ ...req, name: 'demo' })) as MediaJob;
      const fresh = (await custom.replaceNamespacedCustomObject({
        ...req, name: 'demo', body: { ...current, spec: { ...current.spec, retries: 5 } },
      })) as MediaJob;
      expect(fresh.spec?.retries).to.equal(5);
      const conflict = await apiError(custom.replaceNamespacedCustomObject({
        ...req, name: 'demo', body: { ...current, spec: { ...current.spec, retries: 7 } },
      }));
      expect(conflict.code).to.equal(409);
      expect(conflict.status).to.include({
        reason: 'Conflict',
        message: `Operation cannot be fulfilled on ${PLURAL}.${GROUP} "demo": the object has been modified; please apply your changes to the latest version and try again`,
      });

      const { resourceVersion: _rv, ...noRv } = fresh.metadata!;
      const unconditional = await apiError(custom.replaceNamespacedCustomObject({ ...req, name: 'demo', body: { ...fresh, metadata: noRv } }));
      expect(unconditional.code).to.equal(422);
      expect(unconditional.status).to.include({
        reason: 'Invalid',
        message: 'MediaJob.media.example.com "demo" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update',
      });

      const unknown = { ...mediaJob('strict', 'a.mp4'), spec: { input: 'a.mp4', foo: 1 } };
      const strict = await apiError(custom.createNamespacedCustomObject({ ...req, body: unknown, fieldValidation: 'Strict' }));
      expect(strict.code).to.equal(400);
      expect(strict.status).to.include({
        reason: 'BadRequest', message: 'MediaJob in version "v1" cannot be handled as a MediaJob: strict decoding error: unknown field "spec.foo"',
      });
      // The default (Warn) prunes the field and says so in a Warning header.
      const warned = await custom.createNamespacedCustomObjectWithHttpInfo({ ...req, body: unknown });
      expect(warned.httpStatusCode).to.equal(201);
      expect(warned.headers['warning']).to.equal('299 - "unknown field \\"spec.foo\\""');
      expect((warned.data as MediaJob).spec).to.deep.equal({ input: 'a.mp4', preset: 'fast', retries: 2 });

      const bad = { ...mediaJob('bad', 'a.mp4'), spec: { input: 'a.mp4', preset: 'medium' } };
      const invalid = await apiError(custom.createNamespacedCustomObject({ ...req, body: bad }));
      expect(invalid.code).to.equal(422);
      expect(invalid.status).to.include({ reason: 'Invalid', code: 422 });
      expect(invalid.status.message).to.equal(
        'MediaJob.media.example.com "bad" is invalid: spec.preset: Unsupported value: "medium": supported values: "fast", "slow"',
      );
      expect(invalid.status.details?.causes).to.deep.equal([
        { reason: 'FieldValueNotSupported', message: 'Unsupported value: "medium": supported values: "fast", "slow"', field: 'spec.preset' },
      ]);
    });

    it('deletes, returning a Success Status; a second delete is 404', async () => {
      const status = (await custom.deleteNamespacedCustomObject({ ...req, name: 'other' })) as k8s.V1Status;
      expect(status).to.deep.include({ kind: 'Status', apiVersion: 'v1', status: 'Success' });
      expect(status.details).to.deep.include({ name: 'other', group: GROUP, kind: PLURAL });
      expect((await apiError(custom.getNamespacedCustomObject({ ...req, name: 'other' }))).code).to.equal(404);
      expect((await apiError(custom.deleteNamespacedCustomObject({ ...req, name: 'other' }))).code).to.equal(404);
    });
  });

  describe('BatchV1Api Jobs run as local processes', () => {
    const ns = 'jobs';
    let batch: k8s.BatchV1Api;

    const job = (name: string, command: string[], backoffLimit?: number): k8s.V1Job => ({
      apiVersion: 'batch/v1', kind: 'Job', metadata: { name },
      spec: {
        backoffLimit,
        template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'node:20', command }] } },
      },
    });
    const condition = (j: k8s.V1Job, type: string) => j.status?.conditions?.find((c) => c.type === type && c.status === 'True');
    const podsOf = async (name: string) =>
      (await core.listNamespacedPod({ namespace: ns, labelSelector: `batch.kubernetes.io/job-name=${name}` })).items;

    before(async () => {
      batch = kc.makeApiClient(k8s.BatchV1Api);
      await createNamespace(core, ns);
    });

    it('completes a Job; its pod log holds the stdout', async () => {
      await batch.createNamespacedJob({ namespace: ns, body: job('hi', [process.execPath, '-e', "console.log('hi')"]) });
      const done = await eventually(async () => {
        const j = await batch.readNamespacedJobStatus({ name: 'hi', namespace: ns });
        return condition(j, 'Complete') ? j : undefined;
      });
      expect(done.status).to.include({ succeeded: 1 });
      expect(condition(done, 'Complete')).to.include({ reason: 'CompletionsReached' });
      expect(condition(done, 'SuccessCriteriaMet')).to.not.equal(undefined);
      expect(done.status?.completionTime).to.be.instanceOf(Date);
      const pods = await podsOf('hi');
      expect(pods).to.have.length(1);
      expect(pods[0]!.status?.phase).to.equal('Succeeded');
      const log = await core.readNamespacedPodLog({ name: pods[0]!.metadata!.name!, namespace: ns, container: 'main' });
      expect(log).to.equal('hi\n');
    });

    it('fails with BackoffLimitExceeded after backoffLimit+1 pods', async () => {
      await batch.createNamespacedJob({ namespace: ns, body: job('boom', ['sh', '-c', 'echo failing >&2; exit 3'], 2) });
      const failed = await eventually(async () => {
        const j = await batch.readNamespacedJob({ name: 'boom', namespace: ns });
        return condition(j, 'Failed') ? j : undefined;
      });
      expect(condition(failed, 'Failed')).to.include({ reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit' });
      expect(condition(failed, 'FailureTarget')).to.include({ reason: 'BackoffLimitExceeded' });
      expect(failed.status).to.include({ failed: 3 });
      expect(failed.status?.succeeded ?? 0).to.equal(0);
      const pods = await podsOf('boom');
      expect(pods).to.have.length(3);
      for (const p of pods) {
        expect(p.status?.phase).to.equal('Failed');
        expect(p.status?.containerStatuses?.[0]?.state?.terminated).to.include({ exitCode: 3, reason: 'Error' });
        // The container log interleaves stderr with stdout, as the kubelet's does.
        expect(await core.readNamespacedPodLog({ name: p.metadata!.name!, namespace: ns })).to.equal('failing\n');
      }
    });

    it('deletes Jobs: Background cascades to the pods, no policy orphans them with a Warning', async () => {
      const hiPods = await podsOf('hi');
      await batch.deleteNamespacedJob({ name: 'hi', namespace: ns, propagationPolicy: 'Background' });
      await eventually(async () => (await podsOf('hi')).length === 0);
      expect((await apiError(core.readNamespacedPod({ name: hiPods[0]!.metadata!.name!, namespace: ns }))).code).to.equal(404);

      const res = await batch.deleteNamespacedJobWithHttpInfo({ name: 'boom', namespace: ns });
      expect(res.headers['warning']).to.equal(
        '299 - "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"',
      );
      await eventually(async () => (await apiError(batch.readNamespacedJob({ name: 'boom', namespace: ns }))).code === 404);
      const orphans = await eventually(async () => {
        const pods = await podsOf('boom');
        return pods.every((p) => !p.metadata?.ownerReferences?.length) ? pods : undefined;
      });
      expect(orphans).to.have.length(3);
    });
  });

  describe('Leases and leader election', () => {
    const ns = 'leases';
    let coordination: k8s.CoordinationV1Api;

    before(async () => {
      coordination = kc.makeApiClient(k8s.CoordinationV1Api);
      await createNamespace(core, ns);
    });

    it('rejects a plain Date (3 fractional digits) with the apiserver’s 400 and accepts V1MicroTime', async () => {
      const plain = new Date();
      const iso = plain.toISOString();
      const parseError = (s: string) =>
        `Lease in version "v1" cannot be handled as a Lease: parsing time "${s}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "${s.slice(19)}" as ".000000"`;

      const onCreate = await apiError(coordination.createNamespacedLease({
        namespace: ns, body: { metadata: { name: 'plain' }, spec: { holderIdentity: 'x', acquireTime: plain, renewTime: plain } },
      }));
      expect(onCreate.code).to.equal(400);
      expect(onCreate.status).to.include({ kind: 'Status', status: 'Failure', reason: 'BadRequest', code: 400, message: parseError(iso) });
      expect((await apiError(coordination.readNamespacedLease({ name: 'plain', namespace: ns }))).code).to.equal(404);

      const micro = new k8s.V1MicroTime();
      const created = await coordination.createNamespacedLease({
        namespace: ns, body: { metadata: { name: 'micro' }, spec: { holderIdentity: 'x', leaseDurationSeconds: 10, acquireTime: micro, renewTime: micro } },
      });
      expect(String(created.spec?.renewTime)).to.equal(micro.toISOString()).and.match(/\.\d{6}Z$/);

      const later = new Date(plain.getTime() + 1234);
      const onUpdate = await apiError(coordination.replaceNamespacedLease({
        name: 'micro', namespace: ns, body: { ...created, spec: { ...created.spec, renewTime: later } },
      }));
      expect(onUpdate.code).to.equal(400);
      expect(onUpdate.status.message).to.equal(parseError(later.toISOString()));
      const renewed = await coordination.replaceNamespacedLease({
        name: 'micro', namespace: ns, body: { ...created, spec: { ...created.spec, renewTime: new k8s.V1MicroTime(later) } },
      });
      expect(String(renewed.spec?.renewTime)).to.match(/\.\d{6}Z$/);
      expect(renewed.metadata?.resourceVersion).to.not.equal(created.metadata?.resourceVersion);

      // What leader election relies on: a duplicate create and a stale update are both 409.
      const dup = await apiError(coordination.createNamespacedLease({ namespace: ns, body: { metadata: { name: 'micro' }, spec: {} } }));
      expect(dup.code).to.equal(409);
      expect(dup.status).to.include({ reason: 'AlreadyExists', message: 'leases.coordination.k8s.io "micro" already exists' });
      const stale = await apiError(coordination.replaceNamespacedLease({
        name: 'micro', namespace: ns, body: { ...created, spec: { ...created.spec, holderIdentity: 'y' } },
      }));
      expect(stale.code).to.equal(409);
      expect(stale.status).to.include({
        reason: 'Conflict',
        message: 'Operation cannot be fulfilled on leases.coordination.k8s.io "micro": the object has been modified; please apply your changes to the latest version and try again',
      });
    });

    describe('two contenders', () => {
      const electors: LeaseElector[] = [];
      after(async () => {
        await Promise.all(electors.map((e) => e.stop()));
      });

      it('elects one leader at a time; the other takes over once the lease expires', async () => {
        const leaders = new Set<string>();
        let maxLeaders = 0;
        const make = (identity: string) => {
          // Separate KubeConfig and clients per contender, as separate processes would have.
          const api = kubeConfigFor(tc.cluster).makeApiClient(k8s.CoordinationV1Api);
          const e = new LeaseElector(api, {
            namespace: ns, name: 'controller-leader', identity,
            leaseDurationSeconds: 2, renewDeadlineMs: 1500, retryPeriodMs: 500,
            onStartedLeading: () => {
              leaders.add(identity);
              maxLeaders = Math.max(maxLeaders, leaders.size);
            },
            onStoppedLeading: () => leaders.delete(identity),
          });
          electors.push(e);
          return e;
        };
        const a = make('a');
        a.start();
        await eventually(() => a.leading);
        const b = make('b');
        b.start();

        // While a renews, b keeps trying and keeps failing.
        await eventually(() => b.attempts >= 4 && a.renewals >= 4, 10_000);
        expect(b.leading).to.equal(false);
        const held = await coordination.readNamespacedLease({ name: 'controller-leader', namespace: ns });
        expect(held.spec).to.include({ holderIdentity: 'a', leaseDurationSeconds: 2, leaseTransitions: 0 });
        expect(String(held.spec?.renewTime)).to.match(/\.\d{6}Z$/);

        // a stops renewing (crashes, no release); b must wait for the lease to expire.
        await a.stop();
        leaders.delete('a');
        const lastRenew = a.lastRenewAt;
        await eventually(() => b.leading, 10_000);
        expect(b.acquiredAt - lastRenew).to.be.at.least(2000 - 100);
        expect(maxLeaders).to.equal(1);

        const taken = await coordination.readNamespacedLease({ name: 'controller-leader', namespace: ns });
        expect(taken.spec).to.include({ holderIdentity: 'b', leaseTransitions: 1 });
        expect(String(taken.spec?.acquireTime)).to.not.equal(String(held.spec?.acquireTime));
        await eventually(() => b.renewals >= 2);
        expect(leaders).to.deep.equal(new Set(['b']));
      });
    });
  });
});

interface ElectorOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

/**
 * Lease-based leader election as client-go's leaderelection package does it
 * (client-node 2.0.1 ships no helper): expiry is judged by when this contender
 * last *observed* the record change, not by the holder's clock; writes carry
 * the observed resourceVersion so two contenders never both win; times are
 * MicroTime.
 */
class LeaseElector {
  leading = false;
  attempts = 0;
  renewals = 0;
  acquiredAt = 0;
  lastRenewAt = 0;
  private observedRaw = '';
  private observedHolder = '';
  private observedTime = 0;
  private stopped = false;
  private wake: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private loop: Promise<void> | undefined;

  constructor(private readonly api: k8s.CoordinationV1Api, private readonly o: ElectorOptions) {}

  start(): void {
    this.loop = this.run();
  }

  /** Stop trying and renewing, without releasing the lease (as a crashed process). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const ok = await this.tryAcquireOrRenew().catch(() => false);
      if (this.stopped) return;
      const now = Date.now();
      if (ok) {
        this.lastRenewAt = now;
        if (!this.leading) {
          this.leading = true;
          this.acquiredAt = now;
          this.o.onStartedLeading();
        } else {
          this.renewals += 1;
        }
      } else if (this.leading && now - this.lastRenewAt > this.o.renewDeadlineMs) {
        this.leading = false;
        this.o.onStoppedLeading();
      }
      // client-go: JitterUntil(retryPeriod, 1.2) while acquiring, retryPeriod while renewing.
      const delay = this.leading ? this.o.retryPeriodMs : this.o.retryPeriodMs * (1 + Math.random() * 1.2);
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, delay);
      });
    }
  }

  private isLeader(): boolean {
    return this.observedHolder === this.o.identity;
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    if (!this.leading) this.attempts += 1;
    const { namespace, name, identity, leaseDurationSeconds } = this.o;
    const now = new k8s.V1MicroTime();
    let lease: k8s.V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (e) {
      if (!(e instanceof k8s.ApiException) || e.code !== 404) throw e;
      const spec: k8s.V1LeaseSpec = { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 };
      const created = await this.api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec } });
      this.observe(created, Date.now());
      return true;
    }
    const old = lease.spec ?? {};
    const raw = JSON.stringify(old);
    if (raw !== this.observedRaw) this.observe(lease, Date.now());
    if (old.holderIdentity && this.observedTime + (old.leaseDurationSeconds ?? leaseDurationSeconds) * 1000 > Date.now() && !this.isLeader()) {
      return false; // held by someone else and not yet expired
    }
    const spec: k8s.V1LeaseSpec = {
      holderIdentity: identity, leaseDurationSeconds, renewTime: now,
      acquireTime: this.isLeader() ? old.acquireTime : now,
      leaseTransitions: this.isLeader() ? old.leaseTransitions ?? 0 : (old.leaseTransitions ?? 0) + 1,
    };
    // The resourceVersion from the read makes this a compare-and-swap: a concurrent winner gives us 409.
    const updated = await this.api.replaceNamespacedLease({ name, namespace, body: { ...lease, spec } });
    this.observe(updated, Date.now());
    return true;
  }

  private observe(lease: k8s.V1Lease, at: number): void {
    this.observedRaw = JSON.stringify(lease.spec ?? {});
    this.observedHolder = lease.spec?.holderIdentity ?? '';
    this.observedTime = at;
  }
}
