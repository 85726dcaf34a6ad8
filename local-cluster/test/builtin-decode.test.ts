// Decoding of built-in bodies (src/builtin-decode.ts): what kube-apiserver's JSON decoding of its Go
// structs answers, from Kubernetes v1.32's own definitions. Each row: a change to a valid Deployment and
// the decode error or unknown fields it brings.
import { expect } from 'chai';
import { decodeBuiltin, definitionOf, k8sDefinitions } from '../src/builtin-decode.js';
import { K8S_ROOTS } from '../src/openapi/extract-k8s-definitions.js';
import type { KubeObject } from '../src/types.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const DEPLOYMENT = { group: 'apps', version: 'v1', kind: 'Deployment' };

function deployment(edit: (d: Obj) => void = () => {}): KubeObject {
  const d: Obj = {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', labels: { app: 'web' } },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'web' } },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: '25%' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: {
          containers: [{
            name: 'web', image: 'nginx', env: [{ name: 'A', value: 'b' }],
            ports: [{ containerPort: 8080, protocol: 'TCP' }],
            resources: { requests: { cpu: '250m', memory: 256 }, limits: { memory: '512Mi' } },
          }],
        },
      },
    },
  };
  edit(d);
  return d as KubeObject;
}

const cases: Array<[string, (d: Obj) => void, { typeError?: string; unknown?: string[] }]> = [
  ['a valid Deployment', () => {}, {}],
  ['replicas as a string', (d) => (d.spec.replicas = 'two'),
    { typeError: 'json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32' }],
  ['replicas with a fraction', (d) => (d.spec.replicas = 1.5),
    { typeError: 'json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32' }],
  ['replicas past int32', (d) => (d.spec.replicas = 3_000_000_000),
    { typeError: 'json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32' }],
  ['an env value as a number (the path has no indices)', (d) => (d.spec.template.spec.containers[0].env[0].value = 5),
    { typeError: 'json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value of type string' }],
  ['containers as an object', (d) => (d.spec.template.spec.containers = { name: 'web' }),
    { typeError: 'json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container' }],
  ['spec as a string', (d) => (d.spec = 'x'),
    { typeError: 'json: cannot unmarshal string into Go struct field Deployment.spec of type v1.DeploymentSpec' }],
  ['a label value as a number (a map value adds no path step)', (d) => (d.metadata.labels.app = 1),
    { typeError: 'json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string' }],
  ['maxUnavailable as a bool (intstr unmarshals into its int32)', (d) => (d.spec.strategy.rollingUpdate.maxUnavailable = true),
    { typeError: 'json: cannot unmarshal bool into Go struct field RollingUpdateDeployment.spec.strategy.rollingUpdate.maxUnavailable of type int32' }],
  ['a quantity that is not one', (d) => (d.spec.template.spec.containers[0].resources.limits.memory = 'lots'),
    { typeError: "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" }],
  ['unknown fields, in key order, with indices', (d) => {
    d.spec.template.spec.containers[0].imagePullPolice = 'Always';
    d.spec.foo = 1;
    d.metadata.bar = 2;
  }, { unknown: ['metadata.bar', 'spec.foo', 'spec.template.spec.containers[0].imagePullPolice'] }],
  ['a type error and an unknown field: the type error is what is reported', (d) => {
    d.spec.replicas = 'two';
    d.spec.foo = 1;
  }, { typeError: 'json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32', unknown: ['spec.foo'] }],
];

describe('builtin-decode: built-in bodies decoded as kube-apiserver decodes them', () => {
  for (const [name, edit, want] of cases) {
    it(name, () => {
      const got = decodeBuiltin(DEPLOYMENT, deployment(edit))!;
      expect({ typeError: got.typeError, unknown: got.unknown }).to.deep.equal({ typeError: want.typeError, unknown: want.unknown ?? [] });
    });
  }

  it('knows the deploy-time kinds and the core kinds the manifests use, and nothing it does not carry', () => {
    for (const [group, kind] of [['apps', 'Deployment'], ['', 'Service'], ['policy', 'PodDisruptionBudget'], ['networking.k8s.io', 'NetworkPolicy'],
      ['rbac.authorization.k8s.io', 'Role'], ['rbac.authorization.k8s.io', 'ClusterRoleBinding'], ['', 'Namespace'], ['', 'Secret']]) {
      expect(definitionOf({ group: group!, version: 'v1', kind: kind! }), kind).to.be.a('string');
    }
    expect(decodeBuiltin({ group: 'batch', version: 'v1', kind: 'Job' }, deployment())).to.equal(undefined);
  });

  it('holds v1.32 definitions: PodSpec has 1.32\'s pod-level resources, no field of a later release', () => {
    const props = k8sDefinitions()['io.k8s.api.core.v1.PodSpec']!.properties as Obj;
    expect(props).to.have.property('resources');
    expect(props).not.to.have.property('hostnameOverride'); // 1.34
  });
});

describe('k8s-v1.32-definitions.json', () => {
  it('is the closure of the extractor\'s roots: every root there, every $ref resolved, nothing else', () => {
    const defs = k8sDefinitions();
    const reached = new Set<string>();
    const queue = [...K8S_ROOTS];
    while (queue.length) {
      const name = queue.pop()!;
      if (reached.has(name)) continue;
      expect(defs, name).to.have.property(name);
      reached.add(name);
      JSON.stringify(defs[name], (key, value: unknown) => {
        if (key === '$ref' && typeof value === 'string') queue.push(value.slice('#/components/schemas/'.length));
        return value;
      });
    }
    expect([...reached].sort()).to.deep.equal(Object.keys(defs).sort());
  });
});
