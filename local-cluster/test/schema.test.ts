import { expect } from 'chai';
import type { JSONSchemaProps, KubeObject } from '../src/types.js';
import { applyDefaults, prune, unknownFields } from '../src/schema/structural.js';
import { validate } from '../src/schema/validate.js';
import { crdStatus, defaultCrd, resourceTypesFromCrd, validateCrd } from '../src/schema/crd.js';

// The schema of the example MediaJob CRD from the requirements, plus a few
// fields exercising the less common schema features.
function mediaJobSchema(): JSONSchemaProps {
  return {
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        required: ['input'],
        properties: {
          input: { type: 'string', minLength: 3, maxLength: 20, pattern: '^s3://' },
          preset: { type: 'string', enum: ['fast', 'slow'], default: 'fast' },
          retries: { type: 'integer', minimum: 0, maximum: 10, default: 2 },
          ratio: { type: 'number', exclusiveMinimum: true, minimum: 0 },
          port: { 'x-kubernetes-int-or-string': true },
          startAt: { type: 'string', format: 'date-time' },
          note: { type: 'string', nullable: true },
          labels: { type: 'object', additionalProperties: { type: 'string', maxLength: 5 } },
          tags: { type: 'array', maxItems: 2, items: { type: 'string' }, 'x-kubernetes-list-type': 'set' },
          outputs: {
            type: 'array',
            minItems: 1,
            items: {
              type: 'object',
              required: ['name'],
              properties: {
                name: { type: 'string' },
                codec: { type: 'string', default: 'h264' },
                options: { type: 'object', properties: { crf: { type: 'integer', default: 23 } } },
              },
            },
          },
          extra: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true, properties: { known: { type: 'object', properties: { a: { type: 'string' } } } } },
          template: {
            type: 'object',
            'x-kubernetes-embedded-resource': true,
            'x-kubernetes-preserve-unknown-fields': true,
          },
          podTemplate: {
            type: 'object',
            'x-kubernetes-embedded-resource': true,
            properties: { spec: { type: 'object', properties: { image: { type: 'string' } } } },
          },
        },
      },
      status: {
        type: 'object',
        properties: { phase: { type: 'string' } },
      },
    },
  };
}

function mediaJob(spec: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { apiVersion: 'media.example.com/v1', kind: 'MediaJob', metadata: { name: 'demo', namespace: 'default' }, spec, ...extra };
}

describe('schema: unknownFields and prune', () => {
  it('reports undeclared fields with kube paths, sorted like the pruning algorithm', () => {
    const obj = mediaJob({ input: 's3://a', zeta: 1, foo: { x: 1 }, outputs: [{ name: 'a', bar: true }, { name: 'b' }] }, { top: 1 });
    expect(unknownFields(obj, mediaJobSchema())).to.deep.equal(['spec.foo', 'spec.outputs[0].bar', 'spec.zeta', 'top']);
  });

  it('does not touch the object it inspects', () => {
    const obj = mediaJob({ input: 's3://a', foo: 1 });
    unknownFields(obj, mediaJobSchema());
    expect((obj.spec as Record<string, unknown>).foo).to.equal(1);
  });

  it('treats apiVersion, kind and metadata at the root as known, but reports unknown metadata fields last', () => {
    const obj = mediaJob({ input: 's3://a', foo: 1 });
    (obj.metadata as Record<string, unknown>).bogus = 'x';
    (obj.metadata as Record<string, unknown>).ownerReferences = [{ apiVersion: 'v1', kind: 'Pod', name: 'p', uid: 'u', extra: 1 }];
    expect(unknownFields(obj, mediaJobSchema())).to.deep.equal(['spec.foo', 'metadata.bogus', 'metadata.ownerReferences[0].extra']);
  });

  it('keeps unknown fields under x-kubernetes-preserve-unknown-fields but prunes declared children', () => {
    const obj = mediaJob({ input: 's3://a', extra: { anything: { deep: 1 }, known: { a: 'x', b: 'y' } } });
    expect(unknownFields(obj, mediaJobSchema())).to.deep.equal(['spec.extra.known.b']);
    prune(obj, mediaJobSchema());
    expect((obj.spec as Record<string, unknown>).extra).to.deep.equal({ anything: { deep: 1 }, known: { a: 'x' } });
  });

  it('knows map keys under additionalProperties and reports below them with dots', () => {
    const schema: JSONSchemaProps = {
      type: 'object',
      properties: { spec: { type: 'object', additionalProperties: { type: 'object', properties: { a: { type: 'string' } } } } },
    };
    const obj = mediaJob({ one: { a: 'x', b: 'y' }, two: {} });
    expect(unknownFields(obj, schema)).to.deep.equal(['spec.one.b']);
  });

  it('prunes everything below additionalProperties: true, as a nil structural schema does', () => {
    const schema: JSONSchemaProps = { type: 'object', properties: { spec: { type: 'object', additionalProperties: true } } };
    const obj = mediaJob({ scalar: 1, nested: { x: 1 } });
    expect(unknownFields(obj, schema)).to.deep.equal(['spec.nested.x']);
    prune(obj, schema);
    expect(obj.spec).to.deep.equal({ scalar: 1, nested: {} });
  });

  it('allows apiVersion, kind and metadata inside embedded resources and coerces their metadata', () => {
    const obj = mediaJob({
      input: 's3://a',
      template: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', labels: {}, weird: 1 }, spec: { whatever: true } },
      podTemplate: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'q' }, spec: { image: 'x', cpu: 1 }, status: {} },
    });
    expect(unknownFields(obj, mediaJobSchema())).to.deep.equal(['spec.podTemplate.spec.cpu', 'spec.podTemplate.status', 'spec.template.metadata.weird']);
    prune(obj, mediaJobSchema());
    const spec = obj.spec as Record<string, Record<string, unknown>>;
    expect(spec.template).to.deep.equal({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { whatever: true } });
    expect(spec.podTemplate).to.deep.equal({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'q' }, spec: { image: 'x' } });
  });

  it('accepts integers and strings for x-kubernetes-int-or-string without reporting them', () => {
    expect(unknownFields(mediaJob({ input: 's3://a', port: 8080 }), mediaJobSchema())).to.deep.equal([]);
    expect(unknownFields(mediaJob({ input: 's3://a', port: 'http' }), mediaJobSchema())).to.deep.equal([]);
  });

  it('prunes in place, keeps known metadata, and drops nulls of non-nullable fields without default', () => {
    const obj = mediaJob({ input: 's3://a', foo: 1, note: null, startAt: null, retries: null }, { status: { phase: 'Running', junk: 1 } });
    (obj.metadata as Record<string, unknown>).labels = { a: 'b' };
    (obj.metadata as Record<string, unknown>).clusterName = 'gone';
    prune(obj, mediaJobSchema());
    expect(obj).to.deep.equal({
      apiVersion: 'media.example.com/v1',
      kind: 'MediaJob',
      metadata: { name: 'demo', namespace: 'default', labels: { a: 'b' } },
      // note is nullable and retries has a default: both stay for defaulting/validation
      spec: { input: 's3://a', note: null, retries: null },
      status: { phase: 'Running' },
    });
  });
});

describe('schema: applyDefaults', () => {
  it('fills absent fields whose parent exists, including inside array items and defaulted objects', () => {
    const obj = mediaJob({ input: 's3://a', outputs: [{ name: 'a' }, { name: 'b', codec: 'vp9', options: {} }] });
    applyDefaults(obj, mediaJobSchema());
    const spec = obj.spec as Record<string, unknown>;
    expect(spec.preset).to.equal('fast');
    expect(spec.retries).to.equal(2);
    expect(spec.outputs).to.deep.equal([{ name: 'a', codec: 'h264' }, { name: 'b', codec: 'vp9', options: { crf: 23 } }]);
  });

  it('does not create missing parents', () => {
    const obj = mediaJob({ input: 's3://a' });
    delete obj.spec;
    applyDefaults(obj, mediaJobSchema());
    expect(obj.spec).to.equal(undefined);
  });

  it('keeps present values, replaces null only when not nullable', () => {
    const schema: JSONSchemaProps = {
      type: 'object',
      properties: {
        spec: {
          type: 'object',
          properties: {
            a: { type: 'string', default: 'x' },
            b: { type: 'string', default: 'y', nullable: true },
            c: { type: 'string', default: 'z' },
          },
        },
      },
    };
    const obj = mediaJob({ a: null, b: null, c: '' });
    applyDefaults(obj, schema);
    expect(obj.spec).to.deep.equal({ a: 'x', b: null, c: '' });
  });

  it('deep-copies defaults and applies defaults nested within a default', () => {
    const schema: JSONSchemaProps = {
      type: 'object',
      properties: {
        spec: {
          type: 'object',
          properties: {
            limits: { type: 'object', default: { cpu: '1' }, properties: { cpu: { type: 'string' }, memory: { type: 'string', default: '1Gi' } } },
          },
        },
      },
    };
    const first = mediaJob({});
    const second = mediaJob({});
    applyDefaults(first, schema);
    applyDefaults(second, schema);
    expect((first.spec as Record<string, unknown>).limits).to.deep.equal({ cpu: '1', memory: '1Gi' });
    ((first.spec as Record<string, Record<string, unknown>>).limits as Record<string, unknown>).cpu = 'changed';
    expect((second.spec as Record<string, unknown>).limits).to.deep.equal({ cpu: '1', memory: '1Gi' });
    expect(schema.properties?.spec?.properties?.limits?.default).to.deep.equal({ cpu: '1' });
  });

  it('defaults null map values and array items from additionalProperties and items', () => {
    const schema: JSONSchemaProps = {
      type: 'object',
      properties: {
        spec: {
          type: 'object',
          properties: {
            m: { type: 'object', additionalProperties: { type: 'object', default: {}, properties: { x: { type: 'integer', default: 1 } } } },
            l: { type: 'array', items: { type: 'string', default: 'd' } },
          },
        },
      },
    };
    const obj = mediaJob({ m: { a: null, b: { x: 5 } }, l: ['a', null] });
    applyDefaults(obj, schema);
    expect(obj.spec).to.deep.equal({ m: { a: { x: 1 }, b: { x: 5 } }, l: ['a', 'd'] });
  });
});

describe('schema: validate', () => {
  const schema = mediaJobSchema();
  const valid = { input: 's3://clip', outputs: [{ name: 'a' }] };

  it('accepts a valid object', () => {
    expect(validate(mediaJob(valid), schema)).to.deep.equal([]);
  });

  it('words enum failures as the apiserver does', () => {
    expect(validate(mediaJob({ ...valid, preset: 'medium' }), schema)).to.deep.equal([
      { reason: 'FieldValueNotSupported', field: 'spec.preset', message: 'Unsupported value: "medium": supported values: "fast", "slow"' },
    ]);
  });

  it('reports a missing required field', () => {
    expect(validate(mediaJob({ outputs: [{ name: 'a' }] }), schema)).to.deep.equal([
      { reason: 'FieldValueRequired', field: 'spec.input', message: 'Required value' },
    ]);
  });

  it('reports type errors with the Go type name as the value', () => {
    expect(validate(mediaJob({ ...valid, retries: 'three' }), schema)).to.deep.equal([
      { reason: 'FieldValueTypeInvalid', field: 'spec.retries', message: 'Invalid value: "string": spec.retries in body must be of type integer: "string"' },
    ]);
    expect(validate(mediaJob({ ...valid, retries: 1.5 }), schema)).to.deep.equal([
      { reason: 'FieldValueTypeInvalid', field: 'spec.retries', message: 'Invalid value: "number": spec.retries in body must be of type integer: "number"' },
    ]);
    expect(validate(mediaJob({ ...valid, port: true }), schema)[0]).to.deep.equal(
      { reason: 'FieldValueTypeInvalid', field: 'spec.port', message: 'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"' },
    );
  });

  it('reports bounds, lengths and patterns', () => {
    const causes = validate(mediaJob({ input: 'ab', outputs: [{ name: 'a' }], retries: 11, ratio: 0 }), schema);
    expect(causes).to.deep.equal([
      { reason: 'FieldValueInvalid', field: 'spec.input', message: 'Invalid value: "ab": spec.input in body should be at least 3 chars long' },
      { reason: 'FieldValueInvalid', field: 'spec.input', message: 'Invalid value: "ab": spec.input in body should match \'^s3://\'' },
      { reason: 'FieldValueInvalid', field: 'spec.retries', message: 'Invalid value: 11: spec.retries in body should be less than or equal to 10' },
      { reason: 'FieldValueInvalid', field: 'spec.ratio', message: 'Invalid value: 0: spec.ratio in body should be greater than 0' },
    ]);
    expect(validate(mediaJob({ ...valid, input: 's3://' + 'x'.repeat(30) }), schema)).to.deep.equal([
      { reason: 'FieldValueTooLong', field: 'spec.input', message: 'Too long: may not be more than 20 bytes' },
    ]);
  });

  it('uses [i] for array items and .key for map values, and checks item counts', () => {
    const causes = validate(mediaJob({ input: 's3://a', outputs: [{ name: 'a' }, { codec: 1 }], labels: { team: 'toolong' }, tags: ['a', 'b', 'c'] }), schema);
    expect(causes).to.deep.include({ reason: 'FieldValueTypeInvalid', field: 'spec.outputs[1].codec', message: 'Invalid value: "integer": spec.outputs[1].codec in body must be of type string: "integer"' });
    expect(causes).to.deep.include({ reason: 'FieldValueRequired', field: 'spec.outputs[1].name', message: 'Required value' });
    expect(causes).to.deep.include({ reason: 'FieldValueTooLong', field: 'spec.labels.team', message: 'Too long: may not be more than 5 bytes' });
    expect(causes).to.deep.include({ reason: 'FieldValueTooMany', field: 'spec.tags', message: 'Too many: 3: must have at most 2 items' });
    expect(validate(mediaJob({ input: 's3://a', outputs: [] }), schema)).to.deep.equal([
      { reason: 'FieldValueInvalid', field: 'spec.outputs', message: 'Invalid value: 0: spec.outputs in body should have at least 1 items' },
    ]);
  });

  it('orders causes like kube-openapi: a node\'s children before its required fields', () => {
    const causes = validate(mediaJob({ preset: 'medium', outputs: [{ name: 'a' }] }), schema);
    expect(causes.map((c) => c.field)).to.deep.equal(['spec.preset', 'spec.input']);
  });

  it('rejects null unless nullable', () => {
    expect(validate(mediaJob({ ...valid, note: null }), schema)).to.deep.equal([]);
    expect(validate(mediaJob({ ...valid, startAt: null }), schema)).to.deep.equal([
      { reason: 'FieldValueTypeInvalid', field: 'spec.startAt', message: 'Invalid value: "null": spec.startAt in body must be of type string: "null"' },
    ]);
  });

  it('checks supported formats and ignores unknown ones', () => {
    expect(validate(mediaJob({ ...valid, startAt: '2024-05-01T10:00:00Z' }), schema)).to.deep.equal([]);
    expect(validate(mediaJob({ ...valid, startAt: 'tomorrow' }), schema)).to.deep.equal([
      { reason: 'FieldValueTypeInvalid', field: 'spec.startAt', message: 'Invalid value: "tomorrow": spec.startAt in body must be of type date-time: "tomorrow"' },
    ]);
    const custom: JSONSchemaProps = { type: 'object', properties: { spec: { type: 'object', properties: { v: { type: 'string', format: 'semver' } } } } };
    expect(validate(mediaJob({ v: 'not-a-version' }), custom)).to.deep.equal([]);
  });

  it('reports anyOf failures the way kube-openapi does', () => {
    const s: JSONSchemaProps = {
      type: 'object',
      properties: { spec: { type: 'object', properties: { n: { type: 'integer', anyOf: [{ minimum: 10 }, { maximum: 1 }] } } } },
    };
    expect(validate(mediaJob({ n: 5 }), s)).to.deep.equal([
      { reason: 'FieldValueInvalid', field: '<nil>', message: 'Invalid value: "": "spec.n" must validate at least one schema (anyOf)' },
      { reason: 'FieldValueInvalid', field: 'spec.n', message: 'Invalid value: 5: spec.n in body should be greater than or equal to 10' },
    ]);
  });

  it('validates apiVersion and kind of embedded resources', () => {
    expect(validate(mediaJob({ ...valid, template: { metadata: {} } }), schema)).to.deep.equal([
      { reason: 'FieldValueRequired', field: 'spec.template.apiVersion', message: 'Required value' },
      { reason: 'FieldValueRequired', field: 'spec.template.kind', message: 'Required value' },
    ]);
  });

  it('rejects duplicates in x-kubernetes-list-type set lists', () => {
    expect(validate(mediaJob({ ...valid, tags: ['a', 'a'] }), schema)).to.deep.equal([
      { reason: 'FieldValueDuplicate', field: 'spec.tags[1]', message: 'Duplicate value: "a"' },
    ]);
  });

  it('caches the compiled validator per schema object', () => {
    const s = mediaJobSchema();
    expect(validate(mediaJob(valid), s)).to.deep.equal([]);
    expect(validate(mediaJob({ ...valid, preset: 'x' }), s)).to.have.length(1);
  });
});

function crd(overrides: { versions?: unknown[]; spec?: Record<string, unknown>; name?: string } = {}): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: overrides.name ?? 'mediajobs.media.example.com' },
    spec: {
      group: 'media.example.com',
      scope: 'Namespaced',
      names: { plural: 'mediajobs', singular: 'mediajob', kind: 'MediaJob', shortNames: ['mj'], categories: ['all'] },
      versions: overrides.versions ?? [{
        name: 'v1',
        served: true,
        storage: true,
        schema: { openAPIV3Schema: mediaJobSchema() },
        subresources: { status: {} },
        additionalPrinterColumns: [
          { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
          { name: 'Input', type: 'string', jsonPath: '.spec.input', priority: 1 },
        ],
      }],
      ...overrides.spec,
    },
  };
}

const v1 = (schema: JSONSchemaProps, extra: Record<string, unknown> = {}): Record<string, unknown> =>
  ({ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: schema }, ...extra });

describe('schema: validateCrd', () => {
  it('accepts a well-formed CRD', () => {
    expect(validateCrd(crd())).to.deep.equal([]);
  });

  it('requires the name to be plural.group and the group to have a dot', () => {
    expect(validateCrd(crd({ name: 'mediajobs.other.com' }))).to.deep.equal([
      { reason: 'FieldValueInvalid', field: 'metadata.name', message: 'Invalid value: "mediajobs.other.com": must be spec.names.plural+"."+spec.group' },
    ]);
    const causes = validateCrd(crd({ name: 'mediajobs.media', spec: { group: 'media' } }));
    expect(causes).to.deep.equal([
      { reason: 'FieldValueInvalid', field: 'spec.group', message: 'Invalid value: "media": should be a domain with at least one dot' },
    ]);
  });

  it('requires a scope (v1 has no default) and checks its value', () => {
    expect(validateCrd(crd({ spec: { scope: undefined } }))).to.deep.equal([
      { reason: 'FieldValueRequired', field: 'spec.scope', message: 'Required value' },
    ]);
    expect(validateCrd(crd({ spec: { scope: 'Global' } }))).to.deep.equal([
      { reason: 'FieldValueNotSupported', field: 'spec.scope', message: 'Unsupported value: "Global": supported values: "Cluster", "Namespaced"' },
    ]);
  });

  it('requires names.plural and names.kind', () => {
    const causes = validateCrd(crd({ name: '.media.example.com', spec: { names: { plural: '', kind: '' } } }));
    expect(causes.map((c) => `${c.field}: ${c.message}`)).to.include.members([
      'spec.names.plural: Required value',
      'spec.names.kind: Required value',
      'spec.names.listKind: Required value',
    ]);
  });

  it('requires exactly one storage version and a schema per version', () => {
    const none = validateCrd(crd({ versions: [v1(mediaJobSchema(), { storage: false })] }));
    expect(none).to.have.length(1);
    expect(none[0]?.field).to.equal('spec.versions');
    expect(none[0]?.message).to.match(/^Invalid value: \[\]apiextensions\.CustomResourceDefinitionVersion\{apiextensions\.CustomResourceDefinitionVersion\{Name:"v1", Served:true, Storage:false, .*\}\}: must have exactly one version marked as storage version$/);
    expect(validateCrd(crd({ versions: [] }))[0]?.message).to.match(/must have exactly one version marked as storage version$/);
    expect(validateCrd(crd({ versions: [{ name: 'v1', served: true, storage: true }] }))).to.deep.equal([
      { reason: 'FieldValueRequired', field: 'spec.versions[0].schema.openAPIV3Schema', message: 'Required value: schemas are required' },
    ]);
  });

  it('requires structural schemas, reporting the hoisted spec.validation path for a single version', () => {
    const schema: JSONSchemaProps = { type: 'object', properties: { spec: { type: 'object', properties: { foo: { description: 'untyped' } } } } };
    expect(validateCrd(crd({ versions: [v1(schema)] }))).to.deep.equal([
      {
        reason: 'FieldValueRequired',
        field: 'spec.validation.openAPIV3Schema.properties[spec].properties[foo].type',
        message: 'Required value: must not be empty for specified object fields',
      },
    ]);
  });

  it('reports per-version paths when versions have different schemas', () => {
    const broken: JSONSchemaProps = { type: 'object', properties: { spec: { type: 'array' } } };
    const causes = validateCrd(crd({ versions: [v1(mediaJobSchema(), { storage: false, name: 'v1alpha1' }), v1(broken)] }));
    expect(causes).to.deep.equal([
      { reason: 'FieldValueRequired', field: 'spec.versions[1].schema.openAPIV3Schema.properties[spec].items', message: 'Required value: must be specified' },
    ]);
  });

  it('accepts untyped nodes only with int-or-string or preserve-unknown-fields', () => {
    const schema: JSONSchemaProps = {
      type: 'object',
      properties: { spec: { type: 'object', properties: { a: { 'x-kubernetes-int-or-string': true }, b: { 'x-kubernetes-preserve-unknown-fields': true } } } },
    };
    expect(validateCrd(crd({ versions: [v1(schema)] }))).to.deep.equal([]);
  });

  it('forbids additionalProperties together with properties', () => {
    const schema: JSONSchemaProps = {
      type: 'object',
      properties: { spec: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: { type: 'string' } } },
    };
    expect(validateCrd(crd({ versions: [v1(schema)] }))).to.deep.equal([
      { reason: 'FieldValueForbidden', field: 'spec.validation.openAPIV3Schema.properties[spec].additionalProperties', message: 'Forbidden: additionalProperties and properties are mutual exclusive' },
    ]);
  });

  it('accepts CEL rules that compile, and refuses one that does not with cel-go\'s display of the error', () => {
    const schema = mediaJobSchema();
    schema.properties!.spec!['x-kubernetes-validations'] = [{ rule: 'self.retries < 5' }];
    expect(validateCrd(crd({ versions: [v1(schema)] }))).to.deep.equal([]);
    schema.properties!.spec!['x-kubernetes-validations'].push({ rule: 'self.retries < limit' });
    expect(validateCrd(crd({ versions: [v1(schema)] }))).to.deep.equal([{
      reason: 'FieldValueInvalid',
      field: 'spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule',
      message: 'Invalid value: apiextensions.ValidationRule{Rule:"self.retries < limit", Message:"", MessageExpression:"", '
        + 'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: '
        + 'ERROR: <input>:1:16: undeclared reference to \'limit\' (in container \'\')\n | self.retries < limit\n | ...............^',
    }]);
  });

  it('refuses a rule selecting a field its object does not declare, as cel-go\'s checker does', () => {
    const schema = mediaJobSchema();
    schema['x-kubernetes-validations'] = [
      { rule: "self.metadata.name != '' && self.spec.labels.team == 'x' && has(self.spec.extra.anything)" },
      { rule: 'self.metadata.labels.size() > 0 && self.spec.retires < 5' },
    ];
    const messages = validateCrd(crd({ versions: [v1(schema)] })).map((c) => c.message.replace(/^.*compilation failed: /s, ''));
    expect(messages).to.deep.equal([
      "ERROR: <input>:1:14: undefined field 'labels'\n | self.metadata.labels.size() > 0 && self.spec.retires < 5\n | .............^\n"
        + "ERROR: <input>:1:45: undefined field 'retires'\n | self.metadata.labels.size() > 0 && self.spec.retires < 5\n | " + '.'.repeat(44) + '^',
    ]);
  });

  it('checks each rule\'s shape: rule present, a known reason, a fieldPath that names a field', () => {
    const schema = mediaJobSchema();
    schema.properties!.spec!['x-kubernetes-validations'] = [
      { rule: ' ' }, { rule: 'true', reason: 'FieldValueTooLong' }, { rule: 'true', fieldPath: '.nope' },
    ];
    const at = 'spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations';
    expect(validateCrd(crd({ versions: [v1(schema)] })).map((c) => `${c.field}: ${c.message}`)).to.deep.equal([
      `${at}[0].rule: Required value: rule is not specified`,
      `${at}[1].reason: Unsupported value: "FieldValueTooLong": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"`,
      `${at}[2].fieldPath: Invalid value: ".nope": fieldPath must be a valid path`,
    ]);
  });

  it('refuses oldSelf below a list whose items cannot be matched to the old ones', () => {
    const schema = mediaJobSchema();
    schema.properties!.spec!.properties!.tags!.items!['x-kubernetes-validations'] = [{ rule: 'self == oldSelf' }];
    expect(validateCrd(crd({ versions: [v1(schema)] })).map((c) => `${c.field}: ${c.message}`)).to.deep.equal([
      'spec.validation.openAPIV3Schema.properties[spec].properties[tags].items.x-kubernetes-validations[0].rule: Invalid value: '
        + '"self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within '
        + 'spec.validation.openAPIV3Schema.properties[spec].properties[tags]',
    ]);
  });

  it('validates printer columns', () => {
    const causes = validateCrd(crd({
      versions: [v1(mediaJobSchema(), { additionalPrinterColumns: [{ name: 'Age', type: 'time', jsonPath: 'metadata.creationTimestamp' }, { type: 'string', jsonPath: '.a' }] })],
    }));
    expect(causes).to.deep.equal([
      { reason: 'FieldValueInvalid', field: 'spec.additionalPrinterColumns[0].type', message: 'Invalid value: "time": must be one of boolean,date,integer,number,string' },
      { reason: 'FieldValueInvalid', field: 'spec.additionalPrinterColumns[0].JSONPath', message: 'Invalid value: "metadata.creationTimestamp": must be a simple json path starting with .' },
      { reason: 'FieldValueRequired', field: 'spec.additionalPrinterColumns[1].name', message: 'Required value' },
    ]);
  });

  it('validates defaults against their schema', () => {
    const schema = mediaJobSchema();
    const spec = schema.properties?.spec?.properties;
    if (!spec?.preset || !spec.outputs?.items?.properties?.options) throw new Error('fixture changed');
    spec.preset.default = 'medium';
    spec.outputs.items.properties.options.default = { crf: 1, extra: true };
    expect(validateCrd(crd({ versions: [v1(schema)] }))).to.deep.equal([
      {
        reason: 'FieldValueNotSupported',
        field: 'spec.validation.openAPIV3Schema.properties[spec].properties[preset].default',
        message: 'Unsupported value: "medium": supported values: "fast", "slow"',
      },
      {
        reason: 'FieldValueInvalid',
        field: 'spec.validation.openAPIV3Schema.properties[spec].properties[outputs].items.properties[options].default',
        message: 'Invalid value: map[string]interface {}{"crf":1, "extra":true}: must not have unknown fields',
      },
    ]);
  });

  it('forbids defaults in top-level metadata and restricts metadata to name and generateName', () => {
    const schema = mediaJobSchema();
    schema.properties = { ...schema.properties, metadata: { type: 'object', properties: { labels: { type: 'object' } } } };
    expect(validateCrd(crd({ versions: [v1(schema)] }))).to.deep.equal([
      {
        reason: 'FieldValueForbidden',
        field: 'spec.validation.openAPIV3Schema.properties[metadata]',
        message: 'Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified',
      },
    ]);
  });
});

describe('schema: CRD defaults, status and resource types', () => {
  it('defaults names, conversion and preserveUnknownFields but not scope', () => {
    const c = crd();
    const spec = c.spec as Record<string, Record<string, unknown>>;
    delete spec.names?.singular;
    delete spec.scope;
    defaultCrd(c);
    expect(spec.names).to.include({ singular: 'mediajob', listKind: 'MediaJobList' });
    expect(spec.conversion).to.deep.equal({ strategy: 'None' });
    expect(spec.preserveUnknownFields).to.equal(false);
    expect(spec.scope).to.equal(undefined);
  });

  it('reports the status the apiserver settles on', () => {
    const c = crd();
    defaultCrd(c);
    const now = '2025-01-02T03:04:05Z';
    expect(crdStatus(c, now)).to.deep.equal({
      conditions: [
        { type: 'NamesAccepted', status: 'True', lastTransitionTime: now, reason: 'NoConflicts', message: 'no conflicts found' },
        { type: 'Established', status: 'True', lastTransitionTime: now, reason: 'InitialNamesAccepted', message: 'the initial names have been accepted' },
      ],
      acceptedNames: { plural: 'mediajobs', singular: 'mediajob', shortNames: ['mj'], kind: 'MediaJob', listKind: 'MediaJobList', categories: ['all'] },
      storedVersions: ['v1'],
    });
    c.status = crdStatus(c, now);
    const later = crdStatus(c, '2025-02-02T00:00:00Z') as { conditions: { lastTransitionTime: string }[] };
    expect(later.conditions.map((x) => x.lastTransitionTime)).to.deep.equal([now, now]);
  });

  it('keeps previously stored versions and adds a new storage version', () => {
    const c = crd({ versions: [v1(mediaJobSchema(), { storage: false }), v1(mediaJobSchema(), { name: 'v2' })] });
    c.status = { storedVersions: ['v1'] };
    expect(crdStatus(c, 'now').storedVersions).to.deep.equal(['v1', 'v2']);
  });

  it('derives one resource type per served version', () => {
    const c = crd({ versions: [v1(mediaJobSchema(), { name: 'v1alpha1', storage: false, served: false }), ...(crd().spec as { versions: unknown[] }).versions] });
    defaultCrd(c);
    const types = resourceTypesFromCrd(c);
    expect(types).to.have.length(1);
    const [type] = types;
    expect(type).to.deep.include({
      group: 'media.example.com',
      version: 'v1',
      kind: 'MediaJob',
      listKind: 'MediaJobList',
      plural: 'mediajobs',
      singular: 'mediajob',
      namespaced: true,
      shortNames: ['mj'],
      categories: ['all'],
      statusSubresource: true,
      builtin: false,
    });
    expect(type?.printerColumns).to.deep.equal([
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'Input', type: 'string', jsonPath: '.spec.input', priority: 1 },
    ]);
    expect(type?.schema?.properties?.spec?.required).to.deep.equal(['input']);
  });
});
