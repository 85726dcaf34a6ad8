// The gateway's NetworkPolicies (docs/production.md, "The gateway's NetworkPolicy"): egress to the cluster
// DNS, the internet less every private, link-local, metadata, "this network" and NAT64 range, and on private
// addresses only what each installation lists (the API server, Postgres, Redis, private storage). Checked as
// kustomize renders deploy/base and both overlays, and as the chart renders its template with its default
// values: helm cannot run on the project's machines, so the template's few actions are evaluated here
// (anything else in it fails the test) and the result is compared with deploy/base by scripts/chart-parity.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { expect } from 'chai';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { KUBECTL } from '../../local-cluster/test/support.js';
import { compareRenderings } from '../../scripts/chart-parity.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const root = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));
const kustomize = (dir: string) => execFileSync(KUBECTL, ['kustomize', root(dir)], { encoding: 'utf8' });
const objects = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJSON() as Obj).filter(Boolean);
const named = (objs: Obj[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name);

const EXCEPT_IPV4 = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16', '127.0.0.0/8', '0.0.0.0/8'];
const EXCEPT_IPV6 = ['fc00::/7', 'fe80::/10', '::1/128', '64:ff9b::/96', '64:ff9b:1::/48'];
const PLACEHOLDER = '192.0.2.1/32';

/**
 * A chart template rendered with `values` as `helm template mediajobs charts/mediajobs -n mediajobs` would:
 * the actions gateway-networkpolicy.yaml uses (names, labels, toYaml of values, if/fail/end), nothing else.
 */
function renderTemplate(template: string, values: Obj): string {
  const chart = parse(readFileSync(root('charts/mediajobs/Chart.yaml'), 'utf8')) as Obj;
  const labels = {
    'helm.sh/chart': `${chart.name}-${chart.version}`, 'app.kubernetes.io/name': 'mediajobs', 'app.kubernetes.io/instance': 'mediajobs',
    'app.kubernetes.io/version': String(chart.appVersion), 'app.kubernetes.io/managed-by': 'Helm', 'app.kubernetes.io/part-of': 'mediajobs',
  };
  const blocks: [RegExp, (m: RegExpExecArray) => unknown][] = [
    [/^include "mediajobs\.labels" \.$/, () => labels],
    [/^include "mediajobs\.selectorLabels" \(dict "ctx" \. "component" "(\w+)"\)$/, (m) => ({
      'app.kubernetes.io/name': 'mediajobs', 'app.kubernetes.io/instance': 'mediajobs', 'app.kubernetes.io/component': m[1],
    })],
    [/^toYaml \.Values\.([\w.]+)$/, (m) => m[1]!.split('.').reduce((v: Obj, k) => v[k], values)],
  ];
  const text = readFileSync(root(`charts/mediajobs/templates/${template}`), 'utf8').replace(/\{\{-? *\/\*[\s\S]*?\*\/ *-?\}\}\n?/g, '');
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const whole = /^\s*\{\{- (.*?) \}\}$/.exec(line);
    if (whole && /^(if|end|fail)\b/.test(whole[1]!)) continue;
    const nindent = whole && /^(.*) \| nindent (\d+)$/.exec(whole[1]!);
    if (nindent) {
      const rule = blocks.map(([re, f]) => [re.exec(nindent[1]!), f] as const).find(([m]) => m);
      if (!rule) throw new Error(`unknown template action: ${line.trim()}`);
      const value = rule[1](rule[0]!);
      out.push(...stringify(value).trimEnd().split('\n').map((l) => `${' '.repeat(Number(nindent[2]))}${l}`));
      continue;
    }
    const inline = line
      .replaceAll('{{ include "mediajobs.gatewayName" . }}', 'mediajobs-gateway')
      .replaceAll('{{ .Release.Namespace }}', 'mediajobs');
    if (inline.includes('{{')) throw new Error(`unknown template action: ${line.trim()}`);
    out.push(inline);
  }
  return out.join('\n');
}

describe('deploy/ and the chart: the gateway\'s NetworkPolicies', () => {
  const base = objects(kustomize('deploy/base'));

  for (const dir of ['deploy/base', 'deploy/overlays/production', 'deploy/overlays/local']) {
    describe(dir, () => {
      const objs = objects(kustomize(dir));
      const gatewayPods = named(objs, 'Deployment', 'mediajobs-gateway')!.spec.template.metadata.labels as Record<string, string>;

      it('selects the gateway\'s pods, fences egress only, and reaches DNS and the internet less every private, link-local and metadata range', () => {
        const policy = named(objs, 'NetworkPolicy', 'mediajobs-gateway')!;
        expect(gatewayPods).to.include(policy.spec.podSelector.matchLabels);
        expect(policy.spec.podSelector.matchLabels).to.have.property('app.kubernetes.io/component', 'gateway');
        expect(policy.spec.policyTypes).to.deep.equal(['Egress']);
        const [dns, internet] = policy.spec.egress as Obj[];
        expect(dns).to.deep.equal({
          to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
          ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }],
        });
        expect(internet).to.deep.equal({ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: EXCEPT_IPV4 } }, { ipBlock: { cidr: '::/0', except: EXCEPT_IPV6 } }] });
        expect(policy.spec.egress).to.have.length(2);
      });

      it('refuses at least every range the runners\' policy refuses', () => {
        const runner = named(objs, 'NetworkPolicy', 'mediajobs-runner')!;
        const gateway = named(objs, 'NetworkPolicy', 'mediajobs-gateway')!;
        const except = (p: Obj) => (p.spec.egress as Obj[]).flatMap((r) => r.to ?? []).filter((t: Obj) => t.ipBlock).flatMap((t: Obj) => t.ipBlock.except);
        expect(except(gateway)).to.include.members(except(runner));
      });

      it('reaches private addresses only through mediajobs-gateway-private-egress, which every overlay sets', () => {
        const policy = named(objs, 'NetworkPolicy', 'mediajobs-gateway-private-egress')!;
        expect(gatewayPods).to.include(policy.spec.podSelector.matchLabels);
        expect(policy.spec.policyTypes).to.deep.equal(['Egress']);
        expect(policy.spec.egress).to.have.length.above(0);
        const placeholder = JSON.stringify(policy.spec.egress).includes(PLACEHOLDER);
        expect(placeholder).to.equal(dir === 'deploy/base');
      });
    });
  }

  it('the production overlay names the API server, Postgres and Redis on their ports, each rule for its own addresses', () => {
    const policy = named(objects(kustomize('deploy/overlays/production')), 'NetworkPolicy', 'mediajobs-gateway-private-egress')!;
    const ports = (policy.spec.egress as Obj[]).map((r) => (r.ports as Obj[]).map((p) => p.port));
    expect(ports).to.deep.equal([[443], [5432], [6379]]);
    for (const rule of policy.spec.egress as Obj[]) for (const to of rule.to as Obj[]) expect(to.ipBlock.cidr).to.match(/\/32$/);
  });

  it('the chart renders the same two objects as deploy/base with its default values', () => {
    const values = parse(readFileSync(root('charts/mediajobs/values.yaml'), 'utf8')) as Obj;
    const chart = renderTemplate('gateway-networkpolicy.yaml', values);
    const policies = base.filter((o) => o.kind === 'NetworkPolicy' && o.metadata.name.startsWith('mediajobs-gateway'));
    expect(policies.map((o) => o.metadata.name)).to.deep.equal(['mediajobs-gateway', 'mediajobs-gateway-private-egress']);
    expect(compareRenderings(policies.map((o) => stringify(o)).join('---\n'), chart)).to.deep.equal([]);
    // ...and a changed value shows up in the rendering.
    values.gateway.networkPolicy.exceptIPv4 = EXCEPT_IPV4.slice(0, 6);
    expect(compareRenderings(policies.map((o) => stringify(o)).join('---\n'), renderTemplate('gateway-networkpolicy.yaml', values)))
      .to.deep.equal(['NetworkPolicy/mediajobs-gateway .spec.egress[1].to[0].ipBlock.except[6]: "0.0.0.0/8" ≠ undefined']);
  });

  it('the chart\'s values schema takes the defaults and refuses an empty privateEgress (the template fails on it too)', () => {
    const schema = JSON.parse(readFileSync(root('charts/mediajobs/values.schema.json'), 'utf8')) as Obj;
    const validate = new Ajv({ allErrors: true, strict: true }).compile(schema);
    const values = parse(readFileSync(root('charts/mediajobs/values.yaml'), 'utf8')) as Obj;
    expect(validate(values), JSON.stringify(validate.errors)).to.equal(true);
    values.gateway.networkPolicy.privateEgress = [];
    expect(validate(values)).to.equal(false);
    expect(validate.errors!.map((e) => `${e.instancePath} ${e.message}`)).to.deep.equal(['/gateway/networkPolicy/privateEgress must NOT have fewer than 1 items']);
    expect(readFileSync(root('charts/mediajobs/templates/gateway-networkpolicy.yaml'), 'utf8')).to.include('{{- fail "gateway.networkPolicy.privateEgress:');
  });
});
