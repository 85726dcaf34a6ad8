// The secret box: a value opens only at the place it was sealed for, values
// from before places were bound still open, and none is downgraded to them.
import { expect } from 'chai';
import { createCipheriv, randomBytes } from 'node:crypto';
import { SecretBox, SecretBoxError, type SecretContext } from '../src/secret-box.js';
import { sealV1 } from './secret-box-support.js';

describe('lib: SecretBox', () => {
  const spec = SecretBox.generateSpec('k1');
  const box = new SecretBox(spec);
  const here: SecretContext = { table: 'jobs', column: 'webhook_url_enc', row: '0190a1b2-0000-7000-8000-000000000001' };
  const refused = (sealed: string, at: SecretContext) => {
    expect(() => box.open(sealed, at)).to.throw(SecretBoxError, /could not be opened \(wrong key, wrong place or tampered\)/);
  };

  it('opens a value at its place, and refuses it at another row, column or table', () => {
    const sealed = box.seal('https://hooks.example/a', here);
    expect(sealed).to.match(/^v2\.k1\./);
    expect(box.open(sealed, here)).to.equal('https://hooks.example/a');
    refused(sealed, { ...here, row: '0190a1b2-0000-7000-8000-000000000002' });
    refused(sealed, { ...here, column: 'storage_enc' });
    refused(sealed, { ...here, table: 'batches' });
  });

  it('keeps the fields of a place apart (no field runs into the next)', () => {
    const sealed = box.seal('x', { table: 'a', column: 'b.c', row: 'd' });
    refused(sealed, { table: 'a.b', column: 'c', row: 'd' });
    refused(sealed, { table: 'a', column: 'b', row: 'c:d' });
  });

  it('refuses a v1 value (sealed before places were bound) unless told to open unbound values', () => {
    const old = sealV1(spec, 'legacy-secret');
    expect(() => box.open(old, here)).to.throw(SecretBoxError, /sealed unbound \(v1\): run the reseal command/);
    expect(() => box.open(old, here)).to.not.throw(/legacy-secret/);
  });

  it('with openUnbound (SECRET_OPEN_UNBOUND, the reseal command), opens a v1 value anywhere, with any configured key', () => {
    const old = sealV1(spec, 'legacy-secret');
    expect(new SecretBox(spec, { openUnbound: true }).open(old, here)).to.equal('legacy-secret');
    const rotated = new SecretBox(`${SecretBox.generateSpec('k2')},${spec}`, { openUnbound: true });
    expect(rotated.open(old, { table: 'outbox', column: 'target_enc', row: '7' })).to.equal('legacy-secret');
  });

  it('never opens a v2 value relabelled v1 (no downgrade to the place-free format)', () => {
    const sealed = box.seal('https://hooks.example/a', here);
    expect(() => box.open(`v1${sealed.slice(2)}`, here)).to.throw(SecretBoxError, /unbound/);
    expect(() => new SecretBox(spec, { openUnbound: true }).open(`v1${sealed.slice(2)}`, here)).to.throw(SecretBoxError, /wrong place or tampered/);
  });

  it('refuses a value whose GCM tag is shorter than 16 bytes: one cut from a stored value, and one sealed with a 12-byte tag', () => {
    const sealed = box.seal('https://hooks.example/a', here);
    const parts = sealed.split('.');
    const cut = [...parts.slice(0, 3), Buffer.from(parts[3]!, 'base64url').subarray(0, 12).toString('base64url'), parts[4]].join('.');
    refused(cut, here);
    // Sealed as seal() does (v2, the same associated data), but with a 12-byte tag.
    const kid = spec.slice(0, spec.indexOf(':'));
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', Buffer.from(spec.slice(spec.indexOf(':') + 1), 'base64'), iv, { authTagLength: 12 });
    cipher.setAAD(Buffer.from(['v2', kid, here.table, here.column, here.row].join('\0')));
    const ct = Buffer.concat([cipher.update('https://hooks.example/b', 'utf8'), cipher.final()]);
    const short = ['v2', kid, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
    expect(Buffer.from(short.split('.')[3]!, 'base64url')).to.have.length(12);
    refused(short, here);
    // The full tag of the same kind opens: the refusals above are the tag's length, nothing else.
    expect(box.open(sealed, here)).to.equal('https://hooks.example/a');
  });

  it('knows which values are current: v2 under the first key', () => {
    const rotated = new SecretBox(`${SecretBox.generateSpec('k2')},${spec}`);
    expect(rotated.isCurrent(rotated.seal('x', here))).to.equal(true);
    expect(rotated.isCurrent(box.seal('x', here))).to.equal(false);
    expect(rotated.isCurrent(sealV1(`${SecretBox.generateSpec('k2')}`, 'x'))).to.equal(false);
  });

  it('names the place but never the value when it cannot open one', () => {
    const err = (() => {
      try {
        box.open(box.seal('s3cr3t-value', here), { ...here, row: 'other' });
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err?.message).to.include('jobs.webhook_url_enc:other').and.not.include('s3cr3t');
  });
});
