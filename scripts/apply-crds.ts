// Installs crds/*.yaml as written: each file's text is the body of a
// server-side apply (PATCH, application/apply-patch+yaml), as
// `kubectl apply --server-side -f crds/` sends it. Not through client-node's
// typed clients: ApiextensionsV1Api and KubernetesObjectApi both pass the
// body through ObjectSerializer, which reads the model's property names
// (`_enum`, `_default`, `x_kubernetes_validations`) and so drops every
// `enum`, `default` and `x-kubernetes-*` key a YAML document spells as the
// API does. Used by local mode (scripts/local-mode.ts), the tests and the
// benchmarks that install the CRDs from code.
import http from 'node:http';
import https from 'node:https';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as k8s from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';

/** This checkout's crds/. */
export const CRDS_DIR = resolve(fileURLToPath(new URL('../crds', import.meta.url)));
/** Who owns the fields these applies set (server-side apply's field manager). */
export const FIELD_MANAGER = 'mediajobs-local';
const CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

/** A failed request to the API server: its status and the Status message it answered with. */
export class KubeRequestError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = 'KubeRequestError';
  }
}

/**
 * One request to the current cluster of `kc` with its credentials (CA,
 * client certificate, token: applyToHTTPSOptions), answering the parsed
 * JSON body; a status of 300 or more throws KubeRequestError.
 */
export async function kubeRequest(
  kc: k8s.KubeConfig, method: string, path: string, body?: { text: string; contentType: string },
): Promise<Record<string, unknown>> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('kubeconfig has no current cluster');
  const url = new URL(path, server);
  const opts: https.RequestOptions = { method, headers: { Accept: 'application/json' } };
  await kc.applyToHTTPSOptions(opts);
  if (body) opts.headers = { ...opts.headers, 'Content-Type': body.contentType, 'Content-Length': Buffer.byteLength(body.text) };
  const send = url.protocol === 'https:' ? https.request : http.request;
  const { status, text } = await new Promise<{ status: number; text: string }>((done, fail) => {
    const req = send(url, opts, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', fail);
      res.on('end', () => done({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${url.pathname} timed out after 30 s`)));
    req.on('error', fail);
    req.end(body?.text);
  });
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch { /* not JSON: the status says enough */ }
  if (status >= 300) throw new KubeRequestError(status, `${method} ${url.pathname}: ${status} ${String(parsed.message ?? text.slice(0, 200))}`);
  return parsed;
}

/** Server-side apply of one CRD file's text, unchanged; returns the stored CRD. */
export async function applyCrdFile(kc: k8s.KubeConfig, file: string): Promise<Record<string, unknown>> {
  const text = readFileSync(file, 'utf8');
  const name = (parseYaml(text) as { metadata?: { name?: string } } | null)?.metadata?.name;
  if (!name) throw new Error(`${file} names no CustomResourceDefinition (metadata.name)`);
  const query = new URLSearchParams({ fieldManager: FIELD_MANAGER, force: 'true' });
  return kubeRequest(kc, 'PATCH', `${CRD_PATH}/${encodeURIComponent(name)}?${query}`, { text, contentType: 'application/apply-patch+yaml' });
}

/** Whether a stored CRD says it is Established (its resources are served). */
function established(crd: Record<string, unknown>): boolean {
  const conditions = ((crd.status as { conditions?: { type?: string; status?: string }[] } | undefined)?.conditions) ?? [];
  return conditions.some((c) => c.type === 'Established' && c.status === 'True');
}

/**
 * Apply every crds/*.yaml (or `files`: names in crds/, or paths) as written
 * and wait until each is Established (at most `timeoutMs`), so what starts
 * next can list its resources. Returns the CRDs' names.
 */
export async function applyCrds(kc: k8s.KubeConfig, opts: { files?: string[]; timeoutMs?: number } = {}): Promise<string[]> {
  const files = (opts.files ?? readdirSync(CRDS_DIR).filter((f) => f.endsWith('.yaml')).sort()).map((f) => resolve(CRDS_DIR, f));
  const names: string[] = [];
  for (const file of files) {
    let crd = await applyCrdFile(kc, file);
    const name = String((crd.metadata as { name?: string } | undefined)?.name);
    const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
    while (!established(crd)) {
      if (Date.now() > deadline) throw new Error(`CustomResourceDefinition ${name} not Established after ${opts.timeoutMs ?? 30_000} ms`);
      await new Promise((r) => setTimeout(r, 50));
      crd = await kubeRequest(kc, 'GET', `${CRD_PATH}/${encodeURIComponent(name)}`);
    }
    names.push(name);
  }
  return names;
}
