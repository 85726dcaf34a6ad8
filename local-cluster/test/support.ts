// Test support: a local cluster per suite and the real kubectl against it,
// with a fresh HOME so kubectl's discovery cache never leaks between runs.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ApiException, KubeConfig, type V1Status } from '@kubernetes/client-node';
import { pino } from 'pino';
import { LocalCluster, type LocalClusterOptions } from '../src/index.js';

export const KUBECTL = process.env.KUBECTL ?? '/usr/bin/kubectl';

export interface TestCluster {
  cluster: LocalCluster;
  home: string;
  kubectl(args: string[], opts?: { input?: string; allowFail?: boolean }): Promise<KubectlResult>;
  /** Start a long-running kubectl (e.g. get -w); returns the process and its accumulated output. */
  kubectlStream(args: string[]): { proc: ChildProcess; output: () => string };
  /** Write a manifest to a temp file and return its path. */
  manifest(name: string, text: string): string;
  stop(): Promise<void>;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function startTestCluster(opts: LocalClusterOptions = {}): Promise<TestCluster> {
  const home = mkdtempSync(join(tmpdir(), 'lc-test-'));
  // Searchable, not listable: pods running as their own users (the cluster as root) reach their work dir below.
  chmodSync(home, 0o711);
  const cluster = await LocalCluster.start({
    workDir: join(home, 'work'),
    logger: pino({ level: process.env.LOG_LEVEL ?? 'silent' }),
    backoffBaseMs: 50,
    ...opts,
  });
  const env = { ...process.env, HOME: home, KUBECONFIG: cluster.kubeconfigPath };
  return {
    cluster,
    home,
    kubectl(args, o = {}) {
      return new Promise((resolve, reject) => {
        const child = execFile(KUBECTL, args, { env, timeout: 30_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          if (code !== 0 && !o.allowFail) {
            reject(new Error(`kubectl ${args.join(' ')} exited ${code}: ${stderr || stdout}`));
            return;
          }
          resolve({ code, stdout, stderr });
        });
        if (o.input !== undefined) child.stdin!.end(o.input);
      });
    },
    kubectlStream(args) {
      const proc = spawn(KUBECTL, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      return { proc, output: () => out };
    },
    manifest(name, text) {
      const path = join(home, name);
      writeFileSync(path, text);
      return path;
    },
    async stop() {
      await cluster.stop();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** A client-node KubeConfig for the cluster, loaded from the kubeconfig file it wrote (a fresh one per call). */
export function kubeConfigFor(cluster: LocalCluster): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  return kc;
}

/**
 * A raw HTTPS request to the cluster, trusting its certificate and
 * authenticated as its administrator with the kubeconfig's bearer token (or
 * `token`; null sends none, as system:anonymous, who is refused (403) beyond
 * /healthz, /livez, /readyz and /version): the way to see what clients hide
 * (exact bodies, headers, media types). Headers in `init` are sent as given.
 * Node's fetch cannot be told to trust a CA, hence node:https under a fetch Response.
 */
export function clusterFetch(cluster: LocalCluster, path: string, init: RequestInit = {}, token: string | null = cluster.token): Promise<Response> {
  const headers = new Headers(init.headers);
  if (token !== null && !headers.has('Authorization')) headers.set('Authorization', `Bearer ${token}`);
  if (init.body !== undefined && init.body !== null && typeof init.body !== 'string') throw new Error('clusterFetch sends string bodies only');
  // node:http frames a DELETE's body only with an explicit length.
  if (typeof init.body === 'string') headers.set('Content-Length', String(Buffer.byteLength(init.body)));
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${cluster.url}${path}`, {
      method: init.method ?? 'GET', headers: Object.fromEntries(headers), ca: cluster.caCert, signal: init.signal ?? undefined,
    }, (res) => {
      const responseHeaders = new Headers();
      for (const [k, v] of Object.entries(res.headers)) for (const one of [v ?? []].flat()) responseHeaders.append(k, one);
      resolve(new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status: res.statusCode ?? 0, headers: responseHeaders }));
    });
    req.on('error', reject);
    req.end(init.body ?? undefined);
  });
}

/**
 * Await a client-node call that must fail; return the HTTP code and the Status
 * body (client-node 2.x leaves an error body as the raw JSON text).
 */
export async function apiError(call: Promise<unknown>): Promise<{ code: number; status: V1Status }> {
  try {
    await call;
  } catch (e) {
    if (!(e instanceof ApiException)) throw e;
    const body: unknown = e.body;
    return { code: e.code, status: (typeof body === 'string' ? JSON.parse(body) : body) as V1Status };
  }
  throw new Error('expected the API call to fail');
}

/** Poll until `check` returns a truthy value or the deadline passes. */
export async function eventually<T>(check: () => T | Promise<T>, timeoutMs = 10_000, stepMs = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** The illustrative CRD of the requirements (group media.example.com, v1, columns Phase/Input). */
export const EXAMPLE_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: mediajobs.media.example.com
spec:
  group: media.example.com
  scope: Namespaced
  names:
    plural: mediajobs
    singular: mediajob
    kind: MediaJob
    shortNames: [mj]
    categories: [all, media]
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      additionalPrinterColumns:
        - name: Phase
          type: string
          jsonPath: .status.phase
        - name: Input
          type: string
          priority: 1
          jsonPath: .spec.input
        - name: Age
          type: date
          jsonPath: .metadata.creationTimestamp
      schema:
        openAPIV3Schema:
          type: object
          description: A media job of the example CRD.
          properties:
            spec:
              type: object
              required: [input]
              properties:
                input:
                  type: string
                  description: The input URL.
                preset:
                  type: string
                  enum: [fast, slow]
                  default: fast
                retries:
                  type: integer
                  minimum: 0
                  maximum: 10
                  default: 2
            status:
              type: object
              properties:
                phase:
                  type: string
`;

export const EXAMPLE_MEDIAJOB = `apiVersion: media.example.com/v1
kind: MediaJob
metadata:
  name: demo
spec:
  input: https://example.com/a.mp4
`;
