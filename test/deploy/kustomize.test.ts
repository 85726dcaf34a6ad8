// The deployment manifests (deploy/base and its overlays) as a cluster sees
// them: each overlay is rendered by `kubectl kustomize` and applied with
// `kubectl apply --dry-run=server` to the local cluster, which decodes the
// built-in kinds against Kubernetes v1.32's own definitions and answers as
// kube-apiserver does; a dry run stores nothing. A broken manifest is refused
// with the real server's words. The rendered objects hold what issue 17 asks
// of them (probes, resources, non-root read-only pods, PDBs, the runners'
// NetworkPolicy), and the least-privilege rules are the chart's, rule for rule.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { KUBECTL, startTestCluster, type TestCluster } from '../../local-cluster/test/support.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const root = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));
const OVERLAYS = ['production', 'local'];

function render(dir: string): Obj[] {
  const text = execFileSync(KUBECTL, ['kustomize', dir.startsWith('/') ? dir : root(dir)], { encoding: 'utf8' });
  return parseAllDocuments(text).map((d) => d.toJSON() as Obj);
}

/** An overlay as a user writes one: the production overlay with a component of deploy/components. */
function withComponent(component: string): Obj[] {
  const dir = mkdtempSync(join(tmpdir(), 'kustomize-'));
  try {
    writeFileSync(join(dir, 'kustomization.yaml'), stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization',
      resources: [relative(dir, root('deploy/overlays/production'))],
      components: [relative(dir, root(`deploy/components/${component}`))],
    }));
    return render(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const toYaml = (objs: Obj[]) => objs.map((o) => stringify(o)).join('---\n');
const byKind = (objs: Obj[], kind: string) => objs.filter((o) => o.kind === kind);
const named = (objs: Obj[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name)!;

describe('deploy/: kustomize overlays against the local cluster', function () {
  this.timeout(60_000);
  let t: TestCluster;

  before(async () => {
    t = await startTestCluster();
    // As on a real cluster, a server dry run cannot place objects in a namespace that does not exist yet.
    await t.kubectl(['create', 'namespace', 'mediajobs']);
    await t.kubectl(['create', 'namespace', 'mediajobs-destinations']);
  });
  after(async () => t?.stop());

  for (const overlay of OVERLAYS) {
    it(`${overlay}: every object passes kubectl apply --dry-run=server, and nothing is stored`, async () => {
      const objs = render(`deploy/overlays/${overlay}`);
      const result = await t.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: toYaml(objs) });
      expect(result.code, result.stderr).to.equal(0);
      const lines = result.stdout.trim().split('\n');
      expect(lines).to.have.length(objs.length);
      for (const line of lines) expect(line).to.match(/ (created|configured) \(server dry run\)$/);
      expect(lines).to.include('deployment.apps/mediajobs-gateway created (server dry run)');
      expect(lines).to.include('networkpolicy.networking.k8s.io/mediajobs-runner created (server dry run)');

      const stored = await t.kubectl(['get', 'deployments,services,poddisruptionbudgets,networkpolicies,roles,rolebindings,secrets', '-n', 'mediajobs', '-o', 'name']);
      expect(stored.stdout.trim()).to.equal('');
      expect((await t.kubectl(['get', 'crd', '-o', 'name'])).stdout.trim()).to.equal('');
      const accounts = (await t.kubectl(['get', 'serviceaccounts', '-n', 'mediajobs', '-o', 'name'])).stdout;
      expect(accounts).not.to.include('mediajobs-');
      const ns = JSON.parse((await t.kubectl(['get', 'namespace', 'mediajobs', '-o', 'json'])).stdout) as Obj;
      expect(ns.metadata.labels).to.deep.equal({ 'kubernetes.io/metadata.name': 'mediajobs' });
    });
  }

  it('components/every-namespace: passes a server dry run, and the operator is told to watch every namespace', async () => {
    const rendered = withComponent('every-namespace');
    const result = await t.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: toYaml(rendered) });
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.include('clusterrole.rbac.authorization.k8s.io/mediajobs-operator-every-namespace created (server dry run)');
    const env = named(rendered, 'Deployment', 'mediajobs-operator').spec.template.spec.containers[0].env as Obj[];
    expect(env.filter((e) => e.name === 'WATCH_NAMESPACES')).to.deep.equal([{ name: 'WATCH_NAMESPACES', value: '*' }]);
    const binding = named(rendered, 'ClusterRoleBinding', 'mediajobs-operator-every-namespace');
    expect(binding.subjects).to.deep.equal([{ kind: 'ServiceAccount', name: 'mediajobs-operator', namespace: 'mediajobs' }]);
  });

  it('a Deployment whose replicas is a string is refused as kube-apiserver refuses it (400)', async () => {
    const gateway = named(render('deploy/overlays/production'), 'Deployment', 'mediajobs-gateway');
    gateway.spec.replicas = 'two';
    const result = await t.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: stringify(gateway), allowFail: true });
    expect(result.code).to.equal(1);
    expect(result.stderr.trim()).to.equal('Error from server (BadRequest): error when creating "STDIN": Deployment in version "v1" cannot be handled as a Deployment: '
      + 'json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32');
  });

  it('an unknown field is refused under kubectl\'s strict field validation (400)', async () => {
    const gateway = named(render('deploy/overlays/production'), 'Deployment', 'mediajobs-gateway');
    gateway.spec.template.spec.containers[0].imagePullPolice = 'Always';
    const result = await t.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: stringify(gateway), allowFail: true });
    expect(result.code).to.equal(1);
    expect(result.stderr.trim()).to.equal('Error from server (BadRequest): error when creating "STDIN": Deployment in version "v1" cannot be handled as a Deployment: '
      + 'strict decoding error: unknown field "spec.template.spec.containers[0].imagePullPolice"');
  });

  it('a Deployment whose selector does not match its pods is invalid (422), as kube-apiserver says', async () => {
    const gateway = named(render('deploy/overlays/production'), 'Deployment', 'mediajobs-gateway');
    gateway.spec.template.metadata.labels['app.kubernetes.io/component'] = 'gw';
    const result = await t.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: stringify(gateway), allowFail: true });
    expect(result.stderr.trim()).to.equal('The Deployment "mediajobs-gateway" is invalid: spec.template.metadata.labels: Invalid value: '
      + 'map[string]string{"app.kubernetes.io/component":"gw", "app.kubernetes.io/instance":"mediajobs", "app.kubernetes.io/name":"mediajobs"}: '
      + '`selector` does not match template `labels`');
  });

  it('a type error deep in a list names the Go struct and the path without indices', async () => {
    const gateway = named(render('deploy/overlays/production'), 'Deployment', 'mediajobs-gateway');
    gateway.spec.template.spec.containers[0].env[0].value = 5;
    const result = await t.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: stringify(gateway), allowFail: true });
    expect(result.stderr.trim()).to.equal('Error from server (BadRequest): error when creating "STDIN": Deployment in version "v1" cannot be handled as a Deployment: '
      + 'json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value of type string');
  });
});

describe('deploy/: what the rendered objects hold', () => {
  for (const overlay of OVERLAYS) {
    describe(overlay, () => {
      const objs = render(`deploy/overlays/${overlay}`);

      it('every Deployment runs non-root, read-only, without privilege escalation, with resources and a writable /tmp', () => {
        for (const d of byKind(objs, 'Deployment')) {
          const pod = d.spec.template.spec;
          expect(pod.securityContext.runAsNonRoot, d.metadata.name).to.equal(true);
          expect(pod.securityContext.seccompProfile).to.deep.equal({ type: 'RuntimeDefault' });
          for (const c of pod.containers) {
            expect(c.securityContext, c.name).to.deep.include({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
            expect(c.resources.requests.memory, c.name).to.be.a('string');
            expect(c.resources.limits.memory, c.name).to.be.a('string');
            expect(c.volumeMounts.map((m: Obj) => m.mountPath)).to.include('/tmp');
          }
        }
      });

      it('the gateway has /readyz and /healthz probes; gateway and operator each have a PodDisruptionBudget selecting their pods', () => {
        const gw = named(objs, 'Deployment', 'mediajobs-gateway').spec.template.spec.containers[0];
        expect(gw.readinessProbe.httpGet).to.deep.equal({ path: '/readyz', port: 'http' });
        expect(gw.livenessProbe.httpGet).to.deep.equal({ path: '/healthz', port: 'http' });
        for (const name of ['mediajobs-gateway', 'mediajobs-operator']) {
          const deployment = named(objs, 'Deployment', name);
          const pdb = named(objs, 'PodDisruptionBudget', name);
          expect(pdb.spec.selector.matchLabels).to.deep.equal(deployment.spec.selector.matchLabels);
          expect(named(objs, 'Service', name === 'mediajobs-gateway' ? name : 'mediajobs-operator-metrics').spec.selector)
            .to.deep.equal(deployment.spec.selector.matchLabels);
        }
      });

      it('the operator has /readyz and /healthz probes on its metrics port, served by every replica', () => {
        const op = named(objs, 'Deployment', 'mediajobs-operator').spec.template.spec.containers[0];
        expect(op.ports).to.deep.include({ name: 'metrics', containerPort: 9090, protocol: 'TCP' });
        expect(op.env).to.deep.include({ name: 'METRICS_PORT', value: '9090' });
        expect(op.readinessProbe).to.deep.equal({ httpGet: { path: '/readyz', port: 'metrics' }, periodSeconds: 5, failureThreshold: 3 });
        expect(op.livenessProbe).to.deep.equal({ httpGet: { path: '/healthz', port: 'metrics' }, initialDelaySeconds: 10, periodSeconds: 10, failureThreshold: 3 });
      });

      it('the gateway serves /metrics on a port of its own (9090), behind a Service of its own; the API Service and the runners reach only the API port', () => {
        const deployment = named(objs, 'Deployment', 'mediajobs-gateway');
        const gw = deployment.spec.template.spec.containers[0];
        expect(gw.ports).to.deep.equal([
          { name: 'http', containerPort: 8080, protocol: 'TCP' }, { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
        ]);
        expect(gw.env).to.deep.include({ name: 'METRICS_PORT', value: '9090' });
        expect(gw.env).to.deep.include({ name: 'PORT', value: '8080' });
        const metrics = named(objs, 'Service', 'mediajobs-gateway-metrics');
        expect(metrics.spec.selector).to.deep.equal(deployment.spec.selector.matchLabels);
        expect(metrics.spec.ports).to.deep.equal([{ name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' }]);
        expect(named(objs, 'Service', 'mediajobs-gateway').spec.ports.map((p: Obj) => p.targetPort)).to.deep.equal(['http']);
        // The runners' one rule towards the gateway's pods names the API port: never 9090.
        const runner = named(objs, 'NetworkPolicy', 'mediajobs-runner');
        const toGateway = runner.spec.egress.filter((r: Obj) => r.to.some((p: Obj) => p.podSelector?.matchLabels?.['app.kubernetes.io/component'] === 'gateway'));
        expect(toGateway.map((r: Obj) => r.ports)).to.deep.equal([[{ protocol: 'TCP', port: 8080 }]]);
        expect(JSON.stringify(runner.spec.egress)).to.not.include('9090');
      });

      it('runner pods reach the internet, DNS and the gateway, but no private, link-local, metadata, "this network" or NAT64 address', () => {
        const policy = named(objs, 'NetworkPolicy', 'mediajobs-runner');
        expect(policy.spec.podSelector.matchLabels).to.deep.equal({ 'app.kubernetes.io/name': 'mediajobs-runner' });
        expect(policy.spec.policyTypes).to.deep.equal(['Ingress', 'Egress']);
        expect(policy.spec.ingress).to.deep.equal([]);
        const blocks = policy.spec.egress.flatMap((r: Obj) => r.to).filter((p: Obj) => p.ipBlock).map((p: Obj) => p.ipBlock);
        expect(blocks).to.deep.equal([
          { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16', '127.0.0.0/8', '0.0.0.0/8'] },
          { cidr: '::/0', except: ['fc00::/7', 'fe80::/10', '::1/128', '64:ff9b::/96', '64:ff9b:1::/48'] },
        ]);
        const dns = policy.spec.egress[0];
        expect(dns.to[0].namespaceSelector.matchLabels).to.deep.equal({ 'kubernetes.io/metadata.name': 'kube-system' });
        expect(dns.ports.map((p: Obj) => `${p.protocol}/${p.port}`)).to.deep.equal(['UDP/53', 'TCP/53']);
        // The API server allowance is the overlay's, never the base's placeholder.
        const apiserver = named(objs, 'NetworkPolicy', 'mediajobs-runner-apiserver-egress');
        expect(JSON.stringify(apiserver.spec.egress)).not.to.include('192.0.2.1/32');
      });
    });
  }

  it('the Deployments\' probes are the chart\'s (helm cannot render here; make chart-check compares everything)', () => {
    const base = render('deploy/base');
    for (const [template, name] of [['gateway-deployment.yaml', 'mediajobs-gateway'], ['operator-deployment.yaml', 'mediajobs-operator']] as const) {
      const probes = (c: Obj) => ({ readinessProbe: c.readinessProbe, livenessProbe: c.livenessProbe });
      const chart = chartStatic(template).find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0];
      expect(probes(chart), template).to.deep.equal(probes(named(base, 'Deployment', name).spec.template.spec.containers[0]));
      expect(chart.readinessProbe, template).to.be.an('object');
    }
  });

  it('the gateway\'s metrics port and Service are the chart\'s (helm cannot render here; make chart-check compares everything)', () => {
    const base = render('deploy/base');
    const chartGateway = chartStatic('gateway-deployment.yaml').find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0];
    const baseGateway = named(base, 'Deployment', 'mediajobs-gateway').spec.template.spec.containers[0];
    expect(chartGateway.ports.find((p: Obj) => p.name === 'metrics')).to.deep.equal(baseGateway.ports.find((p: Obj) => p.name === 'metrics'));
    expect(chartGateway.env.find((e: Obj) => e.name === 'METRICS_PORT')).to.deep.equal({ name: 'METRICS_PORT', value: '9090' });
    const chartService = chartStatic('gateway-metrics-service.yaml').find((o) => o.kind === 'Service')!;
    expect(chartService.spec.ports).to.deep.equal(named(base, 'Service', 'mediajobs-gateway-metrics').spec.ports);
  });

  it('the Roles are the chart\'s, rule for rule (least privilege kept in one place)', () => {
    const base = byKind(render('deploy/base'), 'Role');
    const chart = chartStatic('rbac.yaml').filter((o) => o.kind === 'Role');
    const rulesOf = (roles: Obj[]) => roles.map((r) => JSON.stringify([r.metadata.labels['app.kubernetes.io/component'], r.rules])).sort();
    // Runners have no shared Role: the operator gives each its own (docs/adr/0021). The gateway's one Role and
    // the operator's second are in the saved destinations' namespace.
    expect(rulesOf(chart).map((r) => JSON.parse(r)[0])).to.deep.equal(['gateway', 'operator', 'operator']);
    expect(rulesOf(base)).to.deep.equal(rulesOf(chart));
    // The ClusterRoles, for the cluster-scoped MediaPlatforms and ProxyPools (the operator's; the gateway lists
    // MediaPlatforms), the chart's too.
    const clusterRules = (roles: Obj[]) => roles.map((r) => JSON.stringify([r.metadata.labels['app.kubernetes.io/component'], r.rules])).sort();
    const baseCluster = byKind(render('deploy/base'), 'ClusterRole');
    expect(baseCluster.map((r) => r.metadata.name).sort()).to.deep.equal(['mediajobs-gateway-platforms', 'mediajobs-operator-platforms']);
    expect(clusterRules(baseCluster)).to.deep.equal(clusterRules(chartStatic('rbac.yaml').filter((o) => o.kind === 'ClusterRole')));
    // With platforms.secretNames, the gateway may get exactly the Secrets named there (docs/adr/0027), nothing else.
    const block = PLATFORM_SECRETS_BLOCK.exec(readFileSync(root('charts/mediajobs/templates/rbac.yaml'), 'utf8'))![0];
    expect(block).to.match(/resources: \["secrets"\]\n\s+resourceNames: \{\{ toJson \. \}\}\n\s+verbs: \["get"\]/);
    expect(block.match(/^kind: \w+/gm)).to.deep.equal(['kind: Role', 'kind: RoleBinding']);
  });

  describe('components/every-namespace (WATCH_NAMESPACES=*)', () => {
    const objs = () => withComponent('every-namespace');
    const leaseRule = (r: Obj) => r.apiGroups.includes('coordination.k8s.io');
    const namespacesRule = { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] };

    it('grants everywhere what the operator\'s Role grants at home, less the Lease, plus reading namespaces; the chart the same', () => {
      const rendered = objs();
      const home = named(rendered, 'Role', 'mediajobs-operator').rules as Obj[];
      const everywhere = named(rendered, 'ClusterRole', 'mediajobs-operator-every-namespace').rules as Obj[];
      expect(everywhere).to.deep.equal([...home.filter((r) => !leaseRule(r)), namespacesRule]);
      // The chart's operator.watchNamespaces template grants these same rules (its define, read as YAML).
      const template = readFileSync(root('charts/mediajobs/templates/operator-watch-rbac.yaml'), 'utf8');
      const define = /\{\{- define "mediajobs\.operatorWorkRules" \}\}([\s\S]*?)\{\{- end \}\}/.exec(template)![1]!;
      expect(parse(define)).to.deep.equal(home.filter((r) => !leaseRule(r)));
      expect(template).to.include('resources: ["namespaces"]');
    });
  });

  it('the gateway holds Secret rights only in the saved destinations\' namespace, which both processes are told', () => {
    const objs = render('deploy/overlays/production');
    const vault = 'mediajobs-destinations';
    const secretRights = (role: Obj) => (role.rules as Obj[]).some((r) => r.resources.includes('secrets'));
    const gateway = byKind(objs, 'Role').filter((r) => r.metadata.labels['app.kubernetes.io/component'] === 'gateway');
    expect(gateway.map((r) => [r.metadata.namespace, secretRights(r)])).to.deep.equal([[vault, true]]);
    const bindings = [...byKind(objs, 'RoleBinding'), ...byKind(objs, 'ClusterRoleBinding')]
      .filter((b) => (b.subjects as Obj[]).some((s) => s.name === 'mediajobs-gateway'));
    // Its one cluster-wide binding lists MediaPlatforms and ProxyPools, and holds no Secret right.
    expect(bindings.map((b) => [b.kind, b.metadata.namespace ?? null]).sort()).to.deep.equal([['ClusterRoleBinding', null], ['RoleBinding', vault]]);
    const clusterRole = named(objs, 'ClusterRole', 'mediajobs-gateway-platforms');
    expect(clusterRole.rules).to.deep.equal([{ apiGroups: ['mediajobs.io'], resources: ['mediaplatforms', 'proxypools'], verbs: ['list'] }]);
    // The operator may only read there.
    const reader = byKind(objs, 'Role').find((r) => r.metadata.namespace === vault && r.metadata.labels['app.kubernetes.io/component'] === 'operator')!;
    expect(reader.rules).to.deep.equal([{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }]);
    for (const name of ['mediajobs-gateway', 'mediajobs-operator']) {
      const env = named(objs, 'Deployment', name).spec.template.spec.containers[0].env as Obj[];
      expect(env.find((e) => e.name === 'DESTINATIONS_NAMESPACE'), name).to.deep.equal({ name: 'DESTINATIONS_NAMESPACE', value: vault });
    }
    expect(named(objs, 'Namespace', vault).metadata.labels).to.include({ 'pod-security.kubernetes.io/enforce': 'restricted' });
  });

  it('the CRDs are crds/*.yaml byte for byte, as the chart\'s are', () => {
    for (const file of ['mediajob.yaml', 'mediabatch.yaml']) {
      expect(readFileSync(root(`deploy/base/crds/${file}`), 'utf8')).to.equal(readFileSync(root(`crds/${file}`), 'utf8'));
    }
  });
});

// The overlays' own instructions: `kubectl apply --server-side -k deploy/overlays/<overlay>`.
describe('deploy/: the documented server-side apply of each overlay', function () {
  this.timeout(60_000);
  let t: TestCluster;
  before(async () => {
    t = await startTestCluster();
  });
  after(async () => t?.stop());

  for (const overlay of OVERLAYS) {
    it(`${overlay}: applies, and applying again changes nothing`, async () => {
      const args = ['apply', '--server-side', '-k', root(`deploy/overlays/${overlay}`)];
      const first = await t.kubectl(args);
      const objs = render(`deploy/overlays/${overlay}`);
      expect(first.stdout.trim().split('\n')).to.have.length(objs.length);
      const listVersion = async () => (await t.kubectl(['get', 'namespaces', '-o', 'jsonpath={.metadata.resourceVersion}'])).stdout;
      const before = await listVersion();
      await t.kubectl(args);
      expect(await listVersion()).to.equal(before);
      const gateway = JSON.parse((await t.kubectl(['get', 'deployment', 'mediajobs-gateway', '-n', 'mediajobs', '-o', 'json', '--show-managed-fields'])).stdout) as Obj;
      expect(gateway.metadata.managedFields.map((e: Obj) => `${e.manager}/${e.operation}`)).to.deep.equal(['kubectl/Apply']);
    });
  }
});

/** A chart template's static part: its documents without the lines that hold template actions. */
/** The chart's objects rendered only when platforms.secretNames names Secrets (empty by default, as deploy/base renders it). */
const PLATFORM_SECRETS_BLOCK = /\{\{- with \.Values\.platforms\.secretNames \}\}[\s\S]*?\{\{- end \}\}/;

function chartStatic(template: string): Obj[] {
  const text = readFileSync(root(`charts/mediajobs/templates/${template}`), 'utf8')
    .replace(PLATFORM_SECRETS_BLOCK, '')
    .replace(/\{\{-? *\/\*[\s\S]*?\*\/ *-?\}\}/g, '')
    .split('\n').filter((line) => !line.includes('{{')).join('\n');
  return text.split(/^---$/m).map((doc) => parse(doc) as Obj).filter(Boolean);
}
