import { expect } from 'chai';
import { formatLabelSelector, humanDuration, toTable } from '../src/table.js';
import type { KubeObject, PrinterColumn, ResourceType } from '../src/types.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const NOW = new Date('2026-01-10T12:00:00Z');
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** An RFC 3339 timestamp `ms` before NOW. */
function ago(ms: number): string {
  return new Date(NOW.getTime() - ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

function builtin(group: string, kind: string, plural: string): ResourceType {
  return {
    group, version: 'v1', kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), namespaced: true,
    shortNames: [], categories: [], statusSubresource: false, builtin: true,
  };
}

function customResource(printerColumns?: PrinterColumn[]): ResourceType {
  return {
    group: 'mediajobs.io', version: 'v1alpha1', kind: 'MediaJob', listKind: 'MediaJobList', plural: 'mediajobs',
    singular: 'mediajob', namespaced: true, shortNames: [], categories: [], statusSubresource: true, builtin: false,
    printerColumns,
  };
}

function object(kind: string, name: string, fields: Json = {}, metadata: Json = {}): KubeObject {
  return { apiVersion: 'v1', kind, metadata: { name, namespace: 'default', creationTimestamp: ago(5 * SECOND), ...metadata }, ...fields };
}

function table(rt: ResourceType, objects: KubeObject[], opts: Parameters<typeof toTable>[2] = {}): Json {
  return toTable(rt, objects, { now: NOW, ...opts }) as Json;
}

function cells(rt: ResourceType, o: KubeObject): unknown[] {
  return table(rt, [o]).rows[0].cells;
}

describe('table', () => {
  describe('humanDuration (apimachinery duration.HumanDuration)', () => {
    const cases: Array<[number, string]> = [
      [-2500, '<invalid>'], [-1500, '0s'], [0, '0s'], [45 * SECOND, '45s'], [119 * SECOND, '119s'],
      [2 * MINUTE, '2m'], [200 * SECOND, '3m20s'], [9 * MINUTE + 59 * SECOND, '9m59s'], [10 * MINUTE + 30 * SECOND, '10m'],
      [179 * MINUTE, '179m'], [3 * HOUR, '3h'], [5 * HOUR + 3 * MINUTE, '5h3m'], [8 * HOUR + 59 * MINUTE, '8h'],
      [47 * HOUR, '47h'], [53 * HOUR, '2d5h'], [7 * DAY, '7d'], [120 * DAY, '120d'], [729 * DAY, '729d'],
      [730 * DAY, '2y'], [3 * 365 * DAY + 12 * DAY, '3y12d'], [9 * 365 * DAY + 40 * DAY, '9y'],
    ];
    for (const [ms, text] of cases) it(`${ms}ms → ${text}`, () => expect(humanDuration(ms)).to.equal(text));
  });

  describe('custom resources', () => {
    const columns: PrinterColumn[] = [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Current phase' },
      { name: 'Input', type: 'string', jsonPath: '.spec.input', priority: 1 },
      { name: 'Retries', type: 'integer', jsonPath: '.spec.retries' },
      { name: 'Ratio', type: 'number', format: 'float', jsonPath: '.status.ratio' },
      { name: 'Done', type: 'boolean', jsonPath: '.status.done' },
      { name: 'Started', type: 'date', jsonPath: '.status.startedAt' },
      { name: 'First', type: 'string', jsonPath: '.spec.outputs[*].name' },
      { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    ];
    const rt = customResource(columns);

    it('has Name then the printer columns, priority and defaults kept', () => {
      expect(table(rt, []).columnDefinitions).to.deep.equal([
        { name: 'Name', type: 'string', format: 'name', description: 'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names', priority: 0 },
        { name: 'Phase', type: 'string', format: '', description: 'Current phase', priority: 0 },
        { name: 'Input', type: 'string', format: '', description: 'Custom resource definition column (in JSONPath format): .spec.input', priority: 1 },
        { name: 'Retries', type: 'integer', format: '', description: 'Custom resource definition column (in JSONPath format): .spec.retries', priority: 0 },
        { name: 'Ratio', type: 'number', format: 'float', description: 'Custom resource definition column (in JSONPath format): .status.ratio', priority: 0 },
        { name: 'Done', type: 'boolean', format: '', description: 'Custom resource definition column (in JSONPath format): .status.done', priority: 0 },
        { name: 'Started', type: 'date', format: '', description: 'Custom resource definition column (in JSONPath format): .status.startedAt', priority: 0 },
        { name: 'First', type: 'string', format: '', description: 'Custom resource definition column (in JSONPath format): .spec.outputs[*].name', priority: 0 },
        { name: 'Ready', type: 'string', format: '', description: 'Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=="Ready")].status', priority: 0 },
      ]);
    });

    it('prints the first JSONPath result, typed cells and date durations', () => {
      const o = object('MediaJob', 'demo', {
        spec: { input: 's3://a.mp4', retries: 2, outputs: [{ name: 'hd' }, { name: 'sd' }] },
        status: { phase: 'Running', ratio: 0.5, done: false, startedAt: ago(200 * SECOND), conditions: [{ type: 'Other', status: 'False' }, { type: 'Ready', status: 'True' }] },
      });
      expect(cells(rt, o)).to.deep.equal(['demo', 'Running', 's3://a.mp4', 2, 0.5, false, '3m20s', 'hd', 'True']);
    });

    it('gives null for missing values and for values of the wrong type', () => {
      const o = object('MediaJob', 'bad', {
        spec: { retries: 'two' },
        status: { ratio: 'high', done: 'yes', startedAt: 12 },
      });
      expect(cells(rt, o)).to.deep.equal(['bad', null, null, null, null, null, null, null, null]);
    });

    it('truncates integers, marks unparsable dates and prints non-strings in string columns like client-go', () => {
      const o = object('MediaJob', 'odd', {
        spec: { input: 3, retries: 2.7, outputs: [{ name: { a: 1 } }] },
        status: { phase: true, startedAt: 'yesterday' },
      });
      const [, phase, input, retries, , , started, first] = cells(rt, o);
      expect([phase, input, retries, started, first]).to.deep.equal(['true', '3', 2, '<invalid>', '{"a":1}']);
    });

    it('serves Name and Age when the CRD lists no printer columns', () => {
      const t = table(customResource(), [object('MediaJob', 'demo', {}, { creationTimestamp: ago(5 * HOUR + 3 * MINUTE) })]);
      expect(t.columnDefinitions.map((c: Json) => [c.name, c.type])).to.deep.equal([['Name', 'string'], ['Age', 'date']]);
      expect(t.columnDefinitions[1].description).to.match(/^CreationTimestamp is a timestamp/);
      expect(t.rows[0].cells).to.deep.equal(['demo', '5h3m']);
    });
  });

  describe('table envelope', () => {
    const rt = customResource();
    const o = object('MediaJob', 'demo', { spec: { input: 'x' } }, { uid: 'u1', labels: { app: 'a' } });

    it('is a meta.k8s.io/v1 Table with resourceVersion and continue', () => {
      const t = table(rt, [o], { resourceVersion: '105', continueToken: 'abc' });
      expect(t).to.include({ kind: 'Table', apiVersion: 'meta.k8s.io/v1' });
      expect(t.metadata).to.deep.equal({ resourceVersion: '105', continue: 'abc' });
      expect(table(rt, []).metadata).to.deep.equal({});
      expect(table(rt, []).rows).to.deep.equal([]);
    });

    it('returns PartialObjectMetadata rows by default and for includeObject=Metadata', () => {
      const expected = { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
      expect(table(rt, [o]).rows[0].object).to.deep.equal(expected);
      expect(table(rt, [o], { includeObject: 'Metadata' }).rows[0].object).to.deep.equal(expected);
    });

    it('returns the whole object for includeObject=Object and null for None', () => {
      expect(table(rt, [o], { includeObject: 'Object' }).rows[0].object).to.deep.equal(o);
      expect(table(rt, [o], { includeObject: 'None' }).rows[0].object).to.equal(null);
    });

    it('sends columnDefinitions null without headers (watch events after the first)', () => {
      const t = table(rt, [o], { columnDefinitions: false });
      expect(t).to.have.property('columnDefinitions', null);
      expect(t.rows[0].cells).to.deep.equal(['demo', '5s']);
    });
  });

  describe('built-in kinds (printers.go, always wide)', () => {
    const JOBS = builtin('batch', 'Job', 'jobs');
    const job = (status: Json, extra: Json = {}, metadata: Json = {}): KubeObject => object('Job', 'demo-x7k2p', {
      spec: {
        completions: 1, parallelism: 1,
        selector: { matchLabels: { 'batch.kubernetes.io/controller-uid': 'abc' } },
        template: { spec: { containers: [{ name: 'main', image: 'busybox' }, { name: 'side', image: 'alpine:3' }] } },
        ...extra,
      },
      status,
    }, metadata);

    it('Job: columns with wide ones at priority 1', () => {
      expect(table(JOBS, []).columnDefinitions.map((c: Json) => [c.name, c.priority])).to.deep.equal([
        ['Name', 0], ['Status', 0], ['Completions', 0], ['Duration', 0], ['Age', 0], ['Containers', 1], ['Images', 1], ['Selector', 1],
      ]);
    });

    it('Job: complete job cells', () => {
      const o = job({ startTime: ago(9 * SECOND), completionTime: ago(6 * SECOND), succeeded: 1, conditions: [{ type: 'SuccessCriteriaMet', status: 'True' }, { type: 'Complete', status: 'True' }] });
      expect(cells(JOBS, o)).to.deep.equal(['demo-x7k2p', 'Complete', '1/1', '3s', '5s', 'main,side', 'busybox,alpine:3', 'batch.kubernetes.io/controller-uid=abc']);
    });

    it('Job: status precedence and completions forms', () => {
      const status = (s: Json, extra?: Json, metadata?: Json): unknown => cells(JOBS, job(s, extra, metadata))[1];
      expect(status({ conditions: [{ type: 'FailureTarget', status: 'True' }, { type: 'Failed', status: 'True' }] })).to.equal('Failed');
      expect(status({ conditions: [{ type: 'FailureTarget', status: 'True' }] })).to.equal('FailureTarget');
      expect(status({ conditions: [{ type: 'Suspended', status: 'True' }] })).to.equal('Suspended');
      expect(status({ conditions: [{ type: 'Suspended', status: 'True' }] }, {}, { deletionTimestamp: ago(0) })).to.equal('Terminating');
      expect(status({ conditions: [{ type: 'SuccessCriteriaMet', status: 'True' }] })).to.equal('Running');
      expect(status({ conditions: [{ type: 'Complete', status: 'False' }] })).to.equal('Running');
      expect(cells(JOBS, job({}, { completions: undefined, parallelism: 3 }))[2]).to.equal('0/1 of 3');
      expect(cells(JOBS, job({ succeeded: 0 }, { completions: undefined }))[2]).to.equal('0/1');
      expect(cells(JOBS, job({}))[3]).to.equal('');
      expect(cells(JOBS, job({ startTime: ago(200 * SECOND) }))[3]).to.equal('3m20s');
    });

    const PODS = builtin('', 'Pod', 'pods');
    const pod = (status: Json, spec: Json = {}, metadata: Json = {}): KubeObject =>
      object('Pod', 'p', { spec: { containers: [{ name: 'main', image: 'busybox' }], ...spec }, status }, metadata);

    it('Pod: running pod cells, wide columns included', () => {
      const o = pod({
        phase: 'Running', podIP: '10.0.0.5', podIPs: [{ ip: '10.0.0.5' }],
        conditions: [{ type: 'Ready', status: 'True' }],
        containerStatuses: [{ name: 'main', ready: true, restartCount: 0, state: { running: { startedAt: ago(MINUTE) } } }],
      }, { nodeName: 'local' });
      expect(cells(PODS, o)).to.deep.equal(['p', '1/1', 'Running', '0', '5s', '10.0.0.5', 'local', '<none>', '<none>']);
      expect(table(PODS, []).columnDefinitions.filter((c: Json) => c.priority === 1).map((c: Json) => c.name))
        .to.deep.equal(['IP', 'Node', 'Nominated Node', 'Readiness Gates']);
    });

    it('Pod: completed and failed pods carry the Completed row condition', () => {
      const done = pod({ phase: 'Succeeded', containerStatuses: [{ name: 'main', ready: false, restartCount: 0, state: { terminated: { exitCode: 0, reason: 'Completed' } } }] });
      const t = table(PODS, [done]);
      expect(t.rows[0].cells.slice(1, 3)).to.deep.equal(['0/1', 'Completed']);
      expect(t.rows[0].conditions).to.deep.equal([{ type: 'Completed', status: 'True', reason: 'Succeeded', message: 'The pod has completed successfully.' }]);
      const failed = pod({ phase: 'Failed', containerStatuses: [{ name: 'main', restartCount: 0, state: { terminated: { exitCode: 2 } } }] });
      const row = table(PODS, [failed]).rows[0];
      expect(row.cells[2]).to.equal('ExitCode:2');
      expect(row.conditions[0].reason).to.equal('Failed');
    });

    it('Pod: restarts with the last restart, waiting reasons, init containers, terminating', () => {
      const crashing = pod({
        phase: 'Running',
        containerStatuses: [{ name: 'main', restartCount: 3, state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 1, finishedAt: ago(5 * MINUTE) } } }],
      });
      expect(cells(PODS, crashing).slice(2, 4)).to.deep.equal(['CrashLoopBackOff', '3 (5m ago)']);
      const init = pod({
        phase: 'Pending',
        initContainerStatuses: [{ name: 'init', restartCount: 0, state: { waiting: { reason: 'PodInitializing' } } }],
      }, { initContainers: [{ name: 'init', image: 'busybox' }] });
      expect(cells(PODS, init)[2]).to.equal('Init:0/1');
      const deleting = pod({ phase: 'Running' }, {}, { deletionTimestamp: ago(0) });
      expect(cells(PODS, deleting)[2]).to.equal('Terminating');
    });

    it('Lease, Namespace, Secret, ConfigMap, ServiceAccount', () => {
      expect(table(builtin('coordination.k8s.io', 'Lease', 'leases'), []).columnDefinitions.map((c: Json) => c.name)).to.deep.equal(['Name', 'Holder', 'Age']);
      expect(cells(builtin('coordination.k8s.io', 'Lease', 'leases'), object('Lease', 'l', { spec: { holderIdentity: 'op-1' } }))).to.deep.equal(['l', 'op-1', '5s']);
      expect(cells(builtin('coordination.k8s.io', 'Lease', 'leases'), object('Lease', 'l', { spec: {} }))).to.deep.equal(['l', '', '5s']);
      expect(cells(builtin('', 'Namespace', 'namespaces'), object('Namespace', 'default', { status: { phase: 'Active' } }))).to.deep.equal(['default', 'Active', '5s']);
      expect(cells(builtin('', 'Secret', 'secrets'), object('Secret', 's', { type: 'Opaque', data: { a: 'eA==', b: 'eQ==' } }))).to.deep.equal(['s', 'Opaque', 2, '5s']);
      expect(cells(builtin('', 'ConfigMap', 'configmaps'), object('ConfigMap', 'c', { data: { a: '1' }, binaryData: { b: 'AA==' } }))).to.deep.equal(['c', 2, '5s']);
      expect(cells(builtin('', 'ServiceAccount', 'serviceaccounts'), object('ServiceAccount', 'default', {}))).to.deep.equal(['default', 0, '5s']);
    });

    it('Event: wide cells in printers.go order', () => {
      const ev = object('Event', 'demo.17a', {
        involvedObject: { kind: 'Job', name: 'demo', fieldPath: '' },
        reason: 'SuccessfulCreate', type: 'Normal', message: 'Created pod: demo-abcde\n', count: 2,
        source: { component: 'job-controller' }, firstTimestamp: ago(2 * MINUTE), lastTimestamp: ago(45 * SECOND),
      });
      const rt = builtin('', 'Event', 'events');
      expect(table(rt, []).columnDefinitions.map((c: Json) => c.name)).to.deep.equal([
        'Last Seen', 'Type', 'Reason', 'Object', 'Subobject', 'Source', 'Message', 'First Seen', 'Count', 'Name',
      ]);
      expect(cells(rt, ev)).to.deep.equal(['45s', 'Normal', 'SuccessfulCreate', 'job/demo', '', 'job-controller', 'Created pod: demo-abcde', '2m', 2, 'demo.17a']);
    });

    it('CustomResourceDefinition: the default Name / Created At convertor', () => {
      const rt = { ...builtin('apiextensions.k8s.io', 'CustomResourceDefinition', 'customresourcedefinitions'), namespaced: false };
      const t = table(rt, [object('CustomResourceDefinition', 'mediajobs.mediajobs.io', {}, { creationTimestamp: '2024-05-01T10:00:00Z' })]);
      expect(t.columnDefinitions.map((c: Json) => [c.name, c.type])).to.deep.equal([['Name', 'string'], ['Created At', 'date']]);
      expect(t.rows[0].cells).to.deep.equal(['mediajobs.mediajobs.io', '2024-05-01T10:00:00Z']);
    });
  });

  it('formats label selectors like metav1.FormatLabelSelector', () => {
    expect(formatLabelSelector(undefined)).to.equal('<none>');
    expect(formatLabelSelector({})).to.equal('<none>');
    expect(formatLabelSelector({
      matchLabels: { b: '1' },
      matchExpressions: [
        { key: 'a', operator: 'In', values: ['y', 'x'] },
        { key: 'c', operator: 'NotIn', values: ['z'] },
        { key: 'd', operator: 'Exists' },
        { key: 'e', operator: 'DoesNotExist' },
      ],
    })).to.equal('a in (x,y),b=1,c notin (z),d,!e');
    expect(formatLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Bogus' }] })).to.equal('<error>');
  });
});
