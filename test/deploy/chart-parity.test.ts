// The comparison `make chart-check` makes between the chart and deploy/base (scripts/chart-parity.ts),
// tested here on deploy/base's own rendering since helm cannot run on the project's machines: a rendering
// that differs only as Helm's does on purpose agrees, and any other difference is named by kind, object
// and field path.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { parseAllDocuments, stringify } from 'yaml';
import { KUBECTL } from '../../local-cluster/test/support.js';
import { compareRenderings } from '../../scripts/chart-parity.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const base = execFileSync(KUBECTL, ['kustomize', fileURLToPath(new URL('../../deploy/base', import.meta.url))], { encoding: 'utf8' });

/** deploy/base as helm template would show it: Helm's labels, the checksum annotation, no Namespace. */
function helmLike(edit: (objs: Obj[]) => void = () => {}): string {
  const objs = parseAllDocuments(base).map((d) => d.toJSON() as Obj).filter((o) => o.kind !== 'Namespace');
  for (const o of objs) {
    o.metadata.labels = { ...o.metadata.labels, 'helm.sh/chart': 'mediajobs-0.1.0', 'app.kubernetes.io/managed-by': 'Helm', 'app.kubernetes.io/version': '0.1.0' };
    if (o.kind === 'Deployment') o.spec.template.metadata.annotations = { 'checksum/secret': 'e3b0c442' };
  }
  edit(objs);
  return objs.map((o) => stringify(o)).join('---\n');
}

const find = (objs: Obj[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name)!;

describe('scripts/chart-parity: the chart against deploy/base', () => {
  it('agrees where the only differences are Helm\'s own', () => {
    expect(compareRenderings(base, helmLike())).to.deep.equal([]);
  });

  it('names each differing field by object and path', () => {
    const diffs = compareRenderings(base, helmLike((objs) => {
      find(objs, 'Deployment', 'mediajobs-gateway').spec.replicas = 3;
      find(objs, 'Role', 'mediajobs-gateway').rules[0].verbs.push('list');
      find(objs, 'NetworkPolicy', 'mediajobs-runner').spec.egress[2].to[0].ipBlock.except.pop();
    }));
    expect(diffs).to.deep.equal([
      'Role/mediajobs-gateway .rules[0].verbs[4]: undefined ≠ "list"',
      'Deployment/mediajobs-gateway .spec.replicas: 2 ≠ 3',
      'NetworkPolicy/mediajobs-runner .spec.egress[2].to[0].ipBlock.except[6]: "0.0.0.0/8" ≠ undefined',
    ]);
  });

  it('names objects only one side has', () => {
    const diffs = compareRenderings(base, helmLike((objs) => {
      objs.splice(objs.indexOf(find(objs, 'PodDisruptionBudget', 'mediajobs-gateway')), 1);
      objs.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'mediajobs-secrets', namespace: 'mediajobs' } });
    }));
    expect(diffs).to.deep.equal(['PodDisruptionBudget/mediajobs-gateway: only in deploy/base', 'Secret/mediajobs-secrets: only in the chart']);
  });
});
