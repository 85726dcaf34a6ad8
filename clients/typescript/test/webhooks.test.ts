// verifyWebhook against the two signers that matter: the operator's own
// (lib/src/webhook-signing.ts, what deliveries carry) and the reference
// `standardwebhooks` package; and the refusals a receiver relies on.
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { generateSecret, secretKey, signedHeaders } from '@mediajobs/lib/webhook-signing';
import { verifyWebhook, WebhookVerificationError } from '../src/index.js';

const body = JSON.stringify({ type: 'job_completed', job_id: '0b0f9c8e-8d7e-4a53-9d2c-0f3b8f3b1c11', status: 'completed', url: 'https://example.com/a.mp4' });
const now = Date.UTC(2026, 0, 1, 12);
const ts = now / 1000;

describe('@mediajobs/client verifyWebhook', () => {
  it("accepts the operator's signature, returning the parsed event", () => {
    const secret = generateSecret();
    const headers = signedHeaders([secretKey(secret)], 'evt_1', ts, body);
    expect(verifyWebhook(headers, body, secret, { now })).to.deep.equal(JSON.parse(body));
  });

  it('accepts a delivery signed during a rotation by either secret (several signatures in the header), from fetch Headers or a Buffer', () => {
    const [oldSecret, newSecret] = [generateSecret(), generateSecret()];
    const headers = signedHeaders([secretKey(newSecret), secretKey(oldSecret)], 'evt_2', ts, body);
    expect(headers['webhook-signature']!.split(' ')).to.have.length(2);
    expect(verifyWebhook(new Headers(headers), Buffer.from(body), oldSecret, { now })).to.have.property('type', 'job_completed');
    expect(verifyWebhook(headers, body, newSecret, { now })).to.have.property('type', 'job_completed');
  });

  it('agrees with the standardwebhooks package both ways', () => {
    const secret = generateSecret();
    const wh = new Webhook(secret);
    const signature = wh.sign('msg_1', new Date(now), body);
    expect(verifyWebhook({ 'Webhook-Id': 'msg_1', 'Webhook-Timestamp': String(ts), 'Webhook-Signature': signature }, body, secret, { now })).to.be.an('object');
    // The package checks against the real clock; sign at it.
    const nowTs = Math.floor(Date.now() / 1000);
    expect(wh.verify(body, signedHeaders([secretKey(secret)], 'msg_2', nowTs, body))).to.deep.equal(JSON.parse(body));
  });

  const refusals: [string, (h: Record<string, string>) => Record<string, string>, string, RegExp][] = [
    ['a changed body', (h) => h, body.replace('completed', 'failed'), /No matching signature/],
    ['another secret', (h) => h, body, /No matching signature/],
    ['a timestamp over 5 minutes old', (h) => ({ ...h, 'webhook-timestamp': String(ts - 301) }), body, /too old/],
    ['a timestamp over 5 minutes ahead', (h) => ({ ...h, 'webhook-timestamp': String(ts + 301) }), body, /too new/],
    ['no signature header (a key without a secret)', ({ 'webhook-signature': _s, ...h }) => h, body, /Missing/],
    ['a signature of another version', (h) => ({ ...h, 'webhook-signature': h['webhook-signature']!.replace('v1,', 'v1a,') }), body, /No matching signature/],
  ];
  for (const [what, change, sent, message] of refusals) {
    it(`refuses ${what}`, () => {
      const secret = generateSecret();
      const signer = what === 'another secret' ? generateSecret() : secret;
      const headers = change(signedHeaders([secretKey(signer)], 'evt_3', ts, body));
      expect(() => verifyWebhook(headers, sent, secret, { now })).to.throw(WebhookVerificationError, message);
    });
  }

  it('takes a wider tolerance when asked', () => {
    const secret = generateSecret();
    const headers = signedHeaders([secretKey(secret)], 'evt_4', ts - 600, body);
    expect(verifyWebhook(headers, body, secret, { now, toleranceSeconds: 900 })).to.be.an('object');
  });
});
