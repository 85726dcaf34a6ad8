// kube-apiserver's CEL cost limits in the local cluster (issue 35 item 4): a
// CRD whose rule's estimated cost passes the per-expression limit, or whose
// rules together pass the per-CRD limit, is refused with the apiserver's
// text; every CRD this project ships is accepted; and evaluation stops at the
// per-call limit and the per-object budget, naming where it stopped.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { validateCrd } from '../src/schema/crd.js';
import type { KubeObject } from '../src/types.js';
import { clusterFetch, startTestCluster, type TestCluster } from './support.js';

const GROUP = 'cost.example.com';
const ADVICE = '(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)';
const SPEC_RULES = 'spec.validation.openAPIV3Schema.properties[spec]';

function crd(plural: string, kind: string, spec: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', ...spec } } } } }],
    },
  };
}

/** Every pair of items compared: quadratic in the list's size, which nothing bounds. */
const PAIRS_RULE = 'self.all(a, self.all(b, a == b || a.name != b.name))';
const pairs = (bounded: boolean): Record<string, unknown> => crd('pairs', 'Pair', {
  properties: {
    items: {
      type: 'array',
      ...(bounded && { maxItems: 16 }),
      'x-kubernetes-validations': [{ rule: PAIRS_RULE, message: 'item names must be unique' }],
      items: { type: 'object', properties: { name: { type: 'string', ...(bounded && { maxLength: 63 }) } } },
    },
  },
});

/** A regex of `length` characters that any run of a's matches at once: cost without time. */
const regexOf = (length: number): string => `^a*$|${'b'.repeat(length - 5)}`;

async function postCrd(tc: TestCluster, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await clusterFetch(tc.cluster, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() as Record<string, unknown> };
}

async function postObject(tc: TestCluster, plural: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await clusterFetch(tc.cluster, `/apis/${GROUP}/v1/namespaces/default/${plural}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() as Record<string, unknown> };
}

/** The CRD manifests under a folder, its subfolders included (but a chart's templates, which are not YAML until rendered). */
function shippedCrds(dir: string): { file: string; crd: KubeObject }[] {
  const out: { file: string; crd: KubeObject }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== 'templates') out.push(...shippedCrds(path));
    } else if (/\.ya?ml$/.test(name)) {
      for (const doc of parseAllDocuments(readFileSync(path, 'utf8'))) {
        const obj = doc.toJS() as KubeObject | null;
        if (obj?.kind === 'CustomResourceDefinition') out.push({ file: path, crd: obj });
      }
    }
  }
  return out;
}

describe('local-cluster: CEL cost limits', function () {
  this.timeout(60_000);

  it('every CRD the project ships (crds/, the chart, deploy/) is accepted under the cost limits', () => {
    const root = new URL('../../', import.meta.url).pathname;
    const all = ['crds', 'charts', 'deploy'].flatMap((d) => shippedCrds(join(root, d)));
    expect(all.map((c) => c.crd.metadata.name)).to.include.members(['mediajobs.mediajobs.io', 'mediabatches.mediajobs.io']);
    for (const { file, crd: c } of all) expect(validateCrd(c), file).to.deep.equal([]);
  });

  describe('on a running cluster', () => {
    let tc: TestCluster;
    before(async () => {
      tc = await startTestCluster();
    });
    after(async () => tc?.stop());

    it('kubectl: a rule quadratic in an unbounded list is refused with the apiserver\'s text; bounded, it is accepted', async () => {
      const out = await tc.kubectl(['apply', '-f', tc.manifest('pairs.yaml', JSON.stringify(pairs(false)))], { allowFail: true });
      expect(out.code).to.equal(1);
      expect(out.stderr).to.equal(`The CustomResourceDefinition "pairs.${GROUP}" is invalid: \n`
        + `* ${SPEC_RULES}.properties[items].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x ${ADVICE}\n`
        + `* ${SPEC_RULES}.properties[items].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema\n`
        + `* spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x ${ADVICE}\n`);
      expect((await tc.kubectl(['get', 'crd', `pairs.${GROUP}`], { allowFail: true })).code).to.equal(1);
      const bounded = await tc.kubectl(['apply', '-f', tc.manifest('pairs-bounded.yaml', JSON.stringify(pairs(true)))]);
      expect(bounded.stdout).to.equal(`customresourcedefinition.apiextensions.k8s.io/pairs.${GROUP} created\n`);
    });

    it('raw client: the factor is the estimate over the limit, and a rule under a bounded list counts once per item', async () => {
      // contains() costs the product of both strings' sizes, each maxLength x 4 bytes x 0.1:
      // 8750 characters: 3500 x 3500 + 2 = 12,250,002; 5000 characters, 3 items: (2000 x 2000 + 2) x 3 = 12,000,006.
      const body = crd('notes', 'Note', {
        properties: {
          note: { type: 'string', maxLength: 8750, 'x-kubernetes-validations': [{ rule: 'self.contains(self)' }] },
          labels: { type: 'array', maxItems: 3, items: { type: 'string', maxLength: 5000, 'x-kubernetes-validations': [{ rule: 'self.contains(self)' }] } },
        },
      });
      const res = await postCrd(tc, body);
      expect(res.status).to.equal(422);
      expect(res.body).to.deep.include({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Invalid', code: 422 });
      expect((res.body.details as Record<string, unknown>).causes).to.deep.equal([
        { reason: 'FieldValueForbidden', field: `${SPEC_RULES}.properties[note].x-kubernetes-validations[0].rule`, message: `Forbidden: estimated rule cost exceeds budget by factor of 1.225000x ${ADVICE}` },
        { reason: 'FieldValueForbidden', field: `${SPEC_RULES}.properties[labels].items.x-kubernetes-validations[0].rule`, message: `Forbidden: estimated rule cost exceeds budget by factor of 1.200001x ${ADVICE}` },
      ]);
    });

    it('raw client: rules each under the limit are refused together past the per-CRD total, the four most expensive named', async () => {
      // Twelve rules of 7500 characters: 3000 x 3000 + 2 = 9,000,002 each, 108,000,024 in all.
      const properties = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [
        `f${i}`, { type: 'string', maxLength: 7500, 'x-kubernetes-validations': [{ rule: 'self.contains(self)' }] },
      ]));
      const res = await postCrd(tc, crd('fields', 'Field', { properties }));
      expect(res.status).to.equal(422);
      expect((res.body.details as Record<string, unknown>).causes).to.deep.equal([
        ...[0, 1, 2, 3].map((i) => ({
          reason: 'FieldValueForbidden', field: `${SPEC_RULES}.properties[f${i}].x-kubernetes-validations[0].rule`,
          message: 'Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema',
        })),
        { reason: 'FieldValueForbidden', field: 'spec.validation.openAPIV3Schema', message: `Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 1.080000x ${ADVICE}` },
      ]);
      const eleven = Object.fromEntries(Object.entries(properties).slice(0, 11));
      expect((await postCrd(tc, crd('fields', 'Field', { properties: eleven }))).status).to.equal(201);
    });

    it('raw client: one evaluation past the per-call limit stops validation with the rule\'s message', async () => {
      // Estimated 3001 x 1500 = 4,501,501 (accepted); run on 7500 a's: 751 x 1500 = 1,126,500 > 1,000,000.
      const body = crd('essays', 'Essay', {
        properties: { text: { type: 'string', maxLength: 7500, 'x-kubernetes-validations': [{ rule: `self.matches('${regexOf(6000)}')`, message: 'text is a\'s' }] } },
      });
      expect((await postCrd(tc, body)).status).to.equal(201);
      const essay = (name: string, text: string) => ({ apiVersion: `${GROUP}/v1`, kind: 'Essay', metadata: { name }, spec: { text } });
      expect((await postObject(tc, 'essays', essay('short', 'a'.repeat(100)))).status).to.equal(201);
      const res = await postObject(tc, 'essays', essay('long', 'a'.repeat(7500)));
      expect(res.status).to.equal(422);
      expect((res.body.details as Record<string, unknown>).causes).to.deep.equal([{
        reason: 'FieldValueInvalid', field: 'spec.text',
        message: 'Invalid value: "string": \'operation cancelled: actual cost limit exceeded\': no further validation rules will be run due to call cost exceeds limit for rule: text is a\'s',
      }]);
    });

    it('kubectl: an object whose rules together pass the runtime budget is refused where validation stopped', async () => {
      // Five rules on each of 30 items of 7500 a's: 751 x 100 + 1 = 75,101 per evaluation, 375,505 per item.
      // After 26 items (9,763,130) three more evaluations fit in 10,000,000 and the fourth does not.
      const rules = Array(5).fill({ rule: `self.matches('${regexOf(400)}')` });
      const body = crd('books', 'Book', {
        properties: { words: { type: 'array', maxItems: 30, items: { type: 'string', maxLength: 7500, 'x-kubernetes-validations': rules } } },
      });
      expect((await postCrd(tc, body)).status).to.equal(201);
      const book = (name: string, count: number) => JSON.stringify({ apiVersion: `${GROUP}/v1`, kind: 'Book', metadata: { name, namespace: 'default' }, spec: { words: Array(count).fill('a'.repeat(7500)) } });
      expect((await tc.kubectl(['create', '-f', '-'], { input: book('thin', 20) })).stdout).to.equal(`book.${GROUP}/thin created\n`);
      const out = await tc.kubectl(['create', '-f', '-'], { input: book('thick', 30), allowFail: true });
      expect(out.code).to.equal(1);
      expect(out.stderr).to.equal('The Book "thick" is invalid: spec.words[26]: Invalid value: "string": validation failed due to running out of cost budget, no further validation rules will be run\n');
    });
  });
});
