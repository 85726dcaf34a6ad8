// CEL validation rules (x-kubernetes-validations) as kubectl and client-node
// meet them: a CRD with rules is accepted, one whose rule does not compile is
// refused, and custom resources are checked on create, update, merge patch
// and JSON patch, with the apiserver's 422 wording.
import { expect } from 'chai';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { apiError, kubeConfigFor, startTestCluster, type TestCluster } from './support.js';

const GROUP = 'cel.example.com';

const WIDGET_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.${GROUP}
spec:
  group: ${GROUP}
  scope: Namespaced
  names: { plural: widgets, singular: widget, kind: Widget, listKind: WidgetList }
  versions:
    - name: v1
      served: true
      storage: true
      subresources: { status: {} }
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-validations:
                - rule: "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas"
                  message: minReplicas must not exceed maxReplicas
                  fieldPath: .minReplicas
                - rule: self.name == oldSelf.name
                  message: name is immutable
                  reason: FieldValueForbidden
                - rule: "!has(self.tags) || self.tags.isSorted()"
                  messageExpression: "'tags must be sorted, got ' + self.tags.join(', ')"
              properties:
                name: { type: string }
                minReplicas: { type: integer }
                maxReplicas: { type: integer }
                ratio: { type: number, x-kubernetes-validations: [{ rule: "self < 1.0" }] }
                mode: { type: string, x-kubernetes-validations: [{ rule: "self.lowerAscii() == self", message: must be lower case }] }
                tags: { type: array, maxItems: 16, items: { type: string, maxLength: 64 } }
              required: [name, maxReplicas]
            status:
              type: object
              properties:
                phase: { type: string }
`;

const widget = (name: string, spec: Record<string, unknown>): Record<string, unknown> =>
  ({ apiVersion: `${GROUP}/v1`, kind: 'Widget', metadata: { name, namespace: 'default' }, spec });

const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

describe('local-cluster: CEL validation rules', function () {
  this.timeout(60_000);
  let tc: TestCluster;
  let custom: CustomObjectsApi;
  const ref = (name: string) => ({ group: GROUP, version: 'v1', namespace: 'default', plural: 'widgets', name });

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', tc.manifest('crd.yaml', WIDGET_CRD)]);
    custom = kubeConfigFor(tc.cluster).makeApiClient(CustomObjectsApi);
  });
  after(async () => tc?.stop());

  it('kubectl: a create that breaks a rule is refused with the rule\'s message at its fieldPath', async () => {
    const bad = JSON.stringify(widget('w-bad', { name: 'a', minReplicas: 5, maxReplicas: 3 }));
    const out = await tc.kubectl(['create', '-f', '-'], { input: bad, allowFail: true });
    expect(out.code).to.equal(1);
    expect(out.stderr).to.equal('The Widget "w-bad" is invalid: spec.minReplicas: Invalid value: "object": minReplicas must not exceed maxReplicas\n');
    const good = JSON.stringify(widget('w-good', { name: 'a', minReplicas: 1, maxReplicas: 3 }));
    expect((await tc.kubectl(['create', '-f', '-'], { input: good })).stdout).to.equal('widget.cel.example.com/w-good created\n');
  });

  it('client-node: every broken rule is a cause; a rule without a message says which rule failed', async () => {
    const err = await apiError(custom.createNamespacedCustomObject({
      ...ref(''), body: widget('w-many', { name: 'a', maxReplicas: 1, ratio: 1.5, mode: 'Fast', tags: ['b', 'a'] }),
    }));
    expect(err.code).to.equal(422);
    expect(err.status.details?.causes).to.deep.equal([
      { reason: 'FieldValueInvalid', message: 'Invalid value: "object": tags must be sorted, got b, a', field: 'spec' },
      { reason: 'FieldValueInvalid', message: 'Invalid value: "number": failed rule: self < 1.0', field: 'spec.ratio' },
      { reason: 'FieldValueInvalid', message: 'Invalid value: "string": must be lower case', field: 'spec.mode' },
    ]);
    expect(err.status.message).to.equal('Widget.cel.example.com "w-many" is invalid: [spec: Invalid value: "object": tags must be sorted, got b, a, '
      + 'spec.ratio: Invalid value: "number": failed rule: self < 1.0, spec.mode: Invalid value: "string": must be lower case]');
  });

  it('client-node: update and merge patch are checked like create', async () => {
    await custom.createNamespacedCustomObject({ ...ref(''), body: widget('w-upd', { name: 'a', maxReplicas: 3 }) });
    const current = await custom.getNamespacedCustomObject(ref('w-upd')) as Record<string, Record<string, unknown>>;
    const replaced = await apiError(custom.replaceNamespacedCustomObject({
      ...ref('w-upd'), body: { ...current, spec: { ...current.spec, minReplicas: 4 } },
    }));
    expect(replaced.code).to.equal(422);
    expect(replaced.status.message).to.equal('Widget.cel.example.com "w-upd" is invalid: spec.minReplicas: Invalid value: "object": minReplicas must not exceed maxReplicas');
    const patched = await apiError(custom.patchNamespacedCustomObject({ ...ref('w-upd'), body: { spec: { maxReplicas: 0, minReplicas: 1 } } }, MERGE));
    expect(patched.status.message).to.equal('Widget.cel.example.com "w-upd" is invalid: spec.minReplicas: Invalid value: "object": minReplicas must not exceed maxReplicas');
    const ok = await custom.patchNamespacedCustomObject({ ...ref('w-upd'), body: { spec: { minReplicas: 3 } } }, MERGE) as Record<string, Record<string, unknown>>;
    expect(ok.spec).to.include({ minReplicas: 3, maxReplicas: 3 });
  });

  it('kubectl: a transition rule holds on JSON and merge patches but not on create', async () => {
    await tc.kubectl(['create', '-f', '-'], { input: JSON.stringify(widget('w-name', { name: 'first', maxReplicas: 1 })) });
    const json = await tc.kubectl(['patch', 'widget', 'w-name', '--type=json', '-p', '[{"op":"replace","path":"/spec/name","value":"second"}]'], { allowFail: true });
    expect(json.code).to.equal(1);
    expect(json.stderr).to.equal('The Widget "w-name" is invalid: spec: Forbidden: name is immutable\n');
    const merge = await tc.kubectl(['patch', 'widget', 'w-name', '--type=merge', '-p', '{"spec":{"name":"second"}}'], { allowFail: true });
    expect(merge.stderr).to.equal('The Widget "w-name" is invalid: spec: Forbidden: name is immutable\n');
    const other = await tc.kubectl(['patch', 'widget', 'w-name', '--type=json', '-p', '[{"op":"add","path":"/spec/maxReplicas","value":2}]']);
    expect(other.stdout).to.equal('widget.cel.example.com/w-name patched\n');
  });

  it('ratchets: a write that keeps a value breaking a newer rule passes with a warning; changing the value is refused', async () => {
    // Created before the rule existed, the object breaks it; a later write that keeps
    // that value passes with a warning, a write that changes the value is refused.
    const loose = WIDGET_CRD.replace('name: widgets.cel.example.com', 'name: gizmos.cel.example.com')
      .replace('names: { plural: widgets, singular: widget, kind: Widget, listKind: WidgetList }', 'names: { plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList }');
    const strict = loose.replace('self.lowerAscii() == self', 'self.lowerAscii() == self && self.size() < 4');
    const unchecked = loose.replace('self.lowerAscii() == self', 'true');
    await tc.kubectl(['apply', '-f', tc.manifest('gizmo.yaml', unchecked)]);
    const gizmo = { ...widget('g1', { name: 'a', maxReplicas: 1, mode: 'faster' }), kind: 'Gizmo' };
    await tc.kubectl(['create', '-f', '-'], { input: JSON.stringify(gizmo) });
    await tc.kubectl(['apply', '-f', tc.manifest('gizmo.yaml', strict)]);
    const kept = await tc.kubectl(['patch', 'gizmo', 'g1', '--type=merge', '-p', '{"spec":{"maxReplicas":2}}']);
    expect(kept.stdout).to.equal('gizmo.cel.example.com/g1 patched\n');
    expect(kept.stderr).to.equal('Warning: spec.mode: Invalid value: "string": must be lower case\n');
    const changed = await tc.kubectl(['patch', 'gizmo', 'g1', '--type=merge', '-p', '{"spec":{"mode":"fastest"}}'], { allowFail: true });
    expect(changed.stderr).to.equal('The Gizmo "g1" is invalid: spec.mode: Invalid value: "string": must be lower case\n');
  });

  it('kubectl: a CRD whose rule does not compile is refused with the compiler\'s error', async () => {
    const broken = WIDGET_CRD.replace(/widgets/g, 'gadgets').replace(/widget/g, 'gadget').replace(/Widget/g, 'Gadget')
      .replace('rule: self.name == oldSelf.name', 'rule: self.name == oldSelf.name && size(self.name) > limit');
    const out = await tc.kubectl(['apply', '-f', tc.manifest('broken.yaml', broken)], { allowFail: true });
    expect(out.code).to.equal(1);
    expect(out.stderr).to.equal(
      'The CustomResourceDefinition "gadgets.cel.example.com" is invalid: spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: '
      + 'Invalid value: apiextensions.ValidationRule{Rule:"self.name == oldSelf.name && size(self.name) > limit", Message:"name is immutable", '
      + 'MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(0xc000000000), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: '
      + 'compilation failed: ERROR: <input>:1:48: undeclared reference to \'limit\' (in container \'\')\n'
      + ' | self.name == oldSelf.name && size(self.name) > limit\n'
      + ' | ' + '.'.repeat(47) + '^\n',
    );
    const gone = await tc.kubectl(['get', 'crd', 'gadgets.cel.example.com'], { allowFail: true });
    expect(gone.code).to.equal(1);
  });
});
