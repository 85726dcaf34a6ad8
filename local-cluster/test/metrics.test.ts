// GET /metrics: kube-apiserver's apiserver_request_total and
// apiserver_storage_objects, read with the real kubectl (get --raw), raw
// HTTPS and client-node. A known sequence of requests shows as exactly those
// series, with kube-apiserver's label values and the HTTP codes; the text
// passes a strict parser of the text format 0.0.4 (and promtool when one is
// on the PATH or in PROMTOOL); system:anonymous is refused as by RBAC.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { expect } from 'chai';
import * as k8s from '@kubernetes/client-node';
import { EXAMPLE_CRD, apiError, clusterFetch, eventually, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const FLOAT = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Inf|NaN)$/;

/**
 * A strict reader of the Prometheus text format 0.0.4 (what
 * prometheus/common/expfmt's TextParser accepts, and a little stricter):
 * every line ends with a line feed; HELP and TYPE at most once per family
 * and before its samples; a family's samples together; label values with
 * only the \\, \" and \n escapes; no sample twice. Throws on the first fault.
 */
function parseExposition(text: string): { types: Map<string, string>; samples: Sample[] } {
  if (text !== '' && !text.endsWith('\n')) throw new Error('the text does not end with a line feed');
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const samples: Sample[] = [];
  const seen = new Set<string>();
  const done = new Set<string>();
  let current: string | undefined;
  const enter = (family: string, lineNo: number) => {
    if (family === current) return;
    if (done.has(family)) throw new Error(`line ${lineNo}: family ${family} appears again after another family`);
    if (current) done.add(current);
    current = family;
  };
  text.split('\n').slice(0, -1).forEach((line, i) => {
    const lineNo = i + 1;
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (!m) return; // a comment
      const [, kind, name, rest = ''] = m;
      if (!METRIC_NAME.test(name!)) throw new Error(`line ${lineNo}: bad metric name ${name}`);
      enter(name!, lineNo);
      if (kind === 'HELP') {
        if (helps.has(name!)) throw new Error(`line ${lineNo}: second HELP for ${name}`);
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) throw new Error(`line ${lineNo}: bad escape in HELP`);
        helps.add(name!);
      } else {
        if (types.has(name!)) throw new Error(`line ${lineNo}: second TYPE for ${name}`);
        if (samples.some((s) => s.name === name)) throw new Error(`line ${lineNo}: TYPE for ${name} after its samples`);
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest)) throw new Error(`line ${lineNo}: bad type ${rest}`);
        types.set(name!, rest);
      }
      return;
    }
    const sample = parseSample(line, lineNo);
    enter(sample.name, lineNo);
    const key = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`;
    if (seen.has(key)) throw new Error(`line ${lineNo}: the same series twice: ${line}`);
    seen.add(key);
    samples.push(sample);
  });
  return { types, samples };
}

function parseSample(line: string, lineNo: number): Sample {
  const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
  if (!nameMatch) throw new Error(`line ${lineNo}: no metric name: ${line}`);
  const name = nameMatch[0];
  let i = name.length;
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    while (line[i] !== '}') {
      const eq = line.indexOf('=', i);
      if (eq < 0) throw new Error(`line ${lineNo}: label without =`);
      const label = line.slice(i, eq).trim();
      if (!LABEL_NAME.test(label)) throw new Error(`line ${lineNo}: bad label name ${label}`);
      if (label in labels) throw new Error(`line ${lineNo}: label ${label} twice`);
      if (line[eq + 1] !== '"') throw new Error(`line ${lineNo}: label value not quoted`);
      let value = '';
      let j = eq + 2;
      for (;;) {
        const ch = line[j];
        if (ch === undefined) throw new Error(`line ${lineNo}: unterminated label value`);
        if (ch === '"') break;
        if (ch === '\\') {
          const next = line[j + 1];
          if (next === '\\') value += '\\';
          else if (next === '"') value += '"';
          else if (next === 'n') value += '\n';
          else throw new Error(`line ${lineNo}: bad escape \\${next ?? ''}`);
          j += 2;
          continue;
        }
        value += ch;
        j++;
      }
      labels[label] = value;
      i = j + 1;
      if (line[i] === ',') i++;
      else if (line[i] !== '}') throw new Error(`line ${lineNo}: expected , or } after a label`);
    }
    i++;
  }
  if (line[i] !== ' ') throw new Error(`line ${lineNo}: no space before the value`);
  const fields = line.slice(i + 1).split(' ');
  if (fields.length > 2 || !FLOAT.test(fields[0]!)) throw new Error(`line ${lineNo}: bad value ${fields.join(' ')}`);
  if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new Error(`line ${lineNo}: bad timestamp ${fields[1]}`);
  const v = fields[0]!;
  const value = /Inf$/.test(v) ? (v.startsWith('-') ? -Infinity : Infinity) : Number(v);
  return { name, labels, value };
}

/** promtool from PROMTOOL or the PATH, if this machine has one. */
function promtool(): string | undefined {
  if (process.env.PROMTOOL) return process.env.PROMTOOL;
  return (process.env.PATH ?? '').split(delimiter).map((d) => join(d, 'promtool')).find((p) => existsSync(p));
}

const REQUEST_LABELS = ['code', 'component', 'dry_run', 'group', 'resource', 'scope', 'subresource', 'verb', 'version'];

/** The apiserver_request_total samples of a resource, as "VERB code scope[ subresource]" → count. */
function requestsOf(samples: Sample[], resource: string, extra: (l: Record<string, string>) => boolean = () => true): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) {
    if (s.name !== 'apiserver_request_total' || s.labels.resource !== resource || !extra(s.labels)) continue;
    const l = s.labels;
    out[`${l.verb} ${l.code} ${l.scope}${l.subresource ? ` ${l.subresource}` : ''}`] = s.value;
  }
  return out;
}

describe('local cluster: GET /metrics (apiserver_request_total, apiserver_storage_objects)', function () {
  this.timeout(30_000);
  let tc: TestCluster;
  let core: k8s.CoreV1Api;

  const scrape = async (): Promise<{ text: string; samples: Sample[]; types: Map<string, string> }> => {
    const res = await clusterFetch(tc.cluster, '/metrics');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('text/plain; version=0.0.4; charset=utf-8');
    const text = await res.text();
    return { text, ...parseExposition(text) };
  };
  const postConfigMap = (ns: string, name: string, query = '') => clusterFetch(tc.cluster, `/api/v1/namespaces/${ns}/configmaps${query}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name }, data: { a: '1' } }),
  });

  before(async () => {
    tc = await startTestCluster();
    core = kubeConfigFor(tc.cluster).makeApiClient(k8s.CoreV1Api);
  });
  after(async () => tc?.stop());

  it('counts a known sequence of requests with their codes, and the objects stored, read with kubectl get --raw', async () => {
    const ns = 'metrics-seq';
    await core.createNamespace({ body: { metadata: { name: ns } } });
    tc.cluster.resetRequestCounts();

    for (const name of ['cm-1', 'cm-2', 'cm-3']) await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name }, data: { a: '1' } } });
    expect((await apiError(core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cm-1' } } }))).code).to.equal(409);
    expect((await apiError(core.readNamespacedConfigMap({ namespace: ns, name: 'missing' }))).code).to.equal(404);
    const listed = await tc.kubectl(['get', 'configmaps', '-n', ns, '-o', 'name']);
    expect(listed.stdout.trim().split('\n')).to.deep.equal(['configmap/cm-1', 'configmap/cm-2', 'configmap/cm-3']);

    // A watch is counted when it ends, as kube-apiserver counts after its handler returns.
    const watch = await clusterFetch(tc.cluster, `/api/v1/namespaces/${ns}/configmaps?watch=true&timeoutSeconds=1`);
    expect(watch.status).to.equal(200);
    expect(requestsOf((await scrape()).samples, 'configmaps', (l) => l.verb === 'WATCH')).to.deep.equal({});
    await watch.text();

    const manifest = tc.manifest('cm-1.yaml', `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-1\n  namespace: ${ns}\ndata:\n  b: "2"\n`);
    await tc.kubectl(['apply', '--server-side', '-f', manifest]);
    await core.deleteNamespacedConfigMap({ namespace: ns, name: 'cm-3' });

    const raw = await tc.kubectl(['get', '--raw', '/metrics']);
    const { samples, types } = parseExposition(raw.stdout);
    expect(types.get('apiserver_request_total')).to.equal('counter');
    expect(types.get('apiserver_storage_objects')).to.equal('gauge');
    expect(requestsOf(samples, 'configmaps')).to.deep.equal({
      'POST 201 resource': 3, // the creates
      'POST 409 resource': 1, // the duplicate create
      'GET 404 resource': 1, // the get of a missing object
      'LIST 200 namespace': 1, // kubectl get
      'WATCH 200 namespace': 1, // the watch, once it ended
      'APPLY 200 resource': 1, // kubectl apply --server-side
      'DELETE 200 resource': 1, // the delete
    });
    const create = samples.find((s) => s.name === 'apiserver_request_total' && s.labels.resource === 'configmaps' && s.labels.code === '201')!;
    expect(create.labels).to.deep.equal({
      code: '201', component: 'apiserver', dry_run: '', group: '', resource: 'configmaps', scope: 'resource', subresource: '', verb: 'POST', version: 'v1',
    });
    for (const s of samples.filter((x) => x.name === 'apiserver_request_total')) expect(Object.keys(s.labels)).to.deep.equal(REQUEST_LABELS);
    // kubectl's aggregated discovery is counted as kube-apiserver's discovery handler counts it.
    expect(samples.some((s) => s.name === 'apiserver_request_total' && s.labels.subresource === 'apis' && s.labels.verb === 'GET'
      && s.labels.component === 'apiserver' && s.labels.resource === '' && s.labels.code === '200')).to.equal(true);

    const stored = tc.cluster.api.listStored(tc.cluster.api.resource('', 'v1', 'configmaps')!).length;
    expect(stored).to.equal(2);
    expect(samples.find((s) => s.name === 'apiserver_storage_objects' && s.labels.resource === 'configmaps')?.value).to.equal(stored);
    expect(samples.find((s) => s.name === 'apiserver_storage_objects' && s.labels.resource === 'namespaces')?.value)
      .to.equal(tc.cluster.api.listStored(tc.cluster.api.resource('', 'v1', 'namespaces')!).length);
    expect(samples.find((s) => s.name === 'apiserver_storage_objects' && s.labels.resource === 'jobs.batch')?.value).to.equal(0);
  });

  it('labels a custom resource with its group and version, and counts it stored as plural.group', async () => {
    await tc.kubectl(['apply', '-f', tc.manifest('crd.yaml', EXAMPLE_CRD)]);
    await eventually(async () => (await clusterFetch(tc.cluster, '/apis/media.example.com/v1/mediajobs')).status === 200);
    tc.cluster.resetRequestCounts();
    const custom = new k8s.KubeConfig();
    custom.loadFromFile(tc.cluster.kubeconfigPath);
    const objects = custom.makeApiClient(k8s.CustomObjectsApi);
    await objects.createNamespacedCustomObject({
      group: 'media.example.com', version: 'v1', namespace: 'default', plural: 'mediajobs',
      body: { apiVersion: 'media.example.com/v1', kind: 'MediaJob', metadata: { name: 'mj-1' }, spec: { input: 'a.mp4' } },
    });
    await objects.listCustomObjectForAllNamespaces({ group: 'media.example.com', version: 'v1', plural: 'mediajobs' });
    await objects.patchNamespacedCustomObjectStatus({
      group: 'media.example.com', version: 'v1', namespace: 'default', plural: 'mediajobs', name: 'mj-1', body: { status: { phase: 'Running' } },
    }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));

    const { samples } = await scrape();
    const mine = samples.filter((s) => s.name === 'apiserver_request_total' && s.labels.resource === 'mediajobs');
    expect(mine.map((s) => [s.labels.verb, s.labels.code, s.labels.scope, s.labels.subresource, s.labels.group, s.labels.version, s.value])).to.have.deep.members([
      ['POST', '201', 'resource', '', 'media.example.com', 'v1', 1],
      ['LIST', '200', 'cluster', '', 'media.example.com', 'v1', 1], // across all namespaces
      ['PATCH', '200', 'resource', 'status', 'media.example.com', 'v1', 1],
    ]);
    expect(samples.find((s) => s.name === 'apiserver_storage_objects' && s.labels.resource === 'mediajobs.media.example.com')?.value).to.equal(1);
  });

  it('counts what the write throttle turns away with 429, which requestCounts() leaves out', async () => {
    tc.cluster.resetRequestCounts();
    tc.cluster.throttleWrites(1);
    try {
      expect((await postConfigMap('default', 't1')).status).to.equal(201);
      expect((await postConfigMap('default', 't2')).status).to.equal(429);
    } finally {
      tc.cluster.throttleWrites(undefined);
    }
    expect(requestsOf((await scrape()).samples, 'configmaps')).to.deep.equal({ 'POST 201 resource': 1, 'POST 429 resource': 1 });
    expect(tc.cluster.requestCounts()).to.deep.equal({ 'create configmaps': 1, 'get nonresource': 1 });
  });

  it('takes dry_run, WATCH, CONNECT and the non-resource labels from the request as kube-apiserver does', async () => {
    tc.cluster.resetRequestCounts();
    const dry = await postConfigMap('default', 'dry', '?dryRun=All');
    const invalid = await postConfigMap('default', 'dry2', '?dryRun=Nope');
    await clusterFetch(tc.cluster, '/healthz').then((r) => r.text());
    await clusterFetch(tc.cluster, '/version').then((r) => r.text()); // not instrumented in kube-apiserver
    await clusterFetch(tc.cluster, '/api/v1/namespaces/default/configmaps/nothing/nosuch').then((r) => r.text()); // no route: not counted
    await clusterFetch(tc.cluster, '/api/v1/namespaces/default/pods/nopod/log').then((r) => r.text());
    await clusterFetch(tc.cluster, '/api/v1/pods?watch=1&timeoutSeconds=0').then((r) => r.text());

    const { samples } = await scrape();
    const all = samples.filter((s) => s.name === 'apiserver_request_total').map((s) => ({ ...s.labels, value: String(s.value) }));
    const base = { component: 'apiserver', group: '', version: 'v1', subresource: '', value: '1' };
    expect(all).to.have.deep.members([
      { ...base, code: String(dry.status), dry_run: 'All', resource: 'configmaps', scope: 'resource', verb: 'POST' },
      { ...base, code: String(invalid.status), dry_run: 'invalid', resource: 'configmaps', scope: 'resource', verb: 'POST' },
      { ...base, code: '404', dry_run: '', resource: 'pods', scope: 'resource', subresource: 'log', verb: 'CONNECT' },
      { ...base, code: '200', dry_run: '', resource: 'pods', scope: 'cluster', verb: 'WATCH' },
      { code: '200', component: '', dry_run: '', group: '', version: '', resource: '', scope: '', subresource: '/healthz', verb: 'GET', value: '1' },
    ]);
  });

  it('refuses system:anonymous as RBAC does, and a token it did not issue', async () => {
    const anonymous = await clusterFetch(tc.cluster, '/metrics', {}, null);
    expect(anonymous.status).to.equal(403);
    expect(await anonymous.json()).to.deep.equal({
      kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
      message: 'forbidden: User "system:anonymous" cannot get path "/metrics"', reason: 'Forbidden', details: {}, code: 403,
    });
    const stranger = await clusterFetch(tc.cluster, '/metrics', {}, 'not-a-token');
    expect(stranger.status).to.equal(401);
    expect(((await stranger.json()) as { reason: string }).reason).to.equal('Unauthorized');
  });

  it('starts the request counter over on an apiserver restart, where requestCounts() keeps counting', async () => {
    tc.cluster.resetRequestCounts();
    expect((await postConfigMap('default', 'before-restart')).status).to.equal(201);
    await tc.cluster.restartApiServer(10);
    expect(requestsOf((await scrape()).samples, 'configmaps')).to.deep.equal({});
    expect(tc.cluster.requestCounts()['create configmaps']).to.equal(1);
  });

  it('serves text that promtool check metrics accepts, when promtool is here', async function () {
    const tool = promtool();
    if (!tool) this.skip();
    await postConfigMap('default', `quoted-${Date.now()}`);
    const { text } = await scrape();
    const result = await new Promise<{ code: number; out: string }>((resolve) => {
      const child = execFile(tool!, ['check', 'metrics'], (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, out: stdout + stderr }));
      child.stdin!.end(text);
    });
    expect(result, result.out).to.deep.include({ code: 0 });
  });
});
