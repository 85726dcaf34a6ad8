// Who may talk to the local cluster (issue 18, item 5): only a caller with the
// bearer token it issued (the kubeconfig's, or a pod's projected
// ServiceAccount token), in a body a Kubernetes client sends, to a loopback
// Host; so a web page, which can do none of these, cannot drive it.
// Unauthenticated callers get what kube-apiserver's defaults give them:
// /healthz, /livez, /readyz and /version, 403 for the rest, 401 for a wrong token.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import type { IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { parse } from 'yaml';
import type { LocalCluster } from '../src/index.js';
import { EXAMPLE_CRD, apiError, clusterFetch, startTestCluster, type TestCluster } from './support.js';

const CM = '/api/v1/namespaces/default/configmaps';
const status = (message: string, reason: string, code: number, details?: Record<string, unknown>) => ({
  kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code,
});
const UNAUTHORIZED = status('Unauthorized', 'Unauthorized', 401);

/** A request with exactly these headers (fetch cannot set Host). */
function rawRequest(cluster: LocalCluster, path: string, method: string, headers: Record<string, string>): Promise<{ code: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    // The certificate is checked against the cluster's own name, whatever Host says.
    const req = https.request(`${cluster.url}${path}`, { method, headers, ca: cluster.caCert, servername: 'localhost' }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('local cluster: who may talk to it', function () {
  this.timeout(60_000);
  let tc: TestCluster;

  before(async () => {
    tc = await startTestCluster();
    await tc.kubectl(['apply', '-f', tc.manifest('crd.yaml', EXAMPLE_CRD)]);
  });
  after(() => tc?.stop());

  describe('bearer token', () => {
    it('refuses a token it did not issue with 401, in kubectl, client-node, the Python client and raw HTTP', async () => {
      const kubectl = await tc.kubectl(['get', 'configmaps', '--token=not-the-token'], { allowFail: true });
      expect(kubectl.code).to.not.equal(0);
      expect(kubectl.stderr).to.contain('error: You must be logged in to the server (Unauthorized)');

      const kc = new k8s.KubeConfig();
      kc.loadFromString(readFileSync(tc.cluster.kubeconfigPath, 'utf8').replace(tc.cluster.token, 'not-the-token'));
      const failed = await apiError(kc.makeApiClient(k8s.CoreV1Api).listNamespace());
      expect(failed.code).to.equal(401);

      const wrongKubeconfig = tc.manifest('wrong-kubeconfig', readFileSync(tc.cluster.kubeconfigPath, 'utf8').replace(tc.cluster.token, 'not-the-token'));
      const python = await promisify(execFile)('/usr/bin/python3', ['-c', [
        'import json, sys', 'from kubernetes import client, config', 'from kubernetes.client.rest import ApiException',
        'config.load_kube_config(config_file=sys.argv[1])',
        'try:\n  client.CoreV1Api().list_namespace()\nexcept ApiException as e:\n  print(e.status, json.loads(e.body)["message"])',
      ].join('\n'), wrongKubeconfig], { encoding: 'utf8' });
      expect(python.stdout).to.equal('401 Unauthorized\n');

      for (const authorization of ['Bearer not-the-token', `Bearer ${tc.cluster.token}x`, `bearer ${tc.cluster.token.slice(0, -2)}`]) {
        const res = await clusterFetch(tc.cluster, CM, { headers: { Authorization: authorization } });
        expect([res.status, await res.json()], authorization).to.deep.equal([401, UNAUTHORIZED]);
      }
      // Authentication comes first: a wrong token is refused even where anonymous callers are served.
      expect((await clusterFetch(tc.cluster, '/healthz', { headers: { Authorization: 'Bearer not-the-token' } })).status).to.equal(401);
    });

    it('accepts the kubeconfig token, whatever the case of "Bearer", and writes it only into a 0600 kubeconfig', async () => {
      const res = await clusterFetch(tc.cluster, CM, { headers: { Authorization: `bearer ${tc.cluster.token}` } });
      expect(res.status).to.equal(200);
      expect(statSync(tc.cluster.kubeconfigPath).mode & 0o777).to.equal(0o600);
      const user = (parse(readFileSync(tc.cluster.kubeconfigPath, 'utf8')) as { users: { user: { token: string } }[] }).users[0]!.user;
      expect(user.token).to.equal(tc.cluster.token);
      expect(user.token).to.not.equal('local-cluster');
    });

    it('serves an anonymous caller /healthz, /livez, /readyz and /version only, as system:public-info-viewer', async () => {
      for (const path of ['/healthz', '/livez', '/readyz', '/version']) {
        expect((await clusterFetch(tc.cluster, path, {}, null)).status, path).to.equal(200);
      }
      const version = (await (await clusterFetch(tc.cluster, '/version', {}, null)).json()) as { major: string };
      expect(version.major).to.equal('1');

      const list = await clusterFetch(tc.cluster, CM, {}, null);
      expect([list.status, await list.json()]).to.deep.equal([403, status(
        'configmaps is forbidden: User "system:anonymous" cannot list resource "configmaps" in API group "" in the namespace "default"',
        'Forbidden', 403, { kind: 'configmaps' })]);
      const get = await clusterFetch(tc.cluster, '/apis/media.example.com/v1/namespaces/default/mediajobs/demo/status', { method: 'PATCH' }, null);
      expect([get.status, await get.json()]).to.deep.equal([403, status(
        'mediajobs.media.example.com "demo" is forbidden: User "system:anonymous" cannot patch resource "mediajobs/status" in API group "media.example.com" in the namespace "default"',
        'Forbidden', 403, { name: 'demo', group: 'media.example.com', kind: 'mediajobs' })]);
      const discovery = await clusterFetch(tc.cluster, '/apis', {}, null);
      expect([discovery.status, await discovery.json()]).to.deep.equal([403, status(
        'forbidden: User "system:anonymous" cannot get path "/apis"', 'Forbidden', 403, {})]);
      const post = await clusterFetch(tc.cluster, '/version', { method: 'POST' }, null);
      expect(post.status).to.equal(403);

    });

    it('accepts the ServiceAccount token the kubelet projects into a pod', async () => {
      await tc.kubectl(['apply', '-f', tc.manifest('token-pod.yaml', `apiVersion: v1
kind: Pod
metadata:
  name: token-reader
spec:
  restartPolicy: Never
  containers:
    - name: main
      image: busybox
      command: [cat, /var/run/secrets/tokens/api-token]
      volumeMounts:
        - name: token
          mountPath: /var/run/secrets/tokens
  volumes:
    - name: token
      projected:
        sources:
          - serviceAccountToken:
              path: api-token
`)]);
      await tc.kubectl(['wait', '--for=jsonpath={.status.phase}=Succeeded', 'pod/token-reader', '--timeout=20s']);
      const token = (await tc.kubectl(['logs', 'token-reader'])).stdout;
      expect(token).to.not.equal(tc.cluster.token);
      // Authenticated (not 401) as the pod's account, which has no rights until a binding gives it some (RBAC).
      const refused = await tc.kubectl(['get', 'configmaps', `--token=${token}`, '-o', 'name'], { allowFail: true });
      expect(refused.stderr).to.contain('User "system:serviceaccount:default:default" cannot list resource "configmaps"');
      await tc.kubectl(['apply', '-f', tc.manifest('read-configmaps.yaml', `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: read-configmaps }
rules: [{ apiGroups: [""], resources: [configmaps], verbs: [list] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: read-configmaps }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-configmaps }
subjects: [{ kind: ServiceAccount, name: default, namespace: default }]
`)]);
      const asPod = await tc.kubectl(['get', 'configmaps', `--token=${token}`, '-o', 'name'], { allowFail: true });
      expect(asPod.code, asPod.stderr).to.equal(0);
    });
  });

  describe('request bodies', () => {
    const post = (path: string, contentType: string | undefined, body: string) =>
      clusterFetch(tc.cluster, path, { method: 'POST', body, headers: contentType ? { 'Content-Type': contentType } : {} });
    const json = JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'from-a-page' }, data: { a: '1' } });
    const BUILTIN = 'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf';

    it('refuses what a browser sends cross-origin without a preflight (text/plain, forms) with 415', async () => {
      for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
        const res = await post(CM, type, json);
        expect([res.status, await res.json()], type).to.deep.equal([415, status(BUILTIN, 'UnsupportedMediaType', 415)]);
      }
      const cr = await post('/apis/media.example.com/v1/namespaces/default/mediajobs', 'text/plain', '{}');
      expect([cr.status, await cr.json()]).to.deep.equal([415, status(
        'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml', 'UnsupportedMediaType', 415)]);
      const del = await clusterFetch(tc.cluster, `${CM}/anything`, { method: 'DELETE', body: '{}', headers: { 'Content-Type': 'text/plain' } });
      expect([del.status, await del.json()]).to.deep.equal([415, status(BUILTIN, 'UnsupportedMediaType', 415)]);
      const patch = await clusterFetch(tc.cluster, `${CM}/anything`, { method: 'PATCH', body: '{}', headers: { 'Content-Type': 'text/plain' } });
      expect(patch.status).to.equal(415);
      expect((await tc.kubectl(['get', 'configmap', 'from-a-page'], { allowFail: true })).code).to.not.equal(0);
    });

    it('reads a body without a Content-Type as JSON, and takes YAML and JSON with parameters', async () => {
      expect((await post(CM, undefined, json)).status).to.equal(201);
      expect((await post(CM, 'application/yaml', 'metadata: {name: as-yaml}\n')).status).to.equal(201);
      expect((await post(CM, 'Application/JSON; charset=utf-8', json.replace('from-a-page', 'with-params'))).status).to.equal(201);
      const del = await clusterFetch(tc.cluster, `${CM}/as-yaml`, { method: 'DELETE', body: 'propagationPolicy: Background\n', headers: { 'Content-Type': 'application/yaml' } });
      expect(del.status).to.equal(200);
    });
  });

  describe('Host header', () => {
    it('refuses a Host that is not a loopback name with 403, before authentication', async () => {
      for (const host of ['attacker.example', `attacker.example:${new URL(tc.cluster.url).port}`, '10.0.0.1', '[fe80::1]:80']) {
        const res = await rawRequest(tc.cluster, CM, 'GET', { Host: host, Authorization: `Bearer ${tc.cluster.token}` });
        expect(res.code, host).to.equal(403);
        expect(JSON.parse(res.body), host).to.deep.equal(status(
          `the local cluster serves only loopback hosts (localhost, 127.0.0.0/8, [::1]), not Host ${JSON.stringify(host)}: a guard against DNS rebinding`,
          'Forbidden', 403));
      }
      // Even where anonymous callers are served.
      expect((await rawRequest(tc.cluster, '/healthz', 'GET', { Host: 'attacker.example' })).code).to.equal(403);
    });

    it('serves localhost, 127.0.0.0/8 and [::1], with or without a port', async () => {
      const port = new URL(tc.cluster.url).port;
      for (const host of ['localhost', `LOCALHOST:${port}`, `127.0.0.1:${port}`, '127.9.8.7', `[::1]:${port}`]) {
        const res = await rawRequest(tc.cluster, CM, 'GET', { Host: host, Authorization: `Bearer ${tc.cluster.token}` });
        expect(res.code, host).to.equal(200);
      }
    });

    it('never sends CORS headers, to a preflight or to a request with an Origin', async () => {
      const preflight = await rawRequest(tc.cluster, CM, 'OPTIONS', {
        Origin: 'http://attacker.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization',
      });
      const withOrigin = await rawRequest(tc.cluster, CM, 'GET', { Origin: 'http://attacker.example', Authorization: `Bearer ${tc.cluster.token}` });
      expect(withOrigin.code).to.equal(200);
      for (const res of [preflight, withOrigin]) {
        expect(Object.keys(res.headers).filter((h) => h.startsWith('access-control-'))).to.deep.equal([]);
      }
      expect(preflight.code).to.equal(403);
    });
  });
});

describe('local cluster: its token across restarts', function () {
  this.timeout(60_000);
  const dir = mkdtempSync(join(tmpdir(), 'lc-token-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the token of a state dir, so the kubeconfig written before a restart still works; another dir gets another', async () => {
    const first = await startTestCluster({ stateDir: join(dir, 'state') });
    const port = Number(new URL(first.cluster.url).port);
    const oldToken = first.cluster.token;
    const saved = join(dir, 'kubeconfig-before-restart');
    writeFileSync(saved, readFileSync(first.cluster.kubeconfigPath));
    await first.kubectl(['create', 'configmap', 'kept', '--from-literal=a=1']);
    expect(statSync(join(dir, 'state', 'cluster-secret')).mode & 0o777).to.equal(0o600);
    await first.stop();

    const again = await startTestCluster({ stateDir: join(dir, 'state'), port });
    try {
      const kept = await again.kubectl(['--kubeconfig', saved, 'get', 'configmap', 'kept', '-o', 'jsonpath={.data.a}']);
      expect(kept.stdout).to.equal('1');
    } finally {
      await again.stop();
    }

    const other = await startTestCluster({ stateDir: join(dir, 'other-state'), port });
    try {
      const refused = await clusterFetch(other.cluster, '/api/v1/namespaces/default/configmaps', {}, oldToken);
      expect(refused.status).to.equal(401);
    } finally {
      await other.stop();
    }
  });
});
