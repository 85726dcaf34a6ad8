import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { BUILTIN_TYPES } from '../src/builtin-types.js';
import {
  BUILTIN_SCHEMAS_PATH, generateBuiltinSchemas, schemaNameFor, serializeBuiltinSchemas,
} from '../src/openapi/generate-builtin.js';
import {
  builtinSchemas, groupVersionPath, openApiDocument, openApiDocumentJson, openApiHash, openApiIndex, restFriendlyName,
} from '../src/openapi/index.js';
import { KIND_SCHEMAS, type StructSchema } from '../src/patch/schemas.js';
import type { JSONSchemaProps, ResourceType } from '../src/types.js';
import { startTestCluster, type TestCluster } from './support.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const MEDIAJOB_SCHEMA: JSONSchemaProps = {
  type: 'object',
  description: 'MediaJob transcodes one input.',
  properties: {
    spec: {
      type: 'object',
      required: ['input'],
      properties: {
        input: { type: 'string', description: 'URL of the input.' },
        preset: { type: 'string', enum: ['fast', 'slow'], default: 'fast' },
        port: { 'x-kubernetes-int-or-string': true },
        template: { type: 'object', 'x-kubernetes-embedded-resource': true, 'x-kubernetes-preserve-unknown-fields': true },
      },
    },
    status: { type: 'object', properties: { phase: { type: 'string' } } },
  },
};

function mediaJobs(extra: Partial<ResourceType> = {}): ResourceType {
  return {
    group: 'mediajobs.io', version: 'v1alpha1', kind: 'MediaJob', listKind: 'MediaJobList', plural: 'mediajobs',
    singular: 'mediajob', namespaced: true, shortNames: ['mj'], categories: ['all'], statusSubresource: true,
    builtin: false, schema: MEDIAJOB_SCHEMA, ...extra,
  };
}

const TYPES = [...BUILTIN_TYPES, mediaJobs()];
const CRD_PATH = 'apis/mediajobs.io/v1alpha1';

function doc(path: string, types: ResourceType[] = TYPES): Json {
  const d = openApiDocument(types, path);
  expect(d, path).to.not.equal(undefined);
  return d as Json;
}

function gvk(rt: ResourceType): Json {
  return { group: rt.group, kind: rt.kind, version: rt.version };
}

/** cli-runtime query_param_verifier_v3 supportsQueryParamV3, over every PATCH operation. */
function patchOperationsFor(d: Json, rt: ResourceType): Json[] {
  return Object.values(d.paths as Json)
    .map((p: Json) => p.patch)
    .filter((op: Json | undefined) => op && JSON.stringify(op['x-kubernetes-group-version-kind']) === JSON.stringify(gvk(rt)));
}

/** kubectl explain (plaintext.tmpl): GVK from an operation on the resource's paths, then the tagged schema. */
function explainSchema(d: Json, rt: ResourceType): Json | undefined {
  const prefix = rt.group ? `/apis/${rt.group}` : '/api';
  const candidates = [
    `${prefix}/${rt.version}/${rt.plural}`, `${prefix}/${rt.version}/${rt.plural}/{name}`,
    `${prefix}/${rt.version}/namespaces/{namespace}/${rt.plural}`, `${prefix}/${rt.version}/namespaces/{namespace}/${rt.plural}/{name}`,
  ];
  let found: Json | undefined;
  for (const path of candidates) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
      found ??= d.paths[path]?.[method]?.['x-kubernetes-group-version-kind'];
    }
  }
  if (!found) return undefined;
  return Object.values(d.components.schemas as Json).find((s: Json) =>
    (s['x-kubernetes-group-version-kind'] ?? []).some((t: Json) => JSON.stringify(t) === JSON.stringify(found)));
}

function resolve(d: Json, schema: Json): Json {
  const ref: string | undefined = schema.$ref ?? schema.allOf?.[0]?.$ref;
  return ref ? d.components.schemas[ref.replace('#/components/schemas/', '')] : schema;
}

/**
 * strategicpatch.PatchMetaFromOpenAPIV3, as kubectl apply uses it: walk the
 * properties from the kind's schema (through allOf[0], $ref and array items)
 * and read the patch extensions of the last field.
 */
function patchMetaV3(d: Json, kindSchema: Json, path: string[]): { strategy?: string; mergeKey?: string } {
  let schema = kindSchema;
  let field: Json = {};
  for (const key of path) {
    field = schema.properties?.[key];
    expect(field, `${path.join('.')}: no property ${key}`).to.not.equal(undefined);
    let next: Json = field.type === 'array' ? field.items : field;
    next = next.allOf?.[0] ?? next;
    schema = next.$ref ? d.components.schemas[String(next.$ref).replace('#/components/schemas/', '')] : next;
  }
  return { strategy: field['x-kubernetes-patch-strategy'], mergeKey: field['x-kubernetes-patch-merge-key'] };
}

describe('openapi', () => {
  describe('index', () => {
    const index = openApiIndex(TYPES) as Json;

    it('lists one document per served group/version', () => {
      expect(Object.keys(index.paths)).to.deep.equal([
        'api/v1', 'apis/apiextensions.k8s.io/v1', 'apis/apps/v1', 'apis/batch/v1', 'apis/coordination.k8s.io/v1', CRD_PATH,
        'apis/networking.k8s.io/v1', 'apis/policy/v1', 'apis/rbac.authorization.k8s.io/v1',
      ]);
    });

    it('links each document with the upper-case hex SHA-512 of its served bytes', () => {
      for (const [path, entry] of Object.entries(index.paths as Json)) {
        const json = openApiDocumentJson(TYPES, path)!;
        const hash = createHash('sha512').update(json).digest('hex').toUpperCase();
        expect(entry).to.deep.equal({ serverRelativeURL: `/openapi/v3/${path}?hash=${hash}` });
        expect(openApiHash(json)).to.match(/^[0-9A-F]{128}$/);
      }
    });

    it('keeps a hash stable for the same types and changes it with the CRD schema', () => {
      const again = openApiIndex([...BUILTIN_TYPES, mediaJobs()]) as Json;
      expect(again.paths[CRD_PATH]).to.deep.equal(index.paths[CRD_PATH]);
      const changed = openApiIndex([...BUILTIN_TYPES, mediaJobs({ schema: { type: 'object' } })]) as Json;
      expect(changed.paths[CRD_PATH]).to.not.deep.equal(index.paths[CRD_PATH]);
      expect(changed.paths['apis/batch/v1']).to.deep.equal(index.paths['apis/batch/v1']);
    });
  });

  it('has no document for a group/version that is not served', () => {
    expect(openApiDocument(TYPES, 'apis/nope.io/v1')).to.equal(undefined);
    expect(groupVersionPath({ group: '', version: 'v1' })).to.equal('api/v1');
  });

  describe('every served resource', () => {
    for (const rt of TYPES) {
      const d = doc(groupVersionPath(rt));

      it(`${rt.plural}: every PATCH for its GVK takes fieldValidation (kubectl apply --validate=strict)`, () => {
        const patches = patchOperationsFor(d, rt);
        expect(patches.length).to.be.greaterThan(0);
        for (const op of patches) {
          expect(op.parameters.map((p: Json) => p.name)).to.include('fieldValidation');
          expect(op['x-kubernetes-action']).to.equal('patch');
        }
      });

      it(`${rt.plural}: kubectl explain finds a schema tagged with its GVK`, () => {
        const schema = explainSchema(d, rt);
        expect(schema, rt.kind).to.not.equal(undefined);
        expect(schema!.properties).to.include.keys('apiVersion', 'kind', 'metadata');
      });
    }
  });

  it('resolves every $ref of every document', () => {
    for (const path of Object.keys((openApiIndex(TYPES) as Json).paths)) {
      const d = doc(path);
      for (const [, name] of JSON.stringify(d).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)) {
        expect(d.components.schemas, `${path} ${name}`).to.have.property(name!);
      }
    }
  });

  describe('custom resource document', () => {
    const d = doc(CRD_PATH);
    const kind = d.components.schemas['io.mediajobs.v1alpha1.MediaJob'];

    it('is titled like the CRD builder and names schemas like ToRESTFriendlyName', () => {
      expect(d.openapi).to.equal('3.0.0');
      expect(d.info).to.deep.equal({ title: 'Kubernetes CRD Swagger', version: 'v0.1.0' });
      expect(Object.keys(d.components.schemas)).to.include.members([
        'io.mediajobs.v1alpha1.MediaJob', 'io.mediajobs.v1alpha1.MediaJobList',
        'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta', 'io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta',
        'io.k8s.apimachinery.pkg.apis.meta.v1.Status', 'io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions',
        'io.k8s.apimachinery.pkg.apis.meta.v1.Patch', 'io.k8s.apimachinery.pkg.apis.meta.v1.Time',
      ]);
      expect(restFriendlyName({ group: 'media.example.com', version: 'v1' }, 'MediaJob')).to.equal('com.example.media.v1.MediaJob');
    });

    it('carries the CRD schema with required and enum, as kubectl explain prints them', () => {
      expect(kind['x-kubernetes-group-version-kind']).to.deep.equal([{ group: 'mediajobs.io', kind: 'MediaJob', version: 'v1alpha1' }]);
      expect(kind.description).to.equal('MediaJob transcodes one input.');
      expect(kind.properties.spec.required).to.deep.equal(['input']);
      expect(kind.properties.spec.properties.input).to.deep.equal({ type: 'string', description: 'URL of the input.' });
      expect(kind.properties.spec.properties.preset.enum).to.deep.equal(['fast', 'slow']);
    });

    it('adds apiVersion, kind and metadata (allOf ObjectMeta)', () => {
      expect(kind.properties.apiVersion.type).to.equal('string');
      expect(kind.properties.apiVersion.description).to.match(/^APIVersion defines the versioned schema/);
      expect(kind.properties.kind.description).to.match(/^Kind is a string value representing the REST resource/);
      expect(kind.properties.metadata).to.deep.equal({
        allOf: [{ $ref: '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta' }],
        description: "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
      });
    });

    it('unfolds int-or-string and embedded resources like the structural schema does', () => {
      expect(kind.properties.spec.properties.port.anyOf).to.deep.equal([{ type: 'integer' }, { type: 'string' }]);
      const template = kind.properties.spec.properties.template;
      expect(template.properties).to.have.keys('apiVersion', 'kind', 'metadata');
      expect(template.required).to.deep.equal(['kind', 'apiVersion']);
    });

    it('describes the list kind', () => {
      const list = d.components.schemas['io.mediajobs.v1alpha1.MediaJobList'];
      expect(list['x-kubernetes-group-version-kind']).to.deep.equal([{ group: 'mediajobs.io', kind: 'MediaJobList', version: 'v1alpha1' }]);
      expect(list.required).to.deep.equal(['items']);
      expect(list.properties.items.items).to.deep.equal({ $ref: '#/components/schemas/io.mediajobs.v1alpha1.MediaJob' });
    });

    it('serves the all-namespaces list, collection, item and status paths', () => {
      expect(Object.keys(d.paths)).to.deep.equal([
        '/apis/mediajobs.io/v1alpha1/mediajobs',
        '/apis/mediajobs.io/v1alpha1/namespaces/{namespace}/mediajobs',
        '/apis/mediajobs.io/v1alpha1/namespaces/{namespace}/mediajobs/{name}',
        '/apis/mediajobs.io/v1alpha1/namespaces/{namespace}/mediajobs/{name}/status',
      ]);
      const item = d.paths['/apis/mediajobs.io/v1alpha1/namespaces/{namespace}/mediajobs/{name}'];
      expect(Object.keys(item)).to.have.members(['get', 'put', 'patch', 'delete', 'parameters']);
      expect(item.parameters.map((p: Json) => p.name)).to.deep.equal(['name', 'namespace', 'pretty']);
      expect(item.patch.operationId).to.equal('patchMediajobsIoV1alpha1NamespacedMediaJob');
      expect(item.patch.tags).to.deep.equal(['mediajobsIo_v1alpha1']);
      expect(Object.keys(item.patch.requestBody.content)).to.deep.equal([
        'application/apply-patch+yaml', 'application/json-patch+json', 'application/merge-patch+json',
      ]);
      const status = d.paths['/apis/mediajobs.io/v1alpha1/namespaces/{namespace}/mediajobs/{name}/status'];
      expect(status.patch.operationId).to.equal('patchMediajobsIoV1alpha1NamespacedMediaJobStatus');
      expect(status.patch.description).to.equal('partially update status of the specified MediaJob');
      const all = d.paths['/apis/mediajobs.io/v1alpha1/mediajobs'];
      expect(all.get.operationId).to.equal('listMediajobsIoV1alpha1MediaJobForAllNamespaces');
      expect(all.parameters.map((p: Json) => p.name)).to.include.members(['watch', 'labelSelector', 'limit', 'pretty']);
    });

    it('still gives explain a tagged object when the CRD has no schema', () => {
      const bare = doc(CRD_PATH, [mediaJobs({ schema: undefined })]);
      expect(bare.components.schemas['io.mediajobs.v1alpha1.MediaJob']).to.deep.equal({
        type: 'object', 'x-kubernetes-group-version-kind': [{ group: 'mediajobs.io', kind: 'MediaJob', version: 'v1alpha1' }],
      });
    });
  });

  describe('built-in documents', () => {
    it('describe Job from the generated schemas, with required fields', () => {
      const d = doc('apis/batch/v1');
      expect(d.info).to.deep.equal({ title: 'Kubernetes', version: 'unversioned' });
      const job = d.components.schemas['io.k8s.api.batch.v1.Job'];
      expect(job['x-kubernetes-group-version-kind']).to.deep.equal([{ group: 'batch', kind: 'Job', version: 'v1' }]);
      expect(job.properties.spec.allOf).to.deep.equal([{ $ref: '#/components/schemas/io.k8s.api.batch.v1.JobSpec' }]);
      expect(d.components.schemas['io.k8s.api.batch.v1.JobSpec'].required).to.deep.equal(['template']);
      const container = resolve(d, { $ref: '#/components/schemas/io.k8s.api.core.v1.Container' });
      expect(container.required).to.deep.equal(['name']);
      expect(container.properties.name.description).to.match(/^Name of the container specified as a DNS_LABEL/);
    });

    it('give PATCH on built-ins strategic merge patch and x-kubernetes-action', () => {
      const d = doc('apis/batch/v1');
      const patch = d.paths['/apis/batch/v1/namespaces/{namespace}/jobs/{name}'].patch;
      expect(patch.operationId).to.equal('patchBatchV1NamespacedJob');
      expect(patch.tags).to.deep.equal(['batch_v1']);
      expect(patch.requestBody.content).to.have.property('application/strategic-merge-patch+json');
      expect(patch.parameters.map((p: Json) => p.name)).to.deep.equal(['dryRun', 'fieldManager', 'fieldValidation', 'force']);
      const collection = d.paths['/apis/batch/v1/namespaces/{namespace}/jobs'];
      expect(collection.delete.operationId).to.equal('deleteBatchV1CollectionNamespacedJob');
      expect(collection.get.description).to.equal('list or watch objects of kind Job');
    });

    it('serve pods/log and leave deletecollection out for namespaces', () => {
      const d = doc('api/v1');
      const logPath = d.paths['/api/v1/namespaces/{namespace}/pods/{name}/log'];
      expect(logPath.get.operationId).to.equal('readCoreV1NamespacedPodLog');
      expect(logPath.get.responses['200'].content).to.have.property('text/plain');
      // A path with one operation has all its parameters on the path item.
      expect(logPath.parameters.map((p: Json) => p.name)).to.include.members(['container', 'follow', 'name', 'namespace', 'tailLines']);
      expect(d.paths['/api/v1/namespaces']).to.not.have.property('delete');
      expect(d.paths['/api/v1/namespaces/{namespace}/events'].post.description).to.equal('create an Event');
    });

    it('carry the strategic merge patch tags kubectl apply reads (PatchMetaFromOpenAPIV3)', () => {
      const batch = doc('apis/batch/v1');
      const job = batch.components.schemas['io.k8s.api.batch.v1.Job'];
      const podSpec = ['spec', 'template', 'spec'];
      expect(patchMetaV3(batch, job, [...podSpec, 'containers'])).to.deep.equal({ strategy: 'merge', mergeKey: 'name' });
      expect(patchMetaV3(batch, job, [...podSpec, 'initContainers'])).to.deep.equal({ strategy: 'merge', mergeKey: 'name' });
      expect(patchMetaV3(batch, job, [...podSpec, 'containers', 'env'])).to.deep.equal({ strategy: 'merge', mergeKey: 'name' });
      expect(patchMetaV3(batch, job, [...podSpec, 'containers', 'volumeMounts'])).to.deep.equal({ strategy: 'merge', mergeKey: 'mountPath' });
      expect(patchMetaV3(batch, job, [...podSpec, 'containers', 'ports'])).to.deep.equal({ strategy: 'merge', mergeKey: 'containerPort' });
      expect(patchMetaV3(batch, job, [...podSpec, 'volumes'])).to.deep.equal({ strategy: 'merge,retainKeys', mergeKey: 'name' });
      expect(patchMetaV3(batch, job, ['metadata', 'ownerReferences'])).to.deep.equal({ strategy: 'merge', mergeKey: 'uid' });
      expect(patchMetaV3(batch, job, ['metadata', 'finalizers'])).to.deep.equal({ strategy: 'merge', mergeKey: undefined });
      expect(patchMetaV3(batch, job, ['status', 'conditions'])).to.deep.equal({ strategy: 'merge', mergeKey: 'type' });
      // Untagged fields are replaced whole.
      expect(patchMetaV3(batch, job, [...podSpec, 'tolerations'])).to.deep.equal({ strategy: undefined, mergeKey: undefined });
      expect(patchMetaV3(batch, job, [...podSpec, 'containers', 'command'])).to.deep.equal({ strategy: undefined, mergeKey: undefined });

      const core = doc('api/v1');
      const pod = core.components.schemas['io.k8s.api.core.v1.Pod'];
      expect(patchMetaV3(core, pod, ['spec', 'containers'])).to.deep.equal({ strategy: 'merge', mergeKey: 'name' });
      expect(patchMetaV3(core, pod, ['spec', 'ephemeralContainers', 'env'])).to.deep.equal({ strategy: 'merge', mergeKey: 'name' });
      expect(patchMetaV3(core, pod, ['spec', 'imagePullSecrets'])).to.deep.equal({ strategy: 'merge', mergeKey: 'name' });
      expect(patchMetaV3(core, pod, ['status', 'conditions'])).to.deep.equal({ strategy: 'merge', mergeKey: 'type' });
      expect(patchMetaV3(core, pod, ['status', 'podIPs'])).to.deep.equal({ strategy: 'merge', mergeKey: 'ip' });
      const sa = core.components.schemas['io.k8s.api.core.v1.ServiceAccount'];
      expect(patchMetaV3(core, sa, ['secrets'])).to.deep.equal({ strategy: 'merge', mergeKey: 'name' });
    });

    it('publish every merge key the server merges with (patch/schemas.ts)', () => {
      const schemas = builtinSchemas();
      const check = (schemaName: string, struct: StructSchema, where: string): void => {
        for (const [field, meta] of Object.entries(struct)) {
          const prop = (schemas[schemaName]!.properties as Json)[field];
          if (meta.strategy) {
            expect(String(prop['x-kubernetes-patch-strategy']).split(','), `${where}.${field}`).to.include(meta.strategy);
            expect(prop['x-kubernetes-patch-merge-key'], `${where}.${field}`).to.equal(meta.mergeKey);
          }
          if (meta.schema) {
            const ref: string = prop.$ref ?? prop.allOf?.[0]?.$ref ?? prop.items.$ref;
            check(ref.replace('#/components/schemas/', ''), meta.schema, `${where}.${field}`);
          }
        }
      };
      for (const rt of BUILTIN_TYPES) {
        const root = Object.entries(schemas).find(([, s]) =>
          ((s['x-kubernetes-group-version-kind'] ?? []) as Json[]).some((t) => t.group === rt.group && t.version === rt.version && t.kind === rt.kind));
        check(root![0], KIND_SCHEMAS[rt.kind]!, rt.kind);
      }
    });

    it('carry the list and map types of the v1.32 types', () => {
      const schemas = builtinSchemas();
      const props = (name: string): Json => schemas[name]!.properties as Json;
      const podSpec = props('io.k8s.api.core.v1.PodSpec');
      expect(podSpec.containers).to.include({ 'x-kubernetes-list-type': 'map' });
      expect(podSpec.containers['x-kubernetes-list-map-keys']).to.deep.equal(['name']);
      expect(podSpec.topologySpreadConstraints['x-kubernetes-list-map-keys']).to.deep.equal(['topologyKey', 'whenUnsatisfiable']);
      expect(podSpec.tolerations['x-kubernetes-list-type']).to.equal('atomic');
      expect(podSpec.nodeSelector['x-kubernetes-map-type']).to.equal('atomic');
      const container = props('io.k8s.api.core.v1.Container');
      expect(container.ports['x-kubernetes-list-map-keys']).to.deep.equal(['containerPort', 'protocol']);
      expect(container.volumeMounts['x-kubernetes-list-map-keys']).to.deep.equal(['mountPath']);
      expect(container.command['x-kubernetes-list-type']).to.equal('atomic');
      const meta = props('io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta');
      expect(meta.finalizers['x-kubernetes-list-type']).to.equal('set');
      expect(meta.ownerReferences['x-kubernetes-list-map-keys']).to.deep.equal(['uid']);
      expect(props('io.k8s.api.batch.v1.JobStatus').conditions['x-kubernetes-list-type']).to.equal('atomic');
      expect(props('io.k8s.api.batch.v1.UncountedTerminatedPods').succeeded['x-kubernetes-list-type']).to.equal('set');
      expect(schemas['io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector']!['x-kubernetes-map-type']).to.equal('atomic');
      expect(schemas['io.k8s.api.core.v1.LocalObjectReference']!['x-kubernetes-map-type']).to.equal('atomic');
      // The List kinds' items carry no list type, as in the real spec.
      expect(props('io.k8s.api.batch.v1.JobList').items).to.not.have.property('x-kubernetes-list-type');
    });

    it('have a tagged schema for every served built-in kind and its list', () => {
      const schemas = builtinSchemas();
      for (const rt of BUILTIN_TYPES) {
        for (const kind of [rt.kind, rt.listKind]) {
          const tagged = Object.values(schemas).some((s) =>
            ((s['x-kubernetes-group-version-kind'] ?? []) as Json[]).some((t) => t.group === rt.group && t.version === rt.version && t.kind === kind));
          expect(tagged, `${rt.group}/${rt.version} ${kind}`).to.equal(true);
        }
      }
    });
  });

  describe('generate-builtin', () => {
    it('maps client-node model names to Kubernetes definition names', () => {
      expect(schemaNameFor('V1Job')).to.equal('io.k8s.api.batch.v1.Job');
      expect(schemaNameFor('V1PodFailurePolicyRule')).to.equal('io.k8s.api.batch.v1.PodFailurePolicyRule');
      expect(schemaNameFor('V1Pod')).to.equal('io.k8s.api.core.v1.Pod');
      expect(schemaNameFor('CoreV1Event')).to.equal('io.k8s.api.core.v1.Event');
      expect(schemaNameFor('V1ObjectMeta')).to.equal('io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta');
      expect(schemaNameFor('V1Lease')).to.equal('io.k8s.api.coordination.v1.Lease');
      expect(schemaNameFor('V1CustomResourceDefinition')).to.equal('io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition');
      expect(schemaNameFor('ApiextensionsV1ServiceReference')).to.equal('io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ServiceReference');
    });

    it('checked-in builtin-schemas.json matches a fresh generation (run generate-builtin.ts if not)', () => {
      const fresh = serializeBuiltinSchemas(generateBuiltinSchemas());
      expect(readFileSync(BUILTIN_SCHEMAS_PATH, 'utf8') === fresh, 'builtin-schemas.json is stale').to.equal(true);
    });

    it('takes descriptions from JSDoc (unescaped) and times as meta/v1 Time', () => {
      const schemas = builtinSchemas();
      const podSpec = schemas['io.k8s.api.core.v1.PodSpec']!;
      const props = podSpec.properties as Json;
      expect(props.enableServiceLinks.description).to.contain("pod's environment variables");
      expect(props.containers.items).to.deep.equal({ $ref: '#/components/schemas/io.k8s.api.core.v1.Container' });
      expect(props.nodeSelector.additionalProperties).to.deep.equal({ type: 'string' });
      const jobStatus = schemas['io.k8s.api.batch.v1.JobStatus']!.properties as Json;
      expect(jobStatus.startTime.allOf).to.deep.equal([{ $ref: '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Time' }]);
      expect(jobStatus.active).to.include({ type: 'integer', format: 'int32' });
      expect((schemas['io.k8s.api.core.v1.Secret']!.properties as Json).data.additionalProperties).to.deep.equal({ format: 'byte', type: 'string' });
    });
  });
});

// kubectl apply decides "unchanged" when the three-way patch it computes from
// the /openapi/v3 schema is "{}" (apply/patcher.go patchSimple); the merge
// keys decide whether the server's defaults inside lists count as changes.
describe('kubectl apply against the built-in schemas', () => {
  let t: TestCluster;

  before(async () => {
    t = await startTestCluster();
  });

  after(async () => {
    await t?.stop();
  });

  const job = (labels: string): string => `apiVersion: batch/v1
kind: Job
metadata:
  name: reapply
  labels:
${labels}
spec:
  backoffLimit: 2
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox
          command: ["sh", "-c", "sleep 30"]
          env:
            - name: MODE
              value: fast
          ports:
            - containerPort: 8080
          volumeMounts:
            - name: scratch
              mountPath: /scratch
      volumes:
        - name: scratch
          emptyDir: {}
`;

  it('re-applying an unchanged Job prints "unchanged" and sends no patch', async () => {
    const path = t.manifest('reapply.yaml', job('    team: media'));
    expect((await t.kubectl(['apply', '-f', path])).stdout).to.equal('job.batch/reapply created\n');
    const again = await t.kubectl(['apply', '-f', path, '-v=6']);
    expect(again.stdout).to.equal('job.batch/reapply unchanged\n');
    expect(again.stderr).to.not.match(/\bPATCH\b/);
  });

  it('applying a changed label prints "configured" and patches only the label', async () => {
    const path = t.manifest('reapply.yaml', job('    team: video'));
    const res = await t.kubectl(['apply', '-f', path, '-v=8']);
    expect(res.stdout).to.equal('job.batch/reapply configured\n');
    const body = /"Request Body" body="(\{.*\})"/.exec(res.stderr.split('\n').find((l) => l.includes('"Request Body"') && l.includes('team')) ?? '');
    const patch = JSON.parse(JSON.parse(`"${body![1]}"`) as string) as Json;
    expect(patch.metadata.labels).to.deep.equal({ team: 'video' });
    expect(patch).to.not.have.property('spec');
    const label = await t.kubectl(['get', 'job', 'reapply', '-o', 'jsonpath={.metadata.labels.team}']);
    expect(label.stdout).to.equal('video');
  });
});
