// Upload grant tokens (lib/src/storage/upload-grants.ts): what the operator
// mints into a runner's Secret and the gateway accepts, and the sealed upload
// ids that tie an upload to the job and key it was begun for.
import { expect } from 'chai';
import { createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { SecretBox } from '../src/secret-box.js';
import { UploadGrantKeys } from '../src/storage/upload-grants.js';

const JOB = '3f2b7c1e-9a4d-4e5f-8a6b-1c2d3e4f5a6b';
const OTHER_JOB = 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee';
const NOW = 1_750_000_000_000;
const IN_AN_HOUR = NOW / 1000 + 3600;

describe('upload grant tokens', () => {
  const k1 = `k1:${randomBytes(32).toString('base64')}`;
  const k2 = `k2:${randomBytes(32).toString('base64')}`;

  it('are <jobId>.<expires>.<kid>.<HMAC-SHA256 under HKDF("mediajobs upload grant") of the primary key>', () => {
    const token = new UploadGrantKeys(`${k1},${k2}`).mint(JOB, IN_AN_HOUR);
    const raw = Buffer.from(k1.slice(3), 'base64');
    const derived = Buffer.from(hkdfSync('sha256', raw, Buffer.alloc(0), 'mediajobs upload grant', 32));
    const claims = `${JOB}.${IN_AN_HOUR}.k1`;
    expect(token).to.equal(`${claims}.${createHmac('sha256', derived).update(claims).digest('base64url')}`);
    // Never a MAC under SECRET_KEYS' AES key itself.
    expect(token).not.to.include(createHmac('sha256', raw).update(claims).digest('base64url'));
  });

  it('verify names the job and the expiry of a genuine token, until it expires', () => {
    const keys = new UploadGrantKeys(k1);
    const token = keys.mint(JOB, IN_AN_HOUR);
    expect(keys.verify(token, NOW)).to.deep.equal({ ok: true, jobId: JOB, expiresAt: IN_AN_HOUR, kid: 'k1' });
    expect(keys.verify(token, IN_AN_HOUR * 1000 - 1)).to.include({ ok: true });
    expect(keys.verify(token, IN_AN_HOUR * 1000)).to.deep.equal({ ok: false, why: 'expired' });
  });

  it('refuses a token whose job, expiry or key id was changed, and one minted under other keys', () => {
    const keys = new UploadGrantKeys(k1);
    const [job, expires, kid, mac] = keys.mint(JOB, IN_AN_HOUR).split('.') as [string, string, string, string];
    const forged = [
      [OTHER_JOB, expires, kid, mac],
      [job, String(Number(expires) + 86_400), kid, mac],
      [job, expires, 'k2', mac],
      [job, expires, kid, `${mac.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`],
    ].map((p) => p.join('.'));
    for (const t of forged) expect(new UploadGrantKeys(`${k1},${k2}`).verify(t, NOW), t).to.deep.equal({ ok: false, why: 'forged' });
    expect(new UploadGrantKeys(k2).verify(new UploadGrantKeys(k1).mint(JOB, IN_AN_HOUR), NOW)).to.deep.equal({ ok: false, why: 'forged' });
    // An expired forgery is a forgery: "expired" is said only of genuine tokens.
    expect(keys.verify(forged[0], IN_AN_HOUR * 1000 + 1)).to.deep.equal({ ok: false, why: 'forged' });
  });

  it('refuses what is not a token at all', () => {
    const keys = new UploadGrantKeys(k1);
    expect(keys.verify(undefined, NOW)).to.deep.equal({ ok: false, why: 'missing' });
    expect(keys.verify('', NOW)).to.deep.equal({ ok: false, why: 'missing' });
    for (const t of ['x', 'a.b.c', `${JOB}.${IN_AN_HOUR}.k1`, `${JOB}.soon.k1.${'A'.repeat(43)}`, `../etc.${IN_AN_HOUR}.k1.${'A'.repeat(43)}`, `${keys.mint(JOB, IN_AN_HOUR)}.x`]) {
      expect(keys.verify(t, NOW), t).to.deep.equal({ ok: false, why: 'malformed' });
    }
  });

  it('survive a key rotation while the minting key is still listed', () => {
    const before = new UploadGrantKeys(k1).mint(JOB, IN_AN_HOUR);
    expect(new UploadGrantKeys(`${k2},${k1}`).verify(before, NOW)).to.include({ ok: true, kid: 'k1' });
    expect(new UploadGrantKeys(`${k2},${k1}`).mint(JOB, IN_AN_HOUR).split('.')[2]).to.equal('k2');
  });

  it('take SECRET_KEYS with the secret box rules, and keep the keys out of inspect and JSON', () => {
    expect(() => new UploadGrantKeys('k1:c2hvcnQ=')).to.throw(/32 bytes/);
    expect(() => new UploadGrantKeys('')).to.throw(/no secret keys/);
    const keys = new UploadGrantKeys(SecretBox.generateSpec('dev'));
    const spec = k1.slice(3);
    const shown = inspect(new UploadGrantKeys(k1), { depth: 10 }) + JSON.stringify(new UploadGrantKeys(k1));
    expect(shown).not.to.include(spec);
    expect(shown).not.to.include(Buffer.from(spec, 'base64').toString('hex'));
    expect(keys.verify(keys.mint(JOB, IN_AN_HOUR), NOW).ok).to.equal(true);
  });

  it('mint only for a job id of letters, digits and dashes, with an expiry in unix seconds', () => {
    const keys = new UploadGrantKeys(k1);
    expect(() => keys.mint('a.b', IN_AN_HOUR)).to.throw();
    expect(() => keys.mint('', IN_AN_HOUR)).to.throw();
    expect(() => keys.mint(JOB, 1.5)).to.throw();
  });
});

describe('sealed upload ids', () => {
  const keys = new UploadGrantKeys(`k1:${randomBytes(32).toString('base64')}`);
  const uploadId = 'VXBsb2FkIElEIGZvciA.2~xyz/+=';

  it('open for the job and key they were sealed for, and for nothing else', () => {
    const sealed = keys.sealUpload('k1', JOB, 'videos/a.mp4', uploadId);
    expect(keys.openUpload('k1', JOB, 'videos/a.mp4', sealed)).to.equal(uploadId);
    expect(keys.openUpload('k1', OTHER_JOB, 'videos/a.mp4', sealed)).to.equal(undefined);
    expect(keys.openUpload('k1', JOB, 'videos/b.mp4', sealed)).to.equal(undefined);
    expect(keys.openUpload('k2', JOB, 'videos/a.mp4', sealed)).to.equal(undefined);
    // The bare upload id, or another id under this MAC, is not a sealed one.
    expect(keys.openUpload('k1', JOB, 'videos/a.mp4', uploadId)).to.equal(undefined);
    const other = `${Buffer.from('another-upload').toString('base64url')}.${sealed.split('.')[1]}`;
    expect(keys.openUpload('k1', JOB, 'videos/a.mp4', other)).to.equal(undefined);
  });
});
