// AES-256-GCM for secrets kept in Postgres (webhook and chat addresses,
// signing secrets, storage credentials, result URLs). Every ciphertext names
// the id of the key that sealed it, so keys rotate: new data is sealed with
// the first key, old data still opens. Since v2 every ciphertext is also
// bound to the place it is stored (table, column, row) through the GCM
// associated data, so a database writer cannot move a sealed value to
// another row or column and have it opened there. Which context each value
// has is lib/src/db/sealed-columns.ts's; re-sealing lib/src/db/reseal.ts's.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export class SecretBoxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretBoxError';
  }
}

/** Where a sealed value is stored: its table, its column, and the row's identity (its key, or what it is bound to). */
export interface SecretContext {
  table: string;
  column: string;
  row: string;
}

/** A plaintext the caller holds, sealed by the table's owner once it knows the row (lib/src/db: inserts name the place). */
export type Sealable = (at: SecretContext) => string;

/** The version of values bound to their place; `v1` (key id only) is never written, and opened only when asked (below). */
const CURRENT = 'v2';

export interface SecretBoxOptions {
  /**
   * Open `v1` values, sealed before places were bound (SECRET_OPEN_UNBOUND;
   * the re-seal command always does). Off by default: a v1 value opens
   * anywhere, so a database writer holding an old one (a backup) could put
   * it in any row. On only while a deployment that still has v1 values
   * runs the re-seal command.
   */
  openUnbound?: boolean;
}

/**
 * GCM's full 16-byte tag, pinned on both sides. A decipher that takes the
 * tag's length from the value accepts 12, 8 or even 4 bytes; a shorter GCM
 * tag is the full one's first bytes, so a stored value with its tag cut
 * still opens, and a forger has far fewer bits to guess.
 */
const TAG_BYTES = 16;

const contextText = (at: SecretContext) => `${at.table}.${at.column}:${at.row}`;

/** v2's associated data: version, key id and place, NUL-separated so no field can run into the next. */
const aadV2 = (kid: string, at: SecretContext) => Buffer.from([CURRENT, kid, at.table, at.column, at.row].join('\0'));

export class SecretBox {
  private readonly keys = new Map<string, Buffer>();
  private readonly current: string;
  private readonly openUnbound: boolean;

  /** `spec` is "kid:base64key[,kid2:base64key…]"; each key must decode to 32 bytes. */
  constructor(spec: string, options: SecretBoxOptions = {}) {
    this.openUnbound = options.openUnbound ?? false;
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

  /** "v2.<kid>.<iv>.<tag>.<ciphertext>", base64url parts, bound to `at`. */
  seal(plaintext: string, at: SecretContext): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.current)!, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aadV2(this.current, at));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [CURRENT, this.current, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  }

  /** `plaintext`, to be sealed where the table's owner stores it. */
  sealable(plaintext: string): Sealable {
    return (at) => this.seal(plaintext, at);
  }

  /**
   * The plaintext of a value stored at `at`. A v2 value opens only there (a
   * moved one fails as tampered); a v1 value, sealed before places were
   * bound, opens anywhere, so only with `openUnbound` (the re-seal command
   * upgrades it). The version is itself in v2's associated data, so
   * relabelling a v2 value "v1" fails too.
   */
  open(sealed: string, at: SecretContext): string {
    const [v, kid, iv, tag, ct] = sealed.split('.');
    if ((v !== 'v1' && v !== CURRENT) || !kid || iv === undefined || tag === undefined || ct === undefined) {
      throw new SecretBoxError('not a sealed secret');
    }
    if (v === 'v1' && !this.openUnbound) {
      throw new SecretBoxError(`secret at ${contextText(at)} is sealed unbound (v1): run the reseal command (SECRET_OPEN_UNBOUND=true lets the services open it meanwhile)`);
    }
    const key = this.keys.get(kid);
    if (!key) throw new SecretBoxError(`sealed with unknown key id ${kid}`);
    try {
      const authTag = Buffer.from(tag, 'base64url');
      if (authTag.length !== TAG_BYTES) throw new SecretBoxError('tag is not 16 bytes');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES });
      decipher.setAAD(v === CURRENT ? aadV2(kid, at) : Buffer.from(kid));
      decipher.setAuthTag(authTag);
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretBoxError(`secret at ${contextText(at)} could not be opened (wrong key, wrong place or tampered)`);
    }
  }

  /** True when `sealed` is already in the current format under the current key: the re-seal command leaves it alone. */
  isCurrent(sealed: string): boolean {
    return sealed.startsWith(this.currentPrefix());
  }

  /** "v2.<current kid>.", the prefix every value the re-seal command has finished with starts with. */
  currentPrefix(): string {
    return `${CURRENT}.${this.current}.`;
  }

  /** A fresh key spec for development: "dev:<32 random bytes base64>". */
  static generateSpec(kid = 'dev'): string {
    return `${kid}:${randomBytes(32).toString('base64')}`;
  }
}
