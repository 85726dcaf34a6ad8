// The API over plain HTTP: bad input, list and watch semantics, optimistic
// concurrency, finalizers, garbage collection, namespaces and persistence,
// checked the way a client sees them (status codes and Status bodies).
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { LocalCluster } from '../src/index.js';
import { EXAMPLE_CRD, clusterFetch, eventually, startTestCluster, type TestCluster } from './support.js';
import { parse } from 'yaml';

interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

function client(cluster: () => LocalCluster) {
  return async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
    const init: RequestInit = { method, headers: { Accept: 'application/json', ...headers } };
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      (init.headers as Record<string, string>)['Content-Type'] ??= 'application/json';
    }
    const res = await clusterFetch(cluster(), path, init);
    const text = await res.text();
    let parsed: Record<string, unknown> = {};
    try {
      parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      parsed = { text };
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
}

/** Read a watch stream's events until `until` says stop or the stream ends. */
async function watchEvents(cluster: LocalCluster, path: string, until: (events: Record<string, unknown>[]) => boolean, headers: Record<string, string> = {}): Promise<Record<string, unknown>[]> {
  const ctrl = new AbortController();
  const res = await clusterFetch(cluster, path, { signal: ctrl.signal, headers });
  const reader = res.body!.getReader();
  const events: Record<string, unknown>[] = [];
  let buf = '';
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        events.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
        buf = buf.slice(nl + 1);
      }
      if (until(events)) break;
    }
  } finally {
    ctrl.abort();
  }
  return events;
}

const CM = '/api/v1/namespaces/default/configmaps';
const cm = (name: string, extra: Record<string, unknown> = {}) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, ...extra }, data: { a: '1' } });
const meta = (r: Reply) => r.body.metadata as Record<string, unknown>;

describe('local cluster HTTP API', function () {
  let tc: TestCluster;
  const call = client(() => tc.cluster);

  before(async () => {
    tc = await startTestCluster({ bookmarkIntervalMs: 100 });
    const crd = parse(EXAMPLE_CRD) as Record<string, unknown>;
    expect((await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)).status).to.equal(201);
  });
  after(() => tc.stop());

  describe('bad input never crashes it and gets a Status with the real code', () => {
    it('malformed JSON is 400 BadRequest', async () => {
      const r = await call('POST', CM, '{"apiVersion": "v1", kind');
      expect(r.status).to.equal(400);
      expect(r.body).to.include({ kind: 'Status', status: 'Failure', reason: 'BadRequest', code: 400 });
      expect(r.body.message).to.match(/^the object provided is unrecognized \(must be of type ConfigMap\): couldn't get version\/kind; json parse error/);
    });

    it('a body over 3 MiB is 413', async () => {
      const big = JSON.stringify(cm('big', {})).replace('"1"', JSON.stringify('x'.repeat(3 * 1024 * 1024 + 10)));
      const r = await call('POST', CM, big);
      expect(r.status).to.equal(413);
      expect(r.body).to.include({ kind: 'Status', reason: 'RequestEntityTooLarge', code: 413 });
    });

    it('wrong content types are 415', async () => {
      expect((await call('POST', CM, 'hello', { 'Content-Type': 'text/plain' })).status).to.equal(415);
      const p = await call('PATCH', `${CM}/x`, '{}', { 'Content-Type': 'text/plain' });
      expect(p.status).to.equal(415);
      expect(p.body.reason).to.equal('UnsupportedMediaType');
    });

    it('strategic merge patch on a custom resource is 415', async () => {
      await call('POST', '/apis/media.example.com/v1/namespaces/default/mediajobs', { apiVersion: 'media.example.com/v1', kind: 'MediaJob', metadata: { name: 'smp' }, spec: { input: 'a' } });
      const r = await call('PATCH', '/apis/media.example.com/v1/namespaces/default/mediajobs/smp', { spec: { input: 'b' } }, { 'Content-Type': 'application/strategic-merge-patch+json' });
      expect(r.status).to.equal(415);
    });

    it('unknown paths, groups and kinds are 404 Status bodies', async () => {
      for (const path of ['/nope', '/api/v1/widgets', '/apis/batch/v9/jobs', '/api/v1/namespaces/default/widgets/x']) {
        const r = await call('GET', path);
        expect(r.status, path).to.equal(404);
        expect(r.body, path).to.include({ kind: 'Status', reason: 'NotFound' });
      }
      // A group nobody serves reaches v1.32's final NotFound handler: Go's plain-text http.NotFound.
      const group = await call('GET', '/apis/nope.io/v1/things');
      expect(group.status).to.equal(404);
      expect(group.body).to.deep.equal({ text: '404 page not found\n' });
    });

    it('an unsupported method is 405 and a bad selector 400', async () => {
      expect((await call('PUT', CM, cm('x'))).status).to.equal(405);
      const r = await call('GET', `${CM}?labelSelector=${encodeURIComponent('a in (')}`);
      expect(r.status).to.equal(400);
      expect(r.body.reason).to.equal('BadRequest');
    });

    it('is still healthy afterwards', async () => {
      const res = await clusterFetch(tc.cluster, '/healthz');
      expect(await res.text()).to.equal('ok');
    });
  });

  describe('writes', () => {
    it('rejects a stale resourceVersion with 409 Conflict and the real message', async () => {
      const created = await call('POST', CM, cm('conflict'));
      const obj = created.body;
      expect((await call('PUT', `${CM}/conflict`, { ...obj, data: { a: '2' } })).status).to.equal(200);
      const stale = await call('PUT', `${CM}/conflict`, { ...obj, data: { a: '3' } });
      expect(stale.status).to.equal(409);
      expect(stale.body.message).to.equal('Operation cannot be fulfilled on configmaps "conflict": the object has been modified; please apply your changes to the latest version and try again');
    });

    it('requires a resourceVersion to update a custom resource', async () => {
      const r = await call('PUT', '/apis/media.example.com/v1/namespaces/default/mediajobs/smp', { apiVersion: 'media.example.com/v1', kind: 'MediaJob', metadata: { name: 'smp' }, spec: { input: 'c' } });
      expect(r.status).to.equal(422);
      expect(r.body.message).to.equal('MediaJob.media.example.com "smp" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update');
    });

    it('does not bump the resourceVersion for an unchanged update', async () => {
      const created = await call('POST', CM, cm('same'));
      const again = await call('PUT', `${CM}/same`, created.body);
      expect(meta(again).resourceVersion).to.equal(meta(created).resourceVersion);
    });

    it('generateName makes a five-character suffix', async () => {
      const r = await call('POST', CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'gen-' } });
      expect(r.status).to.equal(201);
      expect(meta(r).name).to.match(/^gen-[a-z0-9]{5}$/);
    });

    it('creating in a missing namespace is 404 for the namespace', async () => {
      const r = await call('POST', '/api/v1/namespaces/nope/configmaps', cm('x'));
      expect(r.status).to.equal(404);
      expect(r.body.message).to.equal('namespaces "nope" not found');
    });

    it('keeps an object with finalizers until the last one is removed', async () => {
      await call('POST', CM, cm('fin', { finalizers: ['example.com/hold'] }));
      const del = await call('DELETE', `${CM}/fin`);
      expect(del.status).to.equal(202);
      expect(meta(del).deletionTimestamp).to.be.a('string');
      const add = await call('PATCH', `${CM}/fin`, { metadata: { finalizers: ['example.com/hold', 'example.com/more'] } }, { 'Content-Type': 'application/merge-patch+json' });
      expect(add.status).to.equal(422);
      expect(add.body.message).to.match(/no new finalizers can be added if the object is being deleted/);
      const rm = await call('PATCH', `${CM}/fin`, [{ op: 'remove', path: '/metadata/finalizers' }], { 'Content-Type': 'application/json-patch+json' });
      expect(rm.status).to.equal(200);
      expect((await call('GET', `${CM}/fin`)).status).to.equal(404);
    });

    it('reports an immediate delete as a Success Status with the uid', async () => {
      const created = await call('POST', CM, cm('gone'));
      const del = await call('DELETE', `${CM}/gone`);
      expect(del.status).to.equal(200);
      expect(del.body).to.deep.include({ kind: 'Status', status: 'Success' });
      expect(del.body.details).to.deep.equal({ name: 'gone', group: '', kind: 'configmaps', uid: meta(created).uid });
    });
  });

  describe('list', () => {
    before(async () => {
      for (let i = 0; i < 25; i++) await call('POST', CM, cm(`page-${String(i).padStart(2, '0')}`, { labels: { set: 'paged' } }));
    });

    it('pages with limit and continue', async () => {
      const names: string[] = [];
      let cont = '';
      let pages = 0;
      do {
        const r = await call('GET', `${CM}?labelSelector=set%3Dpaged&limit=10${cont ? `&continue=${cont}` : ''}`);
        pages++;
        names.push(...(r.body.items as { metadata: { name: string } }[]).map((o) => o.metadata.name));
        cont = (meta(r).continue as string | undefined) ?? '';
      } while (cont);
      expect(pages).to.equal(3);
      expect(names).to.deep.equal(Array.from({ length: 25 }, (_, i) => `page-${String(i).padStart(2, '0')}`));
    });

    it('lists the state at an exact older resourceVersion, and 410 once it is compacted', async () => {
      const before = await call('GET', `${CM}?labelSelector=set%3Dpaged`);
      const rv = meta(before).resourceVersion as string;
      await call('DELETE', `${CM}/page-00`);
      const then = await call('GET', `${CM}?labelSelector=set%3Dpaged&resourceVersion=${rv}&resourceVersionMatch=Exact`);
      expect((then.body.items as unknown[]).length).to.equal(25);
      const now = await call('GET', `${CM}?labelSelector=set%3Dpaged`);
      expect((now.body.items as unknown[]).length).to.equal(24);
      tc.cluster.compactHistory();
      const old = await call('GET', `${CM}?resourceVersion=${rv}&resourceVersionMatch=Exact`);
      expect(old.status).to.equal(410);
      expect(old.body.reason).to.equal('Expired');
    });

    it('serves Table output with the kind\'s columns', async () => {
      const r = await call('GET', `${CM}?labelSelector=set%3Dpaged&limit=2`, undefined, { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' });
      expect(r.body.kind).to.equal('Table');
      expect((r.body.columnDefinitions as { name: string }[]).map((c) => c.name)).to.deep.equal(['Name', 'Data', 'Age']);
      expect((r.body.rows as unknown[]).length).to.equal(2);
    });
  });

  describe('watch', () => {
    const W = '/api/v1/namespaces/default/configmaps?watch=true';

    it('replays history after a resourceVersion, DELETED carrying a new one', async () => {
      const list = await call('GET', CM);
      const rv = meta(list).resourceVersion as string;
      await call('POST', CM, cm('w1'));
      await call('PATCH', `${CM}/w1`, { data: { a: '2' } }, { 'Content-Type': 'application/merge-patch+json' });
      await call('DELETE', `${CM}/w1`);
      const events = await watchEvents(tc.cluster, `${W}&resourceVersion=${rv}`, (e) => e.length >= 3);
      expect(events.map((e) => e.type)).to.deep.equal(['ADDED', 'MODIFIED', 'DELETED']);
      const rvs = events.map((e) => Number((e.object as { metadata: { resourceVersion: string } }).metadata.resourceVersion));
      expect(rvs[0]).to.be.lessThan(rvs[1]!);
      expect(rvs[1]).to.be.lessThan(rvs[2]!);
    });

    it('sends one 410 Expired ERROR event for a compacted resourceVersion', async () => {
      await call('POST', CM, cm('w2'));
      tc.cluster.compactHistory();
      const events = await watchEvents(tc.cluster, `${W}&resourceVersion=1`, () => false);
      expect(events).to.have.length(1);
      expect(events[0]!.type).to.equal('ERROR');
      expect(events[0]!.object).to.include({ kind: 'Status', reason: 'Expired', code: 410 });
    });

    it('turns objects entering and leaving a label selector into ADDED and DELETED', async () => {
      const rv = meta(await call('GET', CM)).resourceVersion as string;
      await call('POST', CM, cm('sel'));
      await call('PATCH', `${CM}/sel`, { metadata: { labels: { app: 'x' } } }, { 'Content-Type': 'application/merge-patch+json' });
      await call('PATCH', `${CM}/sel`, { metadata: { labels: { app: 'y' } } }, { 'Content-Type': 'application/merge-patch+json' });
      const events = await watchEvents(tc.cluster, `${W}&labelSelector=app%3Dx&resourceVersion=${rv}`, (e) => e.length >= 2);
      expect(events.map((e) => e.type)).to.deep.equal(['ADDED', 'DELETED']);
    });

    it('ends the stream after timeoutSeconds and sends bookmarks when allowed', async () => {
      const start = Date.now();
      const events = await watchEvents(tc.cluster, `${W}&resourceVersion=${meta(await call('GET', CM)).resourceVersion as string}&allowWatchBookmarks=true&timeoutSeconds=1`, () => false);
      expect(Date.now() - start).to.be.within(900, 5000);
      expect(events.some((e) => e.type === 'BOOKMARK')).to.equal(true);
    });

    it('streams one-row Tables, with column definitions only in the first', async () => {
      const rv = meta(await call('GET', CM)).resourceVersion as string;
      await call('POST', CM, cm('t1'));
      await call('POST', CM, cm('t2'));
      const events = await watchEvents(tc.cluster, `${W}&resourceVersion=${rv}`, (e) => e.length >= 2, { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' });
      const tables = events.map((e) => e.object as { kind: string; columnDefinitions?: unknown[]; rows: unknown[] });
      expect(tables.map((t) => t.kind)).to.deep.equal(['Table', 'Table']);
      expect(tables[0]!.columnDefinitions).to.have.length.greaterThan(0);
      expect(tables[1]!.columnDefinitions ?? []).to.have.length(0);
      expect(tables[1]!.rows).to.have.length(1);
    });
  });

  describe('metadata only (PartialObjectMetadata, as client-go\'s metadata client asks)', () => {
    // The Accept headers client-go's metadata client sends: protobuf first, then JSON, then the object itself.
    const accept = (as: string) => `application/vnd.kubernetes.protobuf;as=${as};g=meta.k8s.io;v=v1,application/json;as=${as};g=meta.k8s.io;v=v1,application/json`;

    it('gets one object\'s metadata alone, lists items\' metadata with the list\'s own, and pages them', async () => {
      await call('POST', CM, cm('pm1', { labels: { app: 'pm' } }));
      await call('POST', CM, cm('pm2', { labels: { app: 'pm' } }));
      const one = await call('GET', `${CM}/pm1`, undefined, { Accept: accept('PartialObjectMetadata') });
      expect(one.status).to.equal(200);
      expect(one.body).to.have.keys(['kind', 'apiVersion', 'metadata']);
      expect(one.body).to.include({ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1' });
      const full = await call('GET', `${CM}/pm1`);
      expect(one.body.metadata).to.deep.equal(full.body.metadata);

      const list = await call('GET', `${CM}?labelSelector=app%3Dpm&limit=1`, undefined, { Accept: accept('PartialObjectMetadataList') });
      expect(list.body).to.include({ kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1' });
      const items = list.body.items as Record<string, unknown>[];
      expect(items.map((i) => [i.kind, i.apiVersion, (i.metadata as { name: string }).name, 'data' in i]))
        .to.deep.equal([['PartialObjectMetadata', 'meta.k8s.io/v1', 'pm1', false]]);
      expect(meta(list)).to.include.keys(['resourceVersion', 'continue']);
      const rest = await call('GET', `${CM}?labelSelector=app%3Dpm&continue=${String(meta(list).continue)}`, undefined, { Accept: accept('PartialObjectMetadataList') });
      expect((rest.body.items as { metadata: { name: string } }[]).map((i) => i.metadata.name)).to.deep.equal(['pm2']);
    });

    it('refuses a list asked for as one object, and one object asked for as a list: 406 NotAcceptable', async () => {
      const list = await call('GET', CM, undefined, { Accept: accept('PartialObjectMetadata') });
      expect(list.status).to.equal(406);
      expect(list.body).to.include({ kind: 'Status', reason: 'NotAcceptable', code: 406 });
      expect(list.body.message).to.match(/^you requested PartialObjectMetadata, but the requested object is a list \(\*core\.ConfigMapList\)$/);
      await call('POST', CM, cm('pm3'));
      const one = await call('GET', `${CM}/pm3`, undefined, { Accept: accept('PartialObjectMetadataList') });
      expect(one.status).to.equal(406);
    });

    it('serves the object itself when the conversion asked for is not one it makes (another group or version)', async () => {
      await call('POST', CM, cm('pm4'));
      const r = await call('GET', `${CM}/pm4`, undefined, { Accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2,application/json' });
      expect(r.body).to.include({ kind: 'ConfigMap' });
      expect(r.body.data).to.deep.equal({ a: '1' });
    });

    it('watches metadata: every event\'s object is PartialObjectMetadata; a watch asked for as a list is refused', async () => {
      const rv = meta(await call('GET', CM)).resourceVersion as string;
      await call('POST', CM, cm('pm5'));
      await call('PATCH', `${CM}/pm5`, { data: { a: '2' } }, { 'Content-Type': 'application/merge-patch+json' });
      await call('DELETE', `${CM}/pm5`);
      const events = await watchEvents(tc.cluster, `${CM}?watch=true&resourceVersion=${rv}&fieldSelector=metadata.name%3Dpm5`, (e) => e.length >= 3,
        { Accept: accept('PartialObjectMetadata') });
      expect(events.map((e) => [e.type, (e.object as { kind: string }).kind, Object.keys(e.object as object).sort().join()])).to.deep.equal([
        ['ADDED', 'PartialObjectMetadata', 'apiVersion,kind,metadata'],
        ['MODIFIED', 'PartialObjectMetadata', 'apiVersion,kind,metadata'],
        ['DELETED', 'PartialObjectMetadata', 'apiVersion,kind,metadata'],
      ]);
      const refused = await clusterFetch(tc.cluster, `${CM}?watch=true`, { headers: { Accept: accept('PartialObjectMetadataList') } });
      expect(refused.status).to.equal(406);
      await refused.body?.cancel();
    });
  });

  describe('garbage collection', () => {
    async function ownerAndDependent(name: string, depExtra: Record<string, unknown> = {}) {
      const owner = await call('POST', CM, cm(`${name}-owner`));
      const uid = meta(owner).uid as string;
      await call('POST', CM, cm(`${name}-dep`, {
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: `${name}-owner`, uid, blockOwnerDeletion: true }], ...depExtra,
      }));
      return uid;
    }

    it('background: deletes dependents after the owner', async () => {
      await ownerAndDependent('bg');
      await call('DELETE', `${CM}/bg-owner`, { propagationPolicy: 'Background' });
      await eventually(async () => (await call('GET', `${CM}/bg-dep`)).status === 404);
    });

    it('foreground: the owner waits for blocking dependents', async () => {
      await ownerAndDependent('fg', { finalizers: ['example.com/slow'] });
      const del = await call('DELETE', `${CM}/fg-owner`, { propagationPolicy: 'Foreground' });
      expect(meta(del).finalizers).to.include('foregroundDeletion');
      await eventually(async () => meta(await call('GET', `${CM}/fg-dep`)).deletionTimestamp);
      expect((await call('GET', `${CM}/fg-owner`)).status).to.equal(200);
      await call('PATCH', `${CM}/fg-dep`, { metadata: { finalizers: null } }, { 'Content-Type': 'application/merge-patch+json' });
      await eventually(async () => (await call('GET', `${CM}/fg-owner`)).status === 404);
    });

    it('orphan: dependents stay, without the owner reference', async () => {
      await ownerAndDependent('or');
      await call('DELETE', `${CM}/or-owner`, { propagationPolicy: 'Orphan' });
      await eventually(async () => (await call('GET', `${CM}/or-owner`)).status === 404);
      const dep = await call('GET', `${CM}/or-dep`);
      expect(dep.status).to.equal(200);
      expect(meta(dep).ownerReferences).to.equal(undefined);
    });

    it('deletes a dependent whose owner uid does not exist, as a real cluster does', async () => {
      await call('POST', CM, cm('dangling', { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'whoever', uid: '00000000-0000-0000-0000-000000000000' }] }));
      await eventually(async () => (await call('GET', `${CM}/dangling`)).status === 404);
    });

    it('deleting a namespace deletes its content, then the namespace', async () => {
      await call('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'doomed' } });
      await call('POST', '/api/v1/namespaces/doomed/configmaps', cm('inside'));
      const del = await call('DELETE', '/api/v1/namespaces/doomed');
      expect((del.body.status as Record<string, unknown>)?.phase ?? (await call('GET', '/api/v1/namespaces/doomed')).body).to.satisfy((p: unknown) => p === 'Terminating' || typeof p === 'object');
      await eventually(async () => (await call('GET', '/api/v1/namespaces/doomed')).status === 404);
      expect((await call('GET', '/api/v1/namespaces/doomed/configmaps/inside')).status).to.equal(404);
    });
  });
});

describe('local cluster state persistence', function () {
  it('keeps objects across a restart and reports pods that were running as failed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lc-state-'));
    const logger = pino({ level: 'silent' });
    let cluster = await LocalCluster.start({ stateDir: join(dir, 'state'), workDir: join(dir, 'w1'), logger });
    const call = client(() => cluster);
    try {
      const created = await call('POST', CM, cm('kept'));
      await call('POST', '/api/v1/namespaces/default/pods', {
        apiVersion: 'v1', kind: 'Pod', metadata: { name: 'sleeper' },
        spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox', command: ['sleep', '30'] }] },
      });
      await eventually(async () => (((await call('GET', '/api/v1/namespaces/default/pods/sleeper')).body.status as Record<string, unknown>)?.phase === 'Running'));
      const rvBefore = Number(meta(await call('GET', CM)).resourceVersion);
      await cluster.stop();

      cluster = await LocalCluster.start({ stateDir: join(dir, 'state'), workDir: join(dir, 'w2'), logger });
      const kept = await call('GET', `${CM}/kept`);
      expect(kept.status).to.equal(200);
      expect(meta(kept).uid).to.equal(meta(created).uid);
      const after = await call('POST', CM, cm('new'));
      expect(Number(meta(after).resourceVersion)).to.be.greaterThan(rvBefore);
      const pod = await call('GET', '/api/v1/namespaces/default/pods/sleeper');
      const status = pod.body.status as { phase: string; containerStatuses: { state: { terminated?: { exitCode: number } } }[] };
      expect(status.phase).to.equal('Failed');
      expect(status.containerStatuses[0]!.state.terminated?.exitCode).to.equal(137);
    } finally {
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
