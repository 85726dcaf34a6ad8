// Benchmark (issue 35 item 4): how long CEL validation can hold the local
// cluster's only thread. The issue's case, one rule nested three deep over a
// 200-item list, evaluated as before (no limit) and as now (PerCallLimit, then
// the CRD itself refused at write); and the worst an accepted CRD can do
// now: rules whose evaluations use up the whole RuntimeCELCostBudget of one
// object, in comprehensions (the dearest units in time).
//   BENCH_ITEMS (200): the issue's list size.
import { celEnv, parse, plan } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { celValidate } from '../src/schema/cel-validate.js';
import { validateCrd } from '../src/schema/crd.js';
import { compileExpression, RULE_VARIABLES } from '../src/schema/cel-library.js';
import type { JSONSchemaProps, KubeObject } from '../src/types.js';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 200);
const RULE = 'self.all(a, self.all(b, self.all(c, a.name != b.name || b.name != c.name || a.name == c.name)))';

const ms = (t0: number): string => `${(performance.now() - t0).toFixed(1)} ms`;

function crdWith(spec: JSONSchemaProps): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'benches.cost.example.com' },
    spec: {
      group: 'cost.example.com', scope: 'Namespaced', names: { plural: 'benches', singular: 'bench', kind: 'Bench', listKind: 'BenchList' },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec } } } }],
    },
  } as unknown as KubeObject;
}

function issueCase(): void {
  const spec: JSONSchemaProps = {
    type: 'object',
    properties: { items: { type: 'array', 'x-kubernetes-validations': [{ rule: RULE }], items: { type: 'object', properties: { name: { type: 'string' } } } } },
  };
  const items = Array.from({ length: ITEMS }, (_, i) => ({ name: `item-${i}` }));
  // Before: the rule as the local cluster ran it, one plan over the whole list, with no limit.
  const before = plan(celEnv({ funcs: strings }), parse(RULE));
  const self = items.map((i) => new Map(Object.entries(i)));
  let t0 = performance.now();
  before({ self });
  console.log(`issue case, ${ITEMS} items, before (no limit): ${ms(t0)}`);
  const compiled = compileExpression(RULE, RULE_VARIABLES);
  if ('evaluate' in compiled) {
    t0 = performance.now();
    const unlimited = compiled.run({ self }, Number.POSITIVE_INFINITY);
    console.log(`  its runtime cost: ${unlimited.cost.toLocaleString('en')} units in ${ms(t0)}`);
  }
  t0 = performance.now();
  const after = celValidate({ apiVersion: 'cost.example.com/v1', kind: 'Bench', metadata: { name: 'b' }, spec: { items } }, undefined,
    { type: 'object', properties: { spec } }, [], true);
  console.log(`issue case, after (PerCallLimit): ${ms(t0)}: ${after.errors.map((e) => e.message).join('; ')}`);
  t0 = performance.now();
  const refused = validateCrd(crdWith(spec));
  console.log(`issue case, its CRD at write: refused in ${ms(t0)}: ${refused[0]?.message ?? 'accepted'}`);
}

function worstAccepted(): void {
  // 100 items of 100 ints, two rules quadratic in each item's list: each evaluation
  // stays under PerCallLimit and each rule's estimate under the limits, but together
  // they spend the object's whole budget.
  const rule = 'self.ids.all(a, self.ids.all(b, a == b || a != b))';
  const spec: JSONSchemaProps = {
    type: 'object',
    properties: {
      groups: {
        type: 'array', maxItems: 100,
        items: {
          type: 'object', 'x-kubernetes-validations': [{ rule }, { rule: `${rule} && true` }],
          properties: { ids: { type: 'array', maxItems: 100, items: { type: 'integer' } } },
        },
      },
    },
  };
  const crdCauses = validateCrd(crdWith(spec));
  if (crdCauses.length) throw new Error(`the worst case's CRD is refused: ${crdCauses[0]!.message}`);
  const groups = Array.from({ length: 100 }, () => ({ ids: Array.from({ length: 100 }, (_, i) => i) }));
  for (let run = 0; run < 3; run++) {
    const t0 = performance.now();
    const out = celValidate({ apiVersion: 'cost.example.com/v1', kind: 'Bench', metadata: { name: 'b' }, spec: { groups } }, undefined,
      { type: 'object', properties: { spec } }, [], true);
    console.log(`worst accepted object (RuntimeCELCostBudget used up), run ${run + 1}: ${ms(t0)}: ${out.errors[0]?.field} ${out.errors[0]?.message ?? 'valid'}`);
  }
}

issueCase();
worstAccepted();
