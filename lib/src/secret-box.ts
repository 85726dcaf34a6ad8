// AES-256-GCM for secrets kept in Postgres (webhook addresses, legacy storage
// credentials). Every ciphertext names the id of the key that sealed it, so
// keys rotate: new data is sealed with the first key, old data still opens.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export class SecretBoxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretBoxError';
  }
}

export class SecretBox {
  private readonly keys = new Map<string, Buffer>();
  private readonly current: string;

  /** `spec` is "kid:base64key[,kid2:base64key…]"; each key must decode to 32 bytes. */
  constructor(spec: string) {
    const entries = spec.split(',').map((s) => s.trim()).filter(Boolean);
    if (!entries.length) throw new SecretBoxError('no secret keys configured');
    for (const entry of entries) {
      const at = entry.indexOf(':');
      const kid = entry.slice(0, at);
      const key = Buffer.from(entry.slice(at + 1), 'base64');
      if (at <= 0 || !/^[A-Za-z0-9_-]+$/.test(kid)) throw new SecretBoxError(`bad key id in SECRET_KEYS entry ${JSON.stringify(kid)}`);
      if (key.length !== 32) throw new SecretBoxError(`key ${kid} must be 32 bytes of base64, got ${key.length}`);
      this.keys.set(kid, key);
    }
    this.current = entries[0]!.slice(0, entries[0]!.indexOf(':'));
  }

  /** "v1.<kid>.<iv>.<tag>.<ciphertext>", base64url parts. */
  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.current)!, iv);
    cipher.setAAD(Buffer.from(this.current));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', this.current, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  }

  open(sealed: string): string {
    const [v, kid, iv, tag, ct] = sealed.split('.');
    if (v !== 'v1' || !kid || iv === undefined || tag === undefined || ct === undefined) throw new SecretBoxError('not a sealed secret');
    const key = this.keys.get(kid);
    if (!key) throw new SecretBoxError(`sealed with unknown key id ${kid}`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(kid));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretBoxError('secret could not be opened (wrong key or tampered)');
    }
  }

  /** A fresh key spec for development: "dev:<32 random bytes base64>". */
  static generateSpec(kid = 'dev'): string {
    return `${kid}:${randomBytes(32).toString('base64')}`;
  }
}
