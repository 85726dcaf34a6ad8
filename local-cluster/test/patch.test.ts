import { expect } from 'chai';
import { StatusError } from '../src/errors.js';
import { applyPatch, patchTypeOf, strategicSupported, type PatchType } from '../src/patch.js';
import type { KubeObject } from '../src/types.js';

const GENERIC_422 = 'the server rejected our request due to an error in our request';

function statusOf(fn: () => unknown): { code: number; reason: string; message: string; details: unknown } {
  try {
    fn();
  } catch (err) {
    if (err instanceof StatusError) return { code: err.code, reason: err.reason, message: err.message, details: err.details };
    throw err;
  }
  throw new Error('expected a StatusError');
}

function job(): KubeObject {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: 'demo',
      namespace: 'default',
      labels: { app: 'demo', tier: 'batch' },
      finalizers: ['a.example.com/one'],
      ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: 'u1', controller: true }],
    },
    spec: {
      backoffLimit: 6,
      template: {
        metadata: { labels: { app: 'demo' } },
        spec: {
          restartPolicy: 'Never',
          tolerations: [{ key: 'old', operator: 'Exists' }],
          containers: [
            {
              name: 'main',
              image: 'busybox:1',
              command: ['sh', '-c', 'echo hi'],
              env: [{ name: 'A', value: '1' }, { name: 'B', value: '2' }],
            },
            { name: 'side', image: 'sidecar:1' },
          ],
          volumes: [{ name: 'data', emptyDir: {} }],
        },
      },
    },
    status: { conditions: [{ type: 'Suspended', status: 'False' }, { type: 'Complete', status: 'False' }] },
  };
}

/** The pod template spec of a patched Job. */
function podSpec(obj: KubeObject): Record<string, unknown> {
  return ((obj.spec as Record<string, unknown>).template as Record<string, Record<string, unknown>>).spec ?? {};
}

const containers = (obj: KubeObject): Record<string, unknown>[] => podSpec(obj).containers as Record<string, unknown>[];
const names = (list: unknown): unknown[] => (list as Record<string, unknown>[]).map((c) => c.name);

describe('patchTypeOf', () => {
  const cases: [string | undefined, PatchType | undefined][] = [
    ['application/json-patch+json', 'json'],
    ['application/merge-patch+json', 'merge'],
    ['application/merge-patch+json; charset=utf-8', 'merge'],
    ['application/strategic-merge-patch+json', 'strategic'],
    ['application/apply-patch+yaml', 'apply'],
    ['application/json', undefined],
    ['Application/Merge-Patch+JSON', undefined], // the apiserver matches case-sensitively
    ['application/merge-patch+json ;charset=utf-8', undefined], // and does not trim
    [undefined, undefined],
  ];
  for (const [contentType, expected] of cases) {
    it(`${String(contentType)} → ${String(expected)}`, () => {
      expect(patchTypeOf(contentType)).to.equal(expected);
    });
  }
});

describe('applyPatch: JSON patch (RFC 6902, evanphx/json-patch v4 semantics)', () => {
  it('never mutates the original', () => {
    const original = job();
    applyPatch(original, [{ op: 'replace', path: '/spec/backoffLimit', value: 1 }], 'json', 'Job');
    expect(original).to.deep.equal(job());
  });

  const ok: { name: string; patch: unknown; check: (o: KubeObject) => unknown; expected: unknown }[] = [
    { name: 'add a label', patch: [{ op: 'add', path: '/metadata/labels/new', value: 'x' }], check: (o) => o.metadata.labels?.new, expected: 'x' },
    { name: 'replace a scalar', patch: [{ op: 'replace', path: '/spec/backoffLimit', value: 1 }], check: (o) => (o.spec as Record<string, unknown>).backoffLimit, expected: 1 },
    { name: 'remove a label', patch: [{ op: 'remove', path: '/metadata/labels/tier' }], check: (o) => o.metadata.labels, expected: { app: 'demo' } },
    { name: 'append with "-"', patch: [{ op: 'add', path: '/metadata/finalizers/-', value: 'f2' }], check: (o) => o.metadata.finalizers, expected: ['a.example.com/one', 'f2'] },
    { name: 'insert at an index', patch: [{ op: 'add', path: '/metadata/finalizers/0', value: 'f0' }], check: (o) => o.metadata.finalizers, expected: ['f0', 'a.example.com/one'] },
    { name: 'negative index counts from the end', patch: [{ op: 'remove', path: '/spec/template/spec/containers/-1' }], check: (o) => names(containers(o)), expected: ['main'] },
    { name: 'escaped tokens (~1 is /)', patch: [{ op: 'add', path: '/metadata/labels/example.com~1role', value: 'r' }], check: (o) => o.metadata.labels?.['example.com/role'], expected: 'r' },
    { name: 'replace of a missing object key adds it (v4 does not check)', patch: [{ op: 'replace', path: '/spec/parallelism', value: 2 }], check: (o) => (o.spec as Record<string, unknown>).parallelism, expected: 2 },
    { name: 'test then replace', patch: [{ op: 'test', path: '/metadata/name', value: 'demo' }, { op: 'replace', path: '/metadata/labels/app', value: 'v2' }], check: (o) => o.metadata.labels?.app, expected: 'v2' },
    { name: 'test of a missing key with null passes', patch: [{ op: 'test', path: '/spec/suspend', value: null }], check: (o) => o.metadata.name, expected: 'demo' },
    { name: 'copy', patch: [{ op: 'copy', from: '/metadata/labels/app', path: '/metadata/labels/copy' }], check: (o) => o.metadata.labels?.copy, expected: 'demo' },
    { name: 'move', patch: [{ op: 'move', from: '/metadata/labels/tier', path: '/metadata/labels/layer' }], check: (o) => o.metadata.labels, expected: { app: 'demo', layer: 'batch' } },
    { name: 'null body is no operation', patch: null, check: (o) => o.metadata.labels, expected: { app: 'demo', tier: 'batch' } },
  ];
  for (const c of ok) {
    it(c.name, () => {
      expect(c.check(applyPatch(job(), c.patch, 'json', 'Job'))).to.deep.equal(c.expected);
    });
  }

  const notApplicable: [string, unknown][] = [
    ['a failed test', [{ op: 'test', path: '/metadata/name', value: 'other' }]],
    ['remove of a missing key', [{ op: 'remove', path: '/metadata/labels/missing' }]],
    ['add under a missing parent', [{ op: 'add', path: '/spec/foo/bar', value: 1 }]],
    ['replace past the end of an array', [{ op: 'replace', path: '/metadata/finalizers/5', value: 'x' }]],
    ['an unknown op', [{ op: 'frobnicate', path: '/metadata/name' }]],
    ['a missing path', [{ op: 'add', value: 1 }]],
    ['move from a missing key', [{ op: 'move', from: '/metadata/nope', path: '/metadata/x' }]],
  ];
  for (const [name, patch] of notApplicable) {
    it(`${name} → 422 Invalid with the generic message`, () => {
      expect(statusOf(() => applyPatch(job(), patch, 'json', 'Job'))).to.deep.equal({
        code: 422, reason: 'Invalid', message: GENERIC_422, details: {},
      });
    });
  }

  const badRequests: [string, unknown, 'Warn' | 'Ignore', string][] = [
    ['an object body', { op: 'add' }, 'Warn', 'error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp'],
    ['an object body without strict decoding', { op: 'add' }, 'Ignore', 'json: cannot unmarshal object into Go value of type jsonpatch.Patch'],
    ['a non-object operation', [1], 'Warn', 'error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp'],
    ['a non-string op', [{ op: 5, path: '/a' }], 'Warn', 'error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string'],
  ];
  for (const [name, patch, fieldValidation, message] of badRequests) {
    it(`${name} (${fieldValidation}) → 400 BadRequest`, () => {
      const s = statusOf(() => applyPatch(job(), patch, 'json', 'Job', { fieldValidation }));
      expect([s.code, s.reason, s.message]).to.deep.equal([400, 'BadRequest', message]);
    });
  }

  it('more than 10000 operations → 413', () => {
    const ops = Array.from({ length: 10001 }, () => ({ op: 'test', path: '/metadata/name', value: 'demo' }));
    const s = statusOf(() => applyPatch(job(), ops, 'json', 'Job'));
    expect([s.code, s.reason]).to.deep.equal([413, 'RequestEntityTooLarge']);
    expect(s.message).to.equal('Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001');
  });

  it('a result that is not an object → 422 on field "patch"', () => {
    const s = statusOf(() => applyPatch(job(), [{ op: 'replace', path: '', value: [1] }], 'json', 'Job'));
    expect([s.code, s.reason]).to.deep.equal([422, 'Invalid']);
    expect(s.message).to.match(/^ "" is invalid: patch: Invalid value: "\[1\]": couldn't get version\/kind; json parse error/);
  });
});

describe('applyPatch: JSON merge patch', () => {
  const cases: { name: string; patch: unknown; check: (o: KubeObject) => unknown; expected: unknown }[] = [
    { name: 'null deletes a member', patch: { metadata: { labels: { tier: null } } }, check: (o) => o.metadata.labels, expected: { app: 'demo' } },
    { name: 'objects merge recursively', patch: { spec: { template: { spec: { restartPolicy: 'OnFailure' } } } }, check: (o) => [podSpec(o).restartPolicy, names(podSpec(o).containers)], expected: ['OnFailure', ['main', 'side']] },
    { name: 'arrays are replaced whole', patch: { metadata: { finalizers: ['x'] } }, check: (o) => o.metadata.finalizers, expected: ['x'] },
    { name: 'nulls inside a new object are pruned', patch: { spec: { selector: { matchLabels: { a: '1', b: null } } } }, check: (o) => (o.spec as Record<string, unknown>).selector, expected: { matchLabels: { a: '1' } } },
    { name: 'a scalar replaces an object', patch: { status: 'gone' }, check: (o) => o.status, expected: 'gone' },
    { name: 'an object replaces a scalar', patch: { spec: { backoffLimit: { a: 1, b: null } } }, check: (o) => (o.spec as Record<string, unknown>).backoffLimit, expected: { a: 1 } },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(c.check(applyPatch(job(), c.patch, 'merge', 'Job'))).to.deep.equal(c.expected);
    });
  }

  const errors: [string, unknown, 'Warn' | 'Ignore', number, string][] = [
    ['a null body', null, 'Warn', 400, 'Invalid JSON Patch'],
    ['an array body', [1], 'Warn', 400, 'error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}'],
    ['a string body', 'x', 'Warn', 400, 'error decoding patch: json: cannot unmarshal string into Go value of type map[string]interface {}'],
    ['a string body without strict decoding', 'x', 'Ignore', 400, 'Invalid JSON Patch'],
  ];
  for (const [name, patch, fieldValidation, code, message] of errors) {
    it(`${name} (${fieldValidation}) → ${code}`, () => {
      const s = statusOf(() => applyPatch(job(), patch, 'merge', 'Job', { fieldValidation }));
      expect([s.code, s.message]).to.deep.equal([code, message]);
    });
  }

  it('an array body without strict decoding replaces the object → 422', () => {
    expect(statusOf(() => applyPatch(job(), [1], 'merge', 'Job', { fieldValidation: 'Ignore' })).code).to.equal(422);
  });
});

describe('applyPatch: strategic merge patch', () => {
  const smp = (patch: unknown, obj: KubeObject = job(), kind = 'Job'): KubeObject => applyPatch(obj, patch, 'strategic', kind);
  const onPodSpec = (spec: Record<string, unknown>): unknown => ({ spec: { template: { spec } } });

  it('merges containers by name, keeping their other fields', () => {
    const out = smp(onPodSpec({ containers: [{ name: 'main', image: 'busybox:2' }] }));
    expect(containers(out)[0]).to.deep.equal({ ...(containers(job())[0] ?? {}), image: 'busybox:2' });
    expect(names(containers(out))).to.deep.equal(['main', 'side']);
  });

  it('merges env by name inside a container', () => {
    const out = smp(onPodSpec({ containers: [{ name: 'main', env: [{ name: 'B', value: '3' }, { name: 'C', value: '4' }] }] }));
    expect(containers(out)[0]?.env).to.deep.equal([{ name: 'A', value: '1' }, { name: 'B', value: '3' }, { name: 'C', value: '4' }]);
  });

  it('deletes a list element with $patch: delete', () => {
    const out = smp(onPodSpec({ containers: [{ name: 'side', $patch: 'delete' }] }));
    expect(names(containers(out))).to.deep.equal(['main']);
  });

  it('replaces a list with $patch: replace', () => {
    const out = smp(onPodSpec({ containers: [{ name: 'only', image: 'x' }, { $patch: 'replace' }] }));
    expect(containers(out)).to.deep.equal([{ name: 'only', image: 'x' }]);
  });

  it('replaces a map with $patch: replace', () => {
    expect(smp({ metadata: { labels: { $patch: 'replace', fresh: 'yes' } } }).metadata.labels).to.deep.equal({ fresh: 'yes' });
  });

  it('orders list items by $setElementOrder (what kubectl apply sends for a Job)', () => {
    const out = smp(onPodSpec({
      '$setElementOrder/containers': [{ name: 'side' }, { name: 'new' }, { name: 'main' }],
      containers: [{ name: 'new', image: 'new:1' }],
    }));
    expect(names(containers(out))).to.deep.equal(['side', 'new', 'main']);
    expect(containers(out)[2]?.command).to.deep.equal(['sh', '-c', 'echo hi']);
  });

  it('a kubectl apply that only changes an image keeps everything else', () => {
    const out = smp(onPodSpec({
      '$setElementOrder/containers': [{ name: 'main' }, { name: 'side' }],
      containers: [{ name: 'main', image: 'busybox:3' }],
    }));
    expect(containers(out).map((c) => [c.name, c.image])).to.deep.equal([['main', 'busybox:3'], ['side', 'sidecar:1']]);
  });

  it('without $setElementOrder a new item goes first, as in apimachinery', () => {
    expect(names(containers(smp(onPodSpec({ containers: [{ name: 'new', image: 'n' }] }))))).to.deep.equal(['new', 'main', 'side']);
  });

  it('unions finalizers (a merge list of strings)', () => {
    // New items come first when no $setElementOrder says otherwise.
    expect(smp({ metadata: { finalizers: ['b.example.com/two', 'a.example.com/one'] } }).metadata.finalizers)
      .to.deep.equal(['b.example.com/two', 'a.example.com/one']);
    expect(smp({ metadata: { finalizers: ['b.example.com/two'] } }).metadata.finalizers)
      .to.deep.equal(['b.example.com/two', 'a.example.com/one']);
    expect(smp({ metadata: { '$setElementOrder/finalizers': ['a.example.com/one', 'b'], finalizers: ['b'] } }).metadata.finalizers)
      .to.deep.equal(['a.example.com/one', 'b']);
  });

  it('removes finalizers with $deleteFromPrimitiveList', () => {
    const obj = job();
    obj.metadata.finalizers = ['x', 'y', 'z'];
    expect(smp({ metadata: { '$deleteFromPrimitiveList/finalizers': ['y'] } }, obj).metadata.finalizers).to.deep.equal(['x', 'z']);
  });

  it('null deletes a map key', () => {
    expect(smp({ metadata: { labels: { tier: null } } }).metadata.labels).to.deep.equal({ app: 'demo' });
  });

  it('drops nulls and directives from values that have nothing to merge into', () => {
    const out = smp(onPodSpec({ nodeSelector: { a: '1', b: null }, affinity: { $patch: 'delete' } }));
    expect(podSpec(out).nodeSelector).to.deep.equal({ a: '1' });
    expect(podSpec(out)).to.not.have.property('affinity');
  });

  it('$retainKeys clears the fields it does not list', () => {
    const out = smp(onPodSpec({ volumes: [{ name: 'data', $retainKeys: ['hostPath', 'name'], hostPath: { path: '/tmp' } }] }));
    expect(podSpec(out).volumes).to.deep.equal([{ name: 'data', hostPath: { path: '/tmp' } }]);
  });

  it('merges ownerReferences by uid', () => {
    const out = smp({ metadata: { ownerReferences: [{ uid: 'u1', name: 'renamed' }, { uid: 'u2', apiVersion: 'v1', kind: 'Secret', name: 's' }] } });
    expect(out.metadata.ownerReferences).to.deep.equal([
      { apiVersion: 'v1', kind: 'ConfigMap', name: 'renamed', uid: 'u1', controller: true },
      { uid: 'u2', apiVersion: 'v1', kind: 'Secret', name: 's' },
    ]);
  });

  it('merges Job status conditions by type', () => {
    const out = smp({ status: { conditions: [{ type: 'Complete', status: 'True' }] } });
    expect(out.status).to.deep.equal({ conditions: [{ type: 'Suspended', status: 'False' }, { type: 'Complete', status: 'True' }] });
  });

  it('replaces lists without a merge key (tolerations)', () => {
    expect(podSpec(smp(onPodSpec({ tolerations: [{ key: 'new', operator: 'Exists' }] }))).tolerations)
      .to.deep.equal([{ key: 'new', operator: 'Exists' }]);
  });

  it('merges Pod containers directly under spec', () => {
    const pod: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'i', ports: [{ containerPort: 80, name: 'http' }] }] } };
    const out = applyPatch(pod, { spec: { containers: [{ name: 'c', ports: [{ containerPort: 80, protocol: 'TCP' }] }] } }, 'strategic', 'Pod');
    expect(out.spec).to.deep.equal({ containers: [{ name: 'c', image: 'i', ports: [{ containerPort: 80, name: 'http', protocol: 'TCP' }] }] });
  });

  const noFinalizers = (): KubeObject => {
    const obj = job();
    obj.metadata.finalizers = [];
    return obj;
  };
  const errors: { name: string; patch: unknown; obj?: KubeObject; code: number; reason: string; message: string | RegExp }[] = [
    { name: 'an item without its merge key', patch: onPodSpec({ containers: [{ image: 'x' }] }), code: 500, reason: '', message: 'map: map[image:x] does not contain declared merge key: name' },
    { name: 'an unknown $patch on a map', patch: { metadata: { labels: { $patch: 'frob' } } }, code: 500, reason: '', message: 'unknown patch type: frob in map: map[$patch:frob]' },
    { name: '$retainKeys that is not a list', patch: { metadata: { $retainKeys: 'name' } }, code: 400, reason: 'BadRequest', message: 'invalid patch format of retainKeys' },
    { name: 'a field outside $retainKeys', patch: { metadata: { $retainKeys: ['name'], labels: { a: 'b' } } }, code: 400, reason: 'BadRequest', message: 'invalid patch format of retainKeys' },
    { name: 'a malformed $setElementOrder key', patch: { metadata: { '$setElementOrderX/finalizers': [] } }, code: 400, reason: 'BadRequest', message: 'invalid patch format of setElementOrder list' },
    { name: 'a patch list out of $setElementOrder order', patch: onPodSpec({ '$setElementOrder/containers': [{ name: 'main' }, { name: 'side' }], containers: [{ name: 'side' }, { name: 'main' }] }), code: 500, reason: '', message: /^the order in patch list:/ },
    { name: 'a list of lists', patch: { metadata: { finalizers: [['x']] } }, obj: noFinalizers(), code: 422, reason: 'Invalid', message: GENERIC_422 },
    { name: 'list items of different types', patch: { metadata: { finalizers: [1] } }, code: 500, reason: '', message: 'list element types are not identical: [[a.example.com/one] [1]]' },
    { name: 'a body that is not an object', patch: [1], code: 400, reason: 'BadRequest', message: 'json: cannot unmarshal array into Go value of type map[string]interface {}' },
  ];
  for (const c of errors) {
    it(`${c.name} → ${c.code}`, () => {
      const s = statusOf(() => smp(c.patch, c.obj));
      expect([s.code, s.reason]).to.deep.equal([c.code, c.reason]);
      if (typeof c.message === 'string') expect(s.message).to.equal(c.message);
      else expect(s.message).to.match(c.message);
    });
  }
});

describe('unsupported patch types', () => {
  it('knows which kinds have a strategic-merge schema', () => {
    expect(['Pod', 'Job', 'Namespace', 'Secret', 'ConfigMap', 'ServiceAccount', 'Event', 'Lease', 'CustomResourceDefinition'].every(strategicSupported)).to.equal(true);
    expect(strategicSupported('MediaJob')).to.equal(false);
  });

  it('strategic merge on a custom resource → 415 listing what a real apiserver accepts', () => {
    const cr: KubeObject = { apiVersion: 'media.example.com/v1', kind: 'MediaJob', metadata: { name: 'x' } };
    expect(statusOf(() => applyPatch(cr, {}, 'strategic', 'MediaJob'))).to.deep.include({
      code: 415,
      reason: 'UnsupportedMediaType',
      message: 'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
    });
  });
});
