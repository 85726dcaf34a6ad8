// The local cluster's TLS certificate. It serves HTTPS because client-go
// (kubectl) never sends a kubeconfig's bearer token to a plain-HTTP server
// (kubernetes/kubectl#744), so over HTTP every kubectl call would be
// anonymous. One self-signed certificate for the loopback names, made with
// the openssl CLI on first use and kept beside the cluster's secret
// (credentials.ts): a restarted cluster serves the certificate its
// kubeconfig already trusts (as certificate-authority-data).
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';

const CERT_FILE = 'serving.crt';
const KEY_FILE = 'serving.key';

export interface ServingCert {
  /** PEM; also the CA a client trusts. */
  cert: string;
  key: string;
}

/** The certificate kept in `dir`, made for localhost, 127.0.0.1, ::1 and `listenHost` when there is none. */
export function servingCert(dir: string, listenHost: string): ServingCert {
  mkdirSync(dir, { recursive: true });
  const certPath = join(dir, CERT_FILE);
  const keyPath = join(dir, KEY_FILE);
  if (!existsSync(certPath) || !existsSync(keyPath)) makeCert(certPath, keyPath, listenHost);
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8') };
}

function makeCert(certPath: string, keyPath: string, listenHost: string): void {
  const names = ['DNS:localhost', 'IP:127.0.0.1', 'IP:::1'];
  const extra = isIP(listenHost) ? `IP:${listenHost}` : `DNS:${listenHost}`;
  if (!names.includes(extra)) names.push(extra);
  // Written under temporary names and renamed, so that a half-made pair is never read.
  const [tmpCert, tmpKey] = [`${certPath}.${process.pid}.tmp`, `${keyPath}.${process.pid}.tmp`];
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '3650',
      '-subj', '/CN=local-cluster', '-addext', `subjectAltName=${names.join(',')}`, '-keyout', tmpKey, '-out', tmpCert,
    ], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: Buffer };
    const why = err.code === 'ENOENT' ? 'openssl is not installed' : (err.stderr?.toString().trim() || err.message);
    throw new Error(`could not make the local cluster's TLS certificate: ${why}`);
  }
  chmodSync(tmpKey, 0o600);
  renameSync(tmpKey, keyPath);
  renameSync(tmpCert, certPath);
}
