// The local cluster's bearer tokens. One random secret per cluster, kept in a
// 0600 file beside its state, so that a cluster restarted on the same
// directory accepts the kubeconfig (and the pods' tokens) it handed out
// before. Every token is an identity signed with an HMAC of that secret: the
// administrator's (written into the kubeconfig) and one per ServiceAccount
// (projected into pods by the local kubelet), so nothing but the secret needs
// storing. Tokens are never logged.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const SECRET_FILE = 'cluster-secret';
/** The user the kubeconfig's token authenticates as (kind's and kubeadm's admin is in system:masters too). */
export const ADMIN_USER = 'local-cluster-admin';

/** Verified tokens kept (kube-apiserver caches token authentication too): past this many, the cache starts over. */
const VERIFIED_TOKENS_KEPT = 4096;

export class ClusterCredentials {
  /** Token → user, for tokens whose signature was checked: an HMAC per request was 2% of the API server's CPU under load. */
  private readonly verified = new Map<string, string>();

  private constructor(private readonly secret: Buffer) {}

  /** The secret of `dir`, made (32 random bytes, mode 0600) on first use. */
  static forDir(dir: string): ClusterCredentials {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, SECRET_FILE);
    try {
      // 'wx': two clusters starting on one directory agree on whichever secret was written first.
      writeFileSync(path, randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const secret = Buffer.from(readFileSync(path, 'utf8').trim(), 'hex');
    if (secret.length < 16) throw new Error(`${path} does not hold a cluster secret; move it away to make a new one`);
    return new ClusterCredentials(secret);
  }

  get adminToken(): string {
    return this.tokenFor(ADMIN_USER);
  }

  /** The token a pod of this ServiceAccount gets, as a projected serviceAccountToken source. */
  serviceAccountToken(namespace: string, name: string): string {
    return this.tokenFor(`system:serviceaccount:${namespace}:${name}`);
  }

  /** The user a token was issued to, or undefined when it was not issued by this cluster. Constant time in the signature. */
  userOf(token: string): string | undefined {
    const known = this.verified.get(token);
    if (known !== undefined) return known;
    const dot = token.lastIndexOf('.');
    if (dot <= 0) return undefined;
    const user = Buffer.from(token.slice(0, dot), 'base64url').toString('utf8');
    const given = Buffer.from(token.slice(dot + 1), 'base64url');
    const expected = this.signature(user);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    // Only tokens this cluster issued are kept, so a stream of made-up ones cannot grow it.
    if (this.verified.size >= VERIFIED_TOKENS_KEPT) this.verified.clear();
    this.verified.set(token, user);
    return user;
  }

  private tokenFor(user: string): string {
    return `${Buffer.from(user, 'utf8').toString('base64url')}.${this.signature(user).toString('base64url')}`;
  }

  private signature(user: string): Buffer {
    return createHmac('sha256', this.secret).update(user).digest();
  }
}
