// Values as the secret box wrote them before v2 (key id only in the
// associated data): stored rows from before the upgrade, for the tests that
// must keep opening them and the re-seal command that upgrades them.
import { createCipheriv, randomBytes } from 'node:crypto';

/** "v1.<kid>.<iv>.<tag>.<ct>" under the first key of `spec`, as the old SecretBox.seal made it. */
export function sealV1(spec: string, plaintext: string): string {
  const first = spec.split(',')[0]!.trim();
  const kid = first.slice(0, first.indexOf(':'));
  const key = Buffer.from(first.slice(first.indexOf(':') + 1), 'base64');
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(kid));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', kid, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
}
