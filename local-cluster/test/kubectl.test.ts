// The real kubectl against the local cluster: every scenario of "How to verify
// with kubectl" in the requirements (design/local-cluster.md; tests are named by
// its numbers), asserting what a user sees on the terminal, plus the everyday
// commands around them (apply of Jobs, cascading delete, events, selectors,
// typed creates such as `create secret`, discovery after a CRD is deleted).
import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { parse as parseYaml } from 'yaml';
import { EXAMPLE_CRD, EXAMPLE_MEDIAJOB, eventually, startTestCluster, type TestCluster } from './support.js';

// ---- helpers ------------------------------------------------------------------

interface PrintedTable {
  header: string[];
  rows: Record<string, string>[];
}

/**
 * Parse kubectl's column output. kubectl pads columns with at least three
 * spaces, so a single space belongs to a header ("LAST SEEN") and every cell
 * starts where its header starts.
 */
function parseTable(text: string): PrintedTable {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const headerLine = lines[0] ?? '';
  const columns = [...headerLine.matchAll(/\S+(?: \S+)*/g)].map((m) => ({ name: m[0], start: m.index }));
  const rows = lines.slice(1).map((line) => {
    const row: Record<string, string> = {};
    columns.forEach((c, i) => {
      const end = columns[i + 1]?.start;
      row[c.name] = line.slice(c.start, end).trim();
    });
    return row;
  });
  return { header: columns.map((c) => c.name), rows };
}

const AGE = /^\d+s$/;
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

/** Resolve with the exit code once the process has ended (at once if it already has). */
function exitCode(proc: ChildProcess): Promise<number | null> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve(proc.exitCode);
  return new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
}

function job(name: string, script: string, extraSpec = '', labels = ''): string {
  return `apiVersion: batch/v1
kind: Job
metadata:
  name: ${name}
${labels}spec:
${extraSpec}  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox:1.36
          command: ["sh", "-c", ${JSON.stringify(script)}]
`;
}

function mediaJob(name: string, spec: string, labels = ''): string {
  return `apiVersion: media.example.com/v1
kind: MediaJob
metadata:
  name: ${name}
${labels}spec:
${spec}`;
}

// ---- custom resources ----------------------------------------------------------

describe('kubectl: a CRD and its custom resources', () => {
  let t: TestCluster;
  const streams: ChildProcess[] = [];
  let crdPath: string;
  let demoPath: string;

  before(async () => {
    t = await startTestCluster();
    crdPath = t.manifest('crd.yaml', EXAMPLE_CRD);
    demoPath = t.manifest('mediajob.yaml', EXAMPLE_MEDIAJOB);
  });

  after(async () => {
    for (const p of streams) p.kill();
    await t?.stop();
  });

  function stream(args: string[]): { proc: ChildProcess; output: () => string } {
    const s = t.kubectlStream(args);
    streams.push(s.proc);
    return s;
  }

  it('1. applies the CRD: created, then unchanged', async () => {
    const first = await t.kubectl(['apply', '-f', crdPath]);
    expect(first.stdout).to.equal('customresourcedefinition.apiextensions.k8s.io/mediajobs.media.example.com created\n');
    const again = await t.kubectl(['apply', '-f', crdPath]);
    expect(again.stdout).to.equal('customresourcedefinition.apiextensions.k8s.io/mediajobs.media.example.com unchanged\n');
  });

  it('2. applies a MediaJob: created, then unchanged', async () => {
    const first = await t.kubectl(['apply', '-f', demoPath]);
    expect(first.stdout).to.equal('mediajob.media.example.com/demo created\n');
    const again = await t.kubectl(['apply', '-f', demoPath]);
    expect(again.stdout).to.equal('mediajob.media.example.com/demo unchanged\n');
  });

  it('3. get prints the printer columns; -o wide adds INPUT, -A adds NAMESPACE, get all lists it', async () => {
    const plain = parseTable((await t.kubectl(['get', 'mediajobs'])).stdout);
    expect(plain.header).to.deep.equal(['NAME', 'PHASE', 'AGE']);
    expect(plain.rows).to.have.length(1);
    expect(plain.rows[0]).to.include({ NAME: 'demo', PHASE: '' });
    expect(plain.rows[0]!.AGE).to.match(AGE);

    const wide = parseTable((await t.kubectl(['get', 'mediajobs', '-o', 'wide'])).stdout);
    expect(wide.header).to.deep.equal(['NAME', 'PHASE', 'INPUT', 'AGE']);
    expect(wide.rows[0]).to.include({ NAME: 'demo', PHASE: '', INPUT: 'https://example.com/a.mp4' });

    const all = parseTable((await t.kubectl(['get', 'mj', '-A'])).stdout);
    expect(all.header).to.deep.equal(['NAMESPACE', 'NAME', 'PHASE', 'AGE']);
    expect(all.rows[0]).to.include({ NAMESPACE: 'default', NAME: 'demo' });

    const everything = await t.kubectl(['get', 'all']);
    expect(everything.stdout).to.match(/^mediajob\.media\.example\.com\/demo\s+\d+s$/m);
  });

  it('4. -o yaml shows the defaults, generation 1, uid, resourceVersion and last-applied-configuration', async () => {
    const { stdout } = await t.kubectl(['get', 'mediajob', 'demo', '-o', 'yaml']);
    expect(stdout).to.match(/^ {2}preset: fast$/m);
    expect(stdout).to.match(/^ {2}retries: 2$/m);
    expect(stdout).to.match(/^ {2}generation: 1$/m);
    const obj = parseYaml(stdout) as {
      metadata: { uid: string; resourceVersion: string; generation: number; annotations: Record<string, string> };
      spec: Record<string, unknown>;
    };
    expect(obj.spec).to.deep.equal({ input: 'https://example.com/a.mp4', preset: 'fast', retries: 2 });
    expect(obj.metadata.uid).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(obj.metadata.resourceVersion).to.match(/^\d+$/);
    const lastApplied = JSON.parse(obj.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']!) as unknown;
    expect(lastApplied).to.deep.equal({
      apiVersion: 'media.example.com/v1', kind: 'MediaJob',
      metadata: { annotations: {}, name: 'demo', namespace: 'default' },
      spec: { input: 'https://example.com/a.mp4' },
    });
  });

  it('5. describe shows the spec and no events', async () => {
    const { stdout } = await t.kubectl(['describe', 'mediajob', 'demo']);
    expect(stdout).to.match(/^Name:\s+demo$/m);
    expect(stdout).to.match(/^Kind:\s+MediaJob$/m);
    expect(stdout).to.match(/^Spec:\n\s+Input:\s+https:\/\/example\.com\/a\.mp4\n\s+Preset:\s+fast\n\s+Retries:\s+2$/m);
    expect(stdout).to.match(/^Events:\s+<none>$/m);
  });

  it('6. get -w sees a spec patch and a status patch as new rows and stays open', async () => {
    const w = stream(['get', 'mediajobs', '-w']);
    // Complete lines only: a row may arrive in more than one chunk.
    const rows = () => w.output().split('\n').slice(0, -1).filter((l) => l.startsWith('demo'));
    await eventually(() => rows().length === 1);
    expect(w.output()).to.match(/^NAME\s+PHASE\s+AGE\ndemo\s+\d+s\n/);

    const spec = await t.kubectl(['patch', 'mediajob', 'demo', '--type=merge', '-p', '{"spec":{"input":"b"}}']);
    expect(spec.stdout).to.equal('mediajob.media.example.com/demo patched\n');
    await eventually(() => rows().length === 2);
    expect(rows()[1]).to.match(/^demo\s+\d+s$/);
    expect((await t.kubectl(['get', 'mediajob', 'demo', '-o', 'jsonpath={.metadata.generation}'])).stdout).to.equal('2');

    const status = await t.kubectl(['patch', 'mediajob', 'demo', '--subresource=status', '--type=merge', '-p', '{"status":{"phase":"Running"}}']);
    expect(status.stdout).to.equal('mediajob.media.example.com/demo patched\n');
    await eventually(() => rows().length === 3);
    expect(rows()[2]).to.match(/^demo\s+Running\s+\d+s$/);
    expect((await t.kubectl(['get', 'mediajob', 'demo', '-o', 'jsonpath={.metadata.generation}'])).stdout).to.equal('2');

    const table = parseTable((await t.kubectl(['get', 'mediajobs', '-o', 'wide'])).stdout);
    expect(table.rows[0]).to.include({ NAME: 'demo', PHASE: 'Running', INPUT: 'b' });
    expect(w.proc.exitCode, w.output()).to.equal(null);
    expect(w.proc.signalCode).to.equal(null);
    w.proc.kill();
  });

  it('7. a status-only merge patch on the main resource is "patched (no change)"', async () => {
    const before = (await t.kubectl(['get', 'mediajob', 'demo', '-o', 'jsonpath={.metadata.resourceVersion}'])).stdout;
    const res = await t.kubectl(['patch', 'mediajob', 'demo', '--type=merge', '-p', '{"status":{"phase":"Done"}}']);
    expect(res.stdout).to.equal('mediajob.media.example.com/demo patched (no change)\n');
    const after = await t.kubectl(['get', 'mediajob', 'demo', '-o', 'jsonpath={.metadata.resourceVersion} {.status.phase}']);
    expect(after.stdout).to.equal(`${before} Running`);
  });

  it('2. re-applying an edited manifest is "configured"', async () => {
    const edited = t.manifest('mediajob.yaml', EXAMPLE_MEDIAJOB.replace('a.mp4', 'c.mp4'));
    const res = await t.kubectl(['apply', '-f', edited]);
    expect(res.stdout).to.equal('mediajob.media.example.com/demo configured\n');
    const got = await t.kubectl(['get', 'mediajob', 'demo', '-o', 'jsonpath={.spec.input} {.metadata.generation} {.status.phase}']);
    expect(got.stdout).to.equal('https://example.com/c.mp4 3 Running');
    expect((await t.kubectl(['apply', '-f', edited])).stdout).to.equal('mediajob.media.example.com/demo unchanged\n');
  });

  it('8. rejects an unsupported enum value (Invalid) and an unknown field (BadRequest, strict decoding)', async () => {
    const bad = t.manifest('bad.yaml', mediaJob('bad', '  input: x\n  preset: medium\n'));
    const invalid = await t.kubectl(['apply', '-f', bad], { allowFail: true });
    expect(invalid.code).to.equal(1);
    expect(invalid.stderr).to.equal('The MediaJob "bad" is invalid: spec.preset: Unsupported value: "medium": supported values: "fast", "slow"\n');

    const unknown = t.manifest('unknown.yaml', mediaJob('unknown', '  input: x\n  foo: 1\n'));
    const strict = await t.kubectl(['apply', '-f', unknown], { allowFail: true });
    expect(strict.code).to.equal(1);
    expect(strict.stderr).to.equal(
      `Error from server (BadRequest): error when creating "${unknown}": MediaJob in version "v1" cannot be handled as a MediaJob: strict decoding error: unknown field "spec.foo"\n`,
    );
    const none = await t.kubectl(['get', 'mediajobs', 'bad', 'unknown'], { allowFail: true });
    expect(none.stderr).to.include('mediajobs.media.example.com "bad" not found');
    expect(none.stderr).to.include('mediajobs.media.example.com "unknown" not found');
  });

  it('9. create of an existing object is AlreadyExists', async () => {
    const res = await t.kubectl(['create', '-f', demoPath], { allowFail: true });
    expect(res.code).to.equal(1);
    expect(res.stderr).to.equal(
      `Error from server (AlreadyExists): error when creating "${demoPath}": mediajobs.media.example.com "demo" already exists\n`,
    );
  });

  it('11. explain shows the schema: required and enum', async () => {
    const { stdout } = await t.kubectl(['explain', 'mediajob.spec']);
    expect(stdout).to.match(/^KIND:\s+MediaJob$/m);
    expect(stdout).to.match(/^VERSION:\s+v1$/m);
    expect(stdout).to.match(/^ {2}input\s+<string> -required-\n\s+The input URL\.$/m);
    expect(stdout).to.match(/^ {2}preset\s+<string>\n {2}enum: fast, slow$/m);
    expect(stdout).to.match(/^ {2}retries\s+<integer>$/m);
  });

  it('selects by label with -l (=, !=, in, exists)', async () => {
    await t.kubectl(['apply', '-f', t.manifest('gold.yaml', mediaJob('gold', '  input: g\n', '  labels:\n    tier: gold\n'))]);
    await t.kubectl(['apply', '-f', t.manifest('silver.yaml', mediaJob('silver', '  input: s\n', '  labels:\n    tier: silver\n'))]);
    const names = async (selector: string) =>
      (await t.kubectl(['get', 'mediajobs', '-l', selector, '-o', 'name'])).stdout.split('\n').filter(Boolean);
    expect(await names('tier=gold')).to.deep.equal(['mediajob.media.example.com/gold']);
    expect(await names('tier!=gold')).to.deep.equal(['mediajob.media.example.com/demo', 'mediajob.media.example.com/silver']);
    expect(await names('tier in (gold,silver)')).to.deep.equal(['mediajob.media.example.com/gold', 'mediajob.media.example.com/silver']);
    expect(await names('!tier')).to.deep.equal(['mediajob.media.example.com/demo']);
    const none = await t.kubectl(['get', 'mediajobs', '-l', 'tier=bronze']);
    expect(none.stdout).to.equal('');
    expect(none.stderr).to.equal('No resources found in default namespace.\n');
    const table = parseTable((await t.kubectl(['get', 'mj', '-l', 'tier', '--show-labels'])).stdout);
    expect(table.header).to.deep.equal(['NAME', 'PHASE', 'AGE', 'LABELS']);
    expect(table.rows.map((r) => [r.NAME, r.LABELS])).to.deep.equal([['gold', 'tier=gold'], ['silver', 'tier=silver']]);
  });

  it('12. delete blocks while a finalizer remains and finishes when it is removed', async () => {
    await t.kubectl(['patch', 'mediajob', 'demo', '--type=merge', '-p', '{"metadata":{"finalizers":["media.example.com/hold"]}}']);
    const del = stream(['delete', 'mediajob', 'demo']);
    await eventually(() => del.output().includes('mediajob.media.example.com "demo" deleted\n'));

    const held = await t.kubectl(['get', 'mediajob', 'demo', '-o', 'jsonpath={.metadata.deletionTimestamp} {.metadata.finalizers}']);
    const [deletionTimestamp, finalizers] = held.stdout.split(' ');
    expect(deletionTimestamp).to.match(RFC3339);
    expect(finalizers).to.equal('["media.example.com/hold"]');
    expect(del.proc.exitCode, 'kubectl delete must wait for the finalizer').to.equal(null);

    const removed = await t.kubectl(['patch', 'mediajob', 'demo', '--type=json', '-p', '[{"op":"remove","path":"/metadata/finalizers"}]']);
    expect(removed.stdout).to.equal('mediajob.media.example.com/demo patched\n');
    expect(await exitCode(del.proc)).to.equal(0);
    expect(del.output()).to.equal('mediajob.media.example.com "demo" deleted\n');

    const gone = await t.kubectl(['get', 'mediajob', 'demo'], { allowFail: true });
    expect(gone.code).to.equal(1);
    expect(gone.stderr).to.equal('Error from server (NotFound): mediajobs.media.example.com "demo" not found\n');
  });

  it('api-resources lists mediajobs with the short name mj', async () => {
    const table = parseTable((await t.kubectl(['api-resources', '--api-group=media.example.com'])).stdout);
    expect(table.header).to.deep.equal(['NAME', 'SHORTNAMES', 'APIVERSION', 'NAMESPACED', 'KIND']);
    expect(table.rows).to.deep.equal([
      { NAME: 'mediajobs', SHORTNAMES: 'mj', APIVERSION: 'media.example.com/v1', NAMESPACED: 'true', KIND: 'MediaJob' },
    ]);
  });

  it('deleting the CRD takes its resources and their instances away', async () => {
    const del = await t.kubectl(['delete', 'crd', 'mediajobs.media.example.com']);
    expect(del.stdout).to.equal('customresourcedefinition.apiextensions.k8s.io "mediajobs.media.example.com" deleted\n');

    // With the discovery cache still naming mj, kubectl asks for the list and
    // gets the 404 a real apiserver sends for a path nobody serves
    // (kubernetes/kubernetes#113980).
    const stale = await t.kubectl(['get', 'mj'], { allowFail: true });
    expect(stale.code).to.equal(1);
    expect(stale.stderr).to.equal(
      'Error from server (NotFound): Unable to list "media.example.com/v1, Resource=mediajobs": the server could not find the requested resource (get mediajobs.media.example.com)\n',
    );

    // api-resources re-reads discovery (and refreshes the cache); then the type is unknown.
    const resources = await t.kubectl(['api-resources']);
    expect(resources.stdout).not.to.include('mediajobs');
    const res = await t.kubectl(['get', 'mj'], { allowFail: true });
    expect(res.code).to.equal(1);
    expect(res.stderr).to.equal('error: the server doesn\'t have a resource type "mj"\n');

    // A new CRD of the same name starts empty: the old instances were deleted with it.
    await t.kubectl(['apply', '-f', crdPath]);
    const empty = await t.kubectl(['get', 'mj', '-A']);
    expect(empty.stdout).to.equal('');
    expect(empty.stderr).to.equal('No resources found\n');
  });
});

// ---- Jobs ----------------------------------------------------------------------------

describe('kubectl: Jobs run by the local kubelet', () => {
  let t: TestCluster;

  before(async () => {
    t = await startTestCluster();
  });

  after(async () => {
    await t?.stop();
  });

  it('10. get jobs shows Complete 1/1; wait --for=condition=complete; logs job/<name> prints stdout', async () => {
    const created = await t.kubectl(['apply', '-f', t.manifest('hello.yaml', job('hello', 'echo hello from job; echo line two'))]);
    expect(created.stdout).to.equal('job.batch/hello created\n');
    const waited = await t.kubectl(['wait', '--for=condition=complete', 'job/hello', '--timeout=30s']);
    expect(waited.stdout).to.equal('job.batch/hello condition met\n');

    const table = parseTable((await t.kubectl(['get', 'jobs'])).stdout);
    expect(table.header).to.deep.equal(['NAME', 'STATUS', 'COMPLETIONS', 'DURATION', 'AGE']);
    expect(table.rows).to.have.length(1);
    expect(table.rows[0]).to.include({ NAME: 'hello', STATUS: 'Complete', COMPLETIONS: '1/1' });
    expect(table.rows[0]!.DURATION).to.match(AGE);
    expect(table.rows[0]!.AGE).to.match(AGE);

    const wide = parseTable((await t.kubectl(['get', 'jobs', '-o', 'wide'])).stdout);
    expect(wide.header).to.deep.equal(['NAME', 'STATUS', 'COMPLETIONS', 'DURATION', 'AGE', 'CONTAINERS', 'IMAGES', 'SELECTOR']);
    expect(wide.rows[0]).to.include({ CONTAINERS: 'main', IMAGES: 'busybox:1.36' });
    expect(wide.rows[0]!.SELECTOR).to.match(/^batch\.kubernetes\.io\/controller-uid=[0-9a-f-]{36}$/);

    const logs = await t.kubectl(['logs', 'job/hello']);
    expect(logs.stdout).to.equal('hello from job\nline two\n');

    const pods = parseTable((await t.kubectl(['get', 'pods', '-l', 'job-name=hello'])).stdout);
    expect(pods.header).to.deep.equal(['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE']);
    expect(pods.rows).to.have.length(1);
    expect(pods.rows[0]!.NAME).to.match(/^hello-[a-z0-9]{5}$/);
    expect(pods.rows[0]).to.include({ READY: '0/1', STATUS: 'Completed', RESTARTS: '0' });
  });

  it('get events --field-selector involvedObject.name shows the Job controller events', async () => {
    const events = await eventually(async () => {
      const { stdout } = await t.kubectl(['get', 'events', '--field-selector', 'involvedObject.name=hello']);
      const table = parseTable(stdout);
      return table.rows.some((r) => r.REASON === 'Completed') ? table : undefined;
    });
    expect(events.header).to.deep.equal(['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', 'MESSAGE']);
    const byReason = Object.fromEntries(events.rows.map((r) => [r.REASON, r]));
    expect(byReason.SuccessfulCreate).to.include({ TYPE: 'Normal', OBJECT: 'job/hello' });
    expect(byReason.SuccessfulCreate!.MESSAGE).to.match(/^Created pod: hello-[a-z0-9]{5}$/);
    expect(byReason.Completed).to.include({ TYPE: 'Normal', OBJECT: 'job/hello', MESSAGE: 'Job completed' });

    const none = await t.kubectl(['get', 'events', '--field-selector', 'involvedObject.name=nothing']);
    expect(none.stderr).to.equal('No resources found in default namespace.\n');

    const described = await t.kubectl(['describe', 'job', 'hello']);
    expect(described.stdout).to.match(/^Pods Statuses:\s+0 Active \(0 Ready\) \/ 1 Succeeded \/ 0 Failed$/m);
    expect(described.stdout).to.match(/^ {2}Normal {2}SuccessfulCreate .*Created pod: hello-[a-z0-9]{5}$/m);
  });

  it('10. a failing command with backoffLimit 1 ends Failed 0/1 with 2 failed pods (BackoffLimitExceeded)', async () => {
    await t.kubectl(['apply', '-f', t.manifest('failer.yaml', job('failer', 'echo boom; exit 3', '  backoffLimit: 1\n'))]);
    const waited = await t.kubectl(['wait', '--for=condition=failed', 'job/failer', '--timeout=30s']);
    expect(waited.stdout).to.equal('job.batch/failer condition met\n');
    const table = parseTable((await t.kubectl(['get', 'job', 'failer'])).stdout);
    expect(table.rows[0]).to.include({ NAME: 'failer', STATUS: 'Failed', COMPLETIONS: '0/1' });
    const status = await t.kubectl(['get', 'job', 'failer', '-o',
      'jsonpath={.status.failed} {.status.conditions[?(@.type=="Failed")].reason} {.status.conditions[?(@.type=="Failed")].message}']);
    expect(status.stdout).to.equal('2 BackoffLimitExceeded Job has reached the specified backoff limit');
    const pods = parseTable((await t.kubectl(['get', 'pods', '-l', 'job-name=failer'])).stdout);
    expect(pods.rows.map((r) => r.STATUS)).to.deep.equal(['Error', 'Error']);
  });

  it('apply of a Job: unchanged when re-applied as is, configured after an edit of a mutable field (strategic merge)', async () => {
    const path = t.manifest('sleeper.yaml', job('sleeper', 'echo ok', '  backoffLimit: 2\n'));
    expect((await t.kubectl(['apply', '-f', path])).stdout).to.equal('job.batch/sleeper created\n');
    expect((await t.kubectl(['apply', '-f', path])).stdout).to.equal('job.batch/sleeper unchanged\n');

    const edited = t.manifest('sleeper.yaml', job('sleeper', 'echo ok', '  backoffLimit: 4\n', '  labels:\n    team: media\n'));
    const res = await t.kubectl(['apply', '-f', edited, '-v=8']);
    expect(res.stdout).to.equal('job.batch/sleeper configured\n');
    // kubectl's request log: a strategic merge patch carrying only the edited fields
    // (no containers list: the OpenAPI schema gives it the merge key "name").
    expect(res.stderr).to.match(/PATCH https:\/\/\S+\/apis\/batch\/v1\/namespaces\/default\/jobs\/sleeper\?fieldManager=kubectl-client-side-apply&fieldValidation=Strict\n/);
    expect(res.stderr).to.include('Content-Type: application/strategic-merge-patch+json');
    expect(res.stderr).to.include('\\"labels\\":{\\"team\\":\\"media\\"}},\\"spec\\":{\\"backoffLimit\\":4}}"');
    const got = await t.kubectl(['get', 'job', 'sleeper', '-o', 'jsonpath={.spec.backoffLimit} {.metadata.labels.team} {.metadata.generation}']);
    expect(got.stdout).to.equal('4 media 2');
    expect((await t.kubectl(['apply', '-f', edited])).stdout).to.equal('job.batch/sleeper unchanged\n');

    // The template is immutable: the same path reports the apiserver's Invalid error.
    const immutable = await t.kubectl(['apply', '-f', t.manifest('sleeper.yaml', job('sleeper', 'echo changed', '  backoffLimit: 4\n', '  labels:\n    team: media\n'))], { allowFail: true });
    expect(immutable.code).to.equal(1);
    expect(immutable.stderr).to.match(/^The Job "sleeper" is invalid: spec\.template: Invalid value: .*: field is immutable/);
  });

  it('delete job (kubectl sends propagationPolicy Background) removes its pods', async () => {
    const before = (await t.kubectl(['get', 'pods', '-l', 'job-name=hello', '-o', 'name'])).stdout;
    expect(before).to.match(/^pod\/hello-[a-z0-9]{5}\n$/);
    const res = await t.kubectl(['delete', 'job', 'hello']);
    expect(res.stdout).to.equal('job.batch "hello" deleted\n');
    expect(res.stderr).to.equal('');
    await eventually(async () => (await t.kubectl(['get', 'pods', '-l', 'job-name=hello', '-o', 'name'])).stdout === '');
    const gone = await t.kubectl(['get', 'job', 'hello'], { allowFail: true });
    expect(gone.stderr).to.equal('Error from server (NotFound): jobs.batch "hello" not found\n');
  });
});

// ---- secrets, namespaces, leases --------------------------------------------------------

describe('kubectl: secrets, namespaces and leases', () => {
  let t: TestCluster;

  before(async () => {
    t = await startTestCluster();
  });

  after(async () => {
    await t?.stop();
  });

  it('create secret generic, then read it back with -o jsonpath', async () => {
    const created = await t.kubectl(['create', 'secret', 'generic', 'creds', '--from-literal=password=hunter2', '--from-literal=user=admin']);
    expect(created.stdout).to.equal('secret/creds created\n');
    const password = await t.kubectl(['get', 'secret', 'creds', '-o', 'jsonpath={.data.password}']);
    expect(password.stdout).to.equal(Buffer.from('hunter2').toString('base64'));
    // kubectl sends the Secret as protobuf; what the server stored is what JSON would have given.
    const stored = parseYaml((await t.kubectl(['get', 'secret', 'creds', '-o', 'yaml'])).stdout) as Record<string, Record<string, unknown>>;
    expect(Object.keys(stored.metadata!).sort()).to.deep.equal(['creationTimestamp', 'name', 'namespace', 'resourceVersion', 'uid']);
    expect(stored.data).to.deep.equal({ password: 'aHVudGVyMg==', user: 'YWRtaW4=' });
    expect(stored.type).to.equal('Opaque');
    const table = parseTable((await t.kubectl(['get', 'secret', 'creds'])).stdout);
    expect(table.header).to.deep.equal(['NAME', 'TYPE', 'DATA', 'AGE']);
    expect(table.rows[0]).to.include({ NAME: 'creds', TYPE: 'Opaque', DATA: '2' });
    const again = await t.kubectl(['create', 'secret', 'generic', 'creds', '--from-literal=a=b'], { allowFail: true });
    expect(again.stderr).to.equal('error: failed to create secret secrets "creds" already exists\n');
  });

  it('create namespace, configmap and serviceaccount', async () => {
    expect((await t.kubectl(['create', 'namespace', 'media'])).stdout).to.equal('namespace/media created\n');
    const ns = await t.kubectl(['get', 'namespace', 'media', '-o', 'jsonpath={.status.phase} {.spec.finalizers} {.metadata.labels}']);
    expect(ns.stdout).to.equal('Active ["kubernetes"] {"kubernetes.io/metadata.name":"media"}');
    const cm = await t.kubectl(['create', 'configmap', 'settings', '-n', 'media', '--from-literal=level=debug']);
    expect(cm.stdout).to.equal('configmap/settings created\n');
    expect((await t.kubectl(['get', 'configmap', 'settings', '-n', 'media', '-o', 'jsonpath={.data.level}'])).stdout).to.equal('debug');
    expect((await t.kubectl(['create', 'serviceaccount', 'worker', '-n', 'media'])).stdout).to.equal('serviceaccount/worker created\n');
    const sa = parseTable((await t.kubectl(['get', 'sa', '-n', 'media'])).stdout);
    expect(sa.header).to.deep.equal(['NAME', 'SECRETS', 'AGE']);
    expect(sa.rows[0]).to.include({ NAME: 'worker', SECRETS: '0' });
  });

  it('13. get lease -n <ns> prints NAME HOLDER AGE', async () => {
    const lease = `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: media-operator
  namespace: media
spec:
  holderIdentity: operator-7d9f
  leaseDurationSeconds: 15
  acquireTime: "2026-01-01T00:00:00.000000Z"
  renewTime: "2026-01-01T00:00:05.000000Z"
`;
    expect((await t.kubectl(['apply', '-f', t.manifest('lease.yaml', lease)])).stdout).to.equal('lease.coordination.k8s.io/media-operator created\n');
    const table = parseTable((await t.kubectl(['get', 'lease', '-n', 'media'])).stdout);
    expect(table.header).to.deep.equal(['NAME', 'HOLDER', 'AGE']);
    expect(table.rows).to.have.length(1);
    expect(table.rows[0]).to.include({ NAME: 'media-operator', HOLDER: 'operator-7d9f' });
    expect(table.rows[0]!.AGE).to.match(AGE);
  });
});
