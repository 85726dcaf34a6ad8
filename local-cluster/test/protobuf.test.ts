import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BUILTIN_TYPES } from '../src/builtin-types.js';
import { StatusError } from '../src/errors.js';
import { builtinSchemas } from '../src/openapi/index.js';
import { messageTables } from '../src/protobuf/decode.js';
import { decodeProtobufDeleteOptions, decodeProtobufObject, isProtobuf } from '../src/protobuf/index.js';
import { DECODED_KINDS, MESSAGES } from '../src/protobuf/messages.js';
import type { LocalCluster } from '../src/index.js';
import type { ResourceType } from '../src/types.js';
import { clusterFetch, KUBECTL, type KubectlResult, startTestCluster, type TestCluster } from './support.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

// ---- a minimal protobuf writer, shaped like Go's generated Marshal ----------

function varint(n: number | bigint): Buffer {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v ? b | 0x80 : b);
  } while (v);
  return Buffer.from(out);
}
const key = (num: number, wireType: number): Buffer => varint((num << 3) | wireType);
const int = (num: number, n: number | bigint): Buffer => Buffer.concat([key(num, 0), varint(n)]);
const bool = (num: number, b: boolean): Buffer => int(num, b ? 1 : 0);
const bytes = (num: number, b: Buffer): Buffer => Buffer.concat([key(num, 2), varint(b.length), b]);
const str = (num: number, s: string): Buffer => bytes(num, Buffer.from(s, 'utf8'));
const msg = (num: number, ...fields: Buffer[]): Buffer => bytes(num, Buffer.concat(fields));
const entry = (num: number, k: string, v: Buffer): Buffer => msg(num, str(1, k), v);
const double = (num: number, d: number): Buffer => {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(d);
  return Buffer.concat([key(num, 1), b]);
};

function envelope(apiVersion: string, kind: string, ...fields: Buffer[]): Buffer {
  return Buffer.concat([Buffer.from('k8s\u0000', 'latin1'), msg(1, str(1, apiVersion), str(2, kind)), bytes(2, Buffer.concat(fields)), str(3, ''), str(4, '')]);
}

/** ObjectMeta as Go writes it for a new object: every non-pointer field, zero or not. */
function objectMeta(name: string, ...extra: Buffer[]): Buffer {
  return msg(1, str(1, name), str(2, ''), str(3, ''), str(4, ''), str(5, ''), str(6, ''), int(7, 0), msg(8), ...extra);
}

function rt(kind: string): ResourceType {
  const found = BUILTIN_TYPES.find((t) => t.kind === kind);
  if (!found) throw new Error(kind);
  return found;
}

function statusOf(fn: () => unknown): StatusError {
  try {
    fn();
  } catch (e) {
    if (e instanceof StatusError) return e;
    throw e;
  }
  throw new Error('expected a StatusError');
}

describe('protobuf bodies', () => {
  describe('decoding', () => {
    it('decodes a Secret, keeping pointer zeros and dropping non-pointer ones as Go JSON does', () => {
      const body = envelope('v1', 'Secret',
        objectMeta('creds', entry(11, 'app', str(2, 'media'))),
        entry(2, 'password', bytes(2, Buffer.from('hunter2'))),
        str(3, ''),
        bool(5, false));
      expect(decodeProtobufObject(body, rt('Secret'))).to.deep.equal({
        apiVersion: 'v1', kind: 'Secret',
        metadata: { name: 'creds', creationTimestamp: null, labels: { app: 'media' } },
        data: { password: Buffer.from('hunter2').toString('base64') },
        immutable: false,
      });
    });

    it('decodes a Job: pod spec, inline volume source, int-or-string, quantities and pointer zeros', () => {
      const container = msg(2,
        str(1, 'main'), str(2, 'busybox'), str(3, 'sh'), str(3, '-c'), str(3, 'echo hi'), str(5, ''),
        msg(7, str(1, 'MODE'), str(2, 'fast')),
        msg(7, str(1, 'TOKEN'), str(2, ''), msg(3, msg(4, msg(1, str(1, 'creds')), str(2, 'token'), bool(3, true)))),
        msg(8, entry(1, 'cpu', msg(2, str(1, '500m'))), entry(2, 'memory', msg(2, str(1, '64Mi')))),
        msg(9, str(1, 'scratch'), bool(2, false), str(3, '/scratch'), str(4, ''), str(6, '')),
        msg(10, msg(1, msg(2, str(1, '/healthz'), msg(2, int(1, 1), int(2, 0), str(3, 'http')), str(3, ''), str(4, ''))),
          int(2, 3), int(3, 0), int(4, 0), int(5, 0), int(6, 0)),
        str(13, ''), str(14, ''), bool(16, false), bool(17, false), bool(18, false), str(20, ''));
      const podSpec = msg(2,
        msg(1, str(1, 'scratch'), msg(2, msg(2, str(1, ''), msg(2, str(1, '1Gi'))))),
        container,
        str(3, 'Never'), str(6, ''), str(8, ''), str(9, ''), str(10, ''), bool(11, false), bool(12, false), bool(13, false),
        str(16, ''), str(17, ''), str(19, ''), str(24, ''));
      const body = envelope('batch/v1', 'Job',
        objectMeta('encode'),
        msg(2, int(1, 1), int(7, 0), msg(6, msg(1, str(1, ''), msg(8)), podSpec), bool(10, false)),
        msg(3, int(4, 0), int(5, 0), int(6, 0), str(7, '')));
      expect(decodeProtobufObject(body, rt('Job'))).to.deep.equal({
        apiVersion: 'batch/v1', kind: 'Job',
        metadata: { name: 'encode', creationTimestamp: null },
        spec: {
          parallelism: 1,
          backoffLimit: 0,
          suspend: false,
          template: {
            metadata: { creationTimestamp: null },
            spec: {
              volumes: [{ name: 'scratch', emptyDir: { sizeLimit: '1Gi' } }],
              containers: [{
                name: 'main', image: 'busybox', command: ['sh', '-c', 'echo hi'],
                env: [
                  { name: 'MODE', value: 'fast' },
                  { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'creds', key: 'token', optional: true } } },
                ],
                resources: { limits: { cpu: '500m' }, requests: { memory: '64Mi' } },
                volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
                livenessProbe: { httpGet: { path: '/healthz', port: 'http' }, initialDelaySeconds: 3 },
              }],
              restartPolicy: 'Never',
            },
          },
        },
        status: {},
      });
    });

    it('writes times as RFC 3339 (Time in seconds, MicroTime in microseconds) and the zero time as null', () => {
      const lease = envelope('coordination.k8s.io/v1', 'Lease',
        objectMeta('leader', msg(9, int(1, 1767225600), int(2, 0))),
        msg(2, str(1, 'op-1'), int(2, 15), msg(3, int(1, 1767225600), int(2, 123456789)), int(5, 0)));
      expect(decodeProtobufObject(lease, rt('Lease'))).to.deep.equal({
        apiVersion: 'coordination.k8s.io/v1', kind: 'Lease',
        metadata: { name: 'leader', creationTimestamp: null, deletionTimestamp: '2026-01-01T00:00:00Z' },
        spec: { holderIdentity: 'op-1', leaseDurationSeconds: 15, acquireTime: '2026-01-01T00:00:00.123456Z', leaseTransitions: 0 },
      });
    });

    it('decodes negative int32s, skips unknown field numbers and merges a repeated message field', () => {
      const body = envelope('v1', 'Event',
        objectMeta('e1'),
        msg(2, str(1, 'Pod'), str(3, 'p1')),
        str(3, 'Started'),
        int(8, -2),
        str(99, 'from a newer client'),
        double(98, 1.5),
        msg(5, str(1, 'kubelet')),
        msg(5, str(2, 'node-1')));
      const event = decodeProtobufObject(body, rt('Event')) as Json;
      expect(event.count).to.equal(-2);
      expect(event.source).to.deep.equal({ component: 'kubelet', host: 'node-1' });
      expect(event.involvedObject).to.deep.equal({ kind: 'Pod', name: 'p1' });
      expect(event).to.not.have.property('99');
    });

    it('accepts packed repeated numbers', () => {
      const packed = Buffer.concat([varint(3), varint(-1), varint(7)]);
      const body = envelope('batch/v1', 'Job', objectMeta('p'), msg(2, msg(11, msg(1, str(1, 'FailJob'),
        msg(2, str(2, 'In'), bytes(3, packed))))));
      const rule = (decodeProtobufObject(body, rt('Job')) as Json).spec.podFailurePolicy.rules[0];
      expect(rule).to.deep.equal({ action: 'FailJob', onExitCodes: { operator: 'In', values: [3, -1, 7] } });
    });

    it('decodes DeleteOptions sent by typed clients', () => {
      const body = envelope('v1', 'DeleteOptions', int(1, 0), msg(2, str(1, 'uid-1')), str(4, 'Foreground'), str(5, 'All'));
      expect(decodeProtobufDeleteOptions(body)).to.deep.equal({
        gracePeriodSeconds: 0, preconditions: { uid: 'uid-1' }, propagationPolicy: 'Foreground', dryRun: ['All'],
      });
    });

    it('recognises the media type with parameters', () => {
      expect(isProtobuf('application/vnd.kubernetes.protobuf')).to.equal(true);
      expect(isProtobuf('application/vnd.kubernetes.protobuf; charset=binary')).to.equal(true);
      expect(isProtobuf('application/json')).to.equal(false);
      expect(isProtobuf(undefined)).to.equal(false);
    });
  });

  describe('errors', () => {
    it('answers a body without the k8s magic like transformDecodeError', () => {
      const err = statusOf(() => decodeProtobufObject(Buffer.from('{"kind":"Secret"}'), rt('Secret')));
      expect(err.code).to.equal(400);
      expect(err.message).to.equal('the object provided is unrecognized (must be of type Secret): provided data does not appear '
        + 'to be a protobuf message, expected prefix [107 56 115 0] ({"kind":"Secret"})');
    });

    it('answers a malformed object message with "cannot be handled as"', () => {
      const body = envelope('v1', 'ConfigMap', objectMeta('x'), int(2, 5));
      const err = statusOf(() => decodeProtobufObject(body, rt('ConfigMap')));
      expect(err.code).to.equal(400);
      expect(err.message).to.equal('ConfigMap in version "v1" cannot be handled as a ConfigMap: proto: wrong wireType = 0 for field ConfigMap.data');
    });

    it('answers a truncated body with 400', () => {
      const body = envelope('v1', 'ConfigMap', objectMeta('x'));
      const err = statusOf(() => decodeProtobufObject(body.subarray(0, body.length - 6), rt('ConfigMap')));
      expect(err.code).to.equal(400);
    });

    it('refuses protobuf for custom resources and CRDs with 415', () => {
      const cr: ResourceType = { ...rt('Secret'), group: 'media.example.com', kind: 'MediaJob', builtin: false };
      expect(statusOf(() => decodeProtobufObject(envelope('media.example.com/v1', 'MediaJob'), cr)).code).to.equal(415);
      const crd = statusOf(() => decodeProtobufObject(envelope('apiextensions.k8s.io/v1', 'CustomResourceDefinition'), rt('CustomResourceDefinition')));
      expect(crd.code).to.equal(415);
      expect(crd.message).to.equal('the body of the request was in an unknown format - accepted media types include: application/json, application/yaml');
    });
  });

  describe('message tables', () => {
    const GROUP_OF: Record<string, string> = {
      ObjectMeta: 'io.k8s.apimachinery.pkg.apis.meta.v1.', OwnerReference: 'io.k8s.apimachinery.pkg.apis.meta.v1.',
      ManagedFieldsEntry: 'io.k8s.apimachinery.pkg.apis.meta.v1.', LabelSelector: 'io.k8s.apimachinery.pkg.apis.meta.v1.',
      LabelSelectorRequirement: 'io.k8s.apimachinery.pkg.apis.meta.v1.', DeleteOptions: 'io.k8s.apimachinery.pkg.apis.meta.v1.',
      Preconditions: 'io.k8s.apimachinery.pkg.apis.meta.v1.',
      Lease: 'io.k8s.api.coordination.v1.', LeaseSpec: 'io.k8s.api.coordination.v1.',
    };
    const schemaName = (message: string): string => {
      if (GROUP_OF[message]) return GROUP_OF[message] + message;
      const batch = /^(Job|PodFailurePolicy|SuccessPolicy|UncountedTerminatedPods)/.test(message);
      return (batch ? 'io.k8s.api.batch.v1.' : 'io.k8s.api.core.v1.') + message;
    };
    // Messages that are only ever inlined have no schema of their own.
    const INLINED = new Set(['VolumeSource', 'ProbeHandler']);
    // SelfSubjectAccessReview (kubectl auth can-i, access-review.ts) is answered, not served as a resource: no schema to hold it to.
    const UNSERVED = new Set(['SelfSubjectAccessReview', 'SelfSubjectAccessReviewSpec', 'ResourceAttributes', 'NonResourceAttributes', 'SubjectAccessReviewStatus']);
    // Served fields newer than v1.32 (client-node's models are from a later release).
    const NEWER = new Set([
      'io.k8s.api.core.v1.Container.restartPolicyRules', 'io.k8s.api.core.v1.EphemeralContainer.restartPolicyRules',
      'io.k8s.api.core.v1.ContainerStatus.stopSignal', 'io.k8s.api.core.v1.Lifecycle.stopSignal',
      'io.k8s.api.core.v1.EnvVarSource.fileKeyRef', 'io.k8s.api.core.v1.VolumeProjection.podCertificate',
      'io.k8s.api.core.v1.PodSpec.hostnameOverride', 'io.k8s.api.core.v1.PodStatus.observedGeneration',
      'io.k8s.api.core.v1.PodCondition.observedGeneration', 'io.k8s.api.core.v1.PodStatus.extendedResourceClaimStatus',
    ]);

    it('parse, and name only messages they define', () => {
      expect(messageTables().size).to.equal(Object.keys(MESSAGES).length);
      for (const kind of DECODED_KINDS) expect(messageTables().has(kind), kind).to.equal(true);
    });

    it('match the served schemas field by field (names, lists, maps and nested types)', () => {
      const schemas = builtinSchemas();
      const fieldsOf = (message: string): Map<string, { type: string; repeated: boolean; map: boolean }> => {
        const out = new Map<string, { type: string; repeated: boolean; map: boolean }>();
        for (const f of messageTables().get(message)!.values()) {
          if (f.inline) for (const [k, v] of fieldsOf(f.type)) out.set(k, v);
          else out.set(f.json, f);
        }
        return out;
      };
      for (const message of Object.keys(MESSAGES)) {
        if (INLINED.has(message) || UNSERVED.has(message)) continue;
        const name = schemaName(message);
        const schema = schemas[name];
        expect(schema, name).to.not.equal(undefined);
        const props = schema!.properties as Json;
        const fields = fieldsOf(message);
        for (const [json, f] of fields) {
          const prop = props[json];
          expect(prop, `${name}.${json}`).to.not.equal(undefined);
          if (f.repeated) expect(prop.type, `${name}.${json} is a list`).to.equal('array');
          if (f.map) expect(prop.type, `${name}.${json} is a map`).to.equal('object');
          const ref: string | undefined = (f.repeated ? prop.items : f.map ? prop.additionalProperties : prop).$ref
            ?? prop.allOf?.[0]?.$ref;
          if (messageTables().has(f.type) && !INLINED.has(f.type)) {
            expect(ref, `${name}.${json}`).to.equal(`#/components/schemas/${schemaName(f.type)}`);
          }
        }
        for (const json of Object.keys(props)) {
          if (json === 'apiVersion' || json === 'kind' || NEWER.has(`${name}.${json}`)) continue;
          expect(fields.has(json), `${name}.${json} has no field number`).to.equal(true);
        }
      }
    });
  });
});

// ---- the real kubectl ------------------------------------------------------------

/**
 * A pass-through proxy in front of the cluster that keeps the protobuf bodies
 * kubectl sends, so they can be compared with what kubectl prints as JSON.
 */
async function recordingProxy(cluster: LocalCluster): Promise<{ server: Server; url: string; bodies: { path: string; body: Buffer }[] }> {
  const bodies: { path: string; body: Buffer }[] = [];
  const upstream = new URL(cluster.url);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (isProtobuf(req.headers['content-type'])) bodies.push({ path: req.url ?? '', body });
      // kubectl sends no token to this plain-HTTP proxy; the proxy authenticates to the cluster.
      const headers = { ...req.headers, authorization: `Bearer ${cluster.token}` };
      const out = httpsRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, ca: cluster.caCert }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      out.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

describe('kubectl create with protobuf bodies', () => {
  let t: TestCluster;
  let proxy: Awaited<ReturnType<typeof recordingProxy>>;
  let kubeconfig: string;

  before(async () => {
    t = await startTestCluster();
    proxy = await recordingProxy(t.cluster);
    kubeconfig = join(t.home, 'proxied-kubeconfig');
    writeFileSync(kubeconfig, readFileSync(t.cluster.kubeconfigPath, 'utf8').replace(t.cluster.url, proxy.url));
  });

  after(async () => {
    await new Promise((r) => proxy?.server.close(r));
    await t?.stop();
  });

  function proxied(args: string[]): Promise<KubectlResult> {
    return new Promise((resolve, reject) => {
      execFile(KUBECTL, args, { env: { ...process.env, HOME: t.home, KUBECONFIG: kubeconfig }, timeout: 30_000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`kubectl ${args.join(' ')}: ${stderr || err.message}`));
        else resolve({ code: 0, stdout, stderr });
      });
    });
  }

  /** The body kubectl sent as protobuf decodes to exactly the JSON kubectl prints for the same object. */
  async function expectSameAsJson(args: string[], kind: string, created: string): Promise<Json> {
    const before = proxy.bodies.length;
    expect((await proxied(args)).stdout).to.equal(`${created} created\n`);
    const sent = proxy.bodies.slice(before);
    expect(sent.map((b) => b.body.subarray(0, 4).toString('latin1'))).to.deep.equal(['k8s\u0000']);
    const decoded = decodeProtobufObject(sent[0]!.body, rt(kind));
    const dash = args.includes('--') ? args.indexOf('--') : args.length;
    const dryRun = [...args.slice(0, dash), '--dry-run=client', '-o', 'json', ...args.slice(dash)];
    const asJson = JSON.parse((await t.kubectl(dryRun)).stdout) as Json;
    expect(decoded).to.deep.equal(asJson);
    return decoded;
  }

  it('create secret generic: stored data is base64 of the literal', async () => {
    await expectSameAsJson(['create', 'secret', 'generic', 'x', '--from-literal=a=b', '--from-literal=empty='], 'Secret', 'secret/x');
    expect((await t.kubectl(['get', 'secret', 'x', '-o', 'jsonpath={.data.a}'])).stdout).to.equal(Buffer.from('b').toString('base64'));
    expect((await t.kubectl(['get', 'secret', 'x', '-o', 'jsonpath={.type}'])).stdout).to.equal('Opaque');
  });

  it('create secret docker-registry', async () => {
    await expectSameAsJson(['create', 'secret', 'docker-registry', 'pull', '--docker-server=r.example.com', '--docker-username=u',
      '--docker-password=p'], 'Secret', 'secret/pull');
    expect((await t.kubectl(['get', 'secret', 'pull', '-o', 'jsonpath={.type}'])).stdout).to.equal('kubernetes.io/dockerconfigjson');
  });

  it('create namespace', async () => {
    await expectSameAsJson(['create', 'namespace', 'media'], 'Namespace', 'namespace/media');
    expect((await t.kubectl(['get', 'namespace', 'media', '-o', 'jsonpath={.status.phase}'])).stdout).to.equal('Active');
  });

  it('create configmap --from-literal and --from-file (binary data)', async () => {
    const bin = join(t.home, 'blob.bin');
    writeFileSync(bin, Buffer.from([0xff, 0x00, 0xfe]));
    await expectSameAsJson(['create', 'configmap', 'settings', '-n', 'media', '--from-literal=level=debug', `--from-file=${bin}`],
      'ConfigMap', 'configmap/settings');
    expect((await t.kubectl(['get', 'configmap', 'settings', '-n', 'media', '-o', 'jsonpath={.data.level}'])).stdout).to.equal('debug');
    expect((await t.kubectl(['get', 'configmap', 'settings', '-n', 'media', '-o', 'jsonpath={.binaryData.blob\\.bin}'])).stdout)
      .to.equal(Buffer.from([0xff, 0x00, 0xfe]).toString('base64'));
  });

  it('create serviceaccount', async () => {
    await expectSameAsJson(['create', 'serviceaccount', 'worker', '-n', 'media'], 'ServiceAccount', 'serviceaccount/worker');
    expect((await t.kubectl(['get', 'serviceaccount', 'worker', '-n', 'media', '-o', 'name'])).stdout).to.equal('serviceaccount/worker\n');
  });

  it('create job: the Job runs as a local process and completes', async () => {
    const decoded = await expectSameAsJson(['create', 'job', 'hello', '--image=busybox', '--', 'sh', '-c', 'echo hi'], 'Job', 'job.batch/hello');
    // What a Go client's JSON would have carried too: the zero template time and the empty resources.
    expect(decoded.spec.template.metadata).to.deep.equal({ creationTimestamp: null });
    expect(decoded.spec.template.spec.containers[0].resources).to.deep.equal({});
    await t.kubectl(['wait', '--for=condition=complete', 'job/hello', '--timeout=20s']);
    expect((await t.kubectl(['logs', 'job/hello'])).stdout).to.equal('hi\n');
  });

  it('answers JSON to a client that accepts only protobuf, with a JSON Content-Type client-go decodes by', async () => {
    const res = await clusterFetch(t.cluster, `/api/v1/namespaces/media`, { headers: { Accept: 'application/vnd.kubernetes.protobuf' } });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('application/json');
    expect(((await res.json()) as Json).metadata.name).to.equal('media');
  });
});
