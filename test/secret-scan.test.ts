// The log search of the end-to-end runs (test/support/secret-scan.ts): it
// finds a secret however a log line carries it, and its report never does.
import { expect } from 'chai';
import { assertNoLeaks, cookieFileSecrets, findLeaks, proxyUrlSecrets, secretKeysOf } from './support/secret-scan.js';

describe('the secret scan of a run\'s logs', () => {
  const hook = { kind: 'webhook URL', value: 'http://127.0.0.1:9/webhook?token=tok-0123456789abcdef' };
  const pem = { kind: 'service account key', value: 'line one of a key\nline two of a key' };

  it('finds a secret as itself, inside JSON (escaped newlines and slashes) and URL-encoded, naming kind and process', () => {
    const logs = [
      { source: 'gateway', text: `{"msg":"x","url":"${hook.value}"}` },
      { source: 'operator', text: JSON.stringify({ err: pem.value }) },
      { source: 'runner pod a', text: `{"u":"${hook.value.replace(/\//g, '\\/')}"}` },
      { source: 'runner pod b', text: `GET /?next=${encodeURIComponent(hook.value)}` },
      { source: 'clean', text: '{"msg":"webhook delivered","eventId":"e1"}' },
    ];
    expect(findLeaks([hook, pem], logs)).to.deep.equal([
      'webhook URL (http…, 53 chars) in gateway',
      'webhook URL (http…, 53 chars) in runner pod a',
      'webhook URL (http…, 53 chars) in runner pod b',
      'service account key (line…, 35 chars) in operator',
    ]);
  });

  it('reports without the secret, and passes clean logs', () => {
    const err = (() => {
      try {
        assertNoLeaks([hook], [{ source: 'gateway', text: hook.value }]);
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err?.message).to.include('webhook URL (http…').and.not.include('tok-0123456789abcdef');
    expect(() => assertNoLeaks([hook, pem], [{ source: 'gateway', text: 'nothing here' }])).not.to.throw();
  });

  it('takes each key of SECRET_KEYS as a secret, and refuses values too short to search for', () => {
    expect(secretKeysOf('a:QUJDREVGR0hJSktM,b:TU5PUFFSU1RVVldY')).to.deep.equal([
      { kind: 'SECRET_KEYS key a', value: 'QUJDREVGR0hJSktM' }, { kind: 'SECRET_KEYS key b', value: 'TU5PUFFSU1RVVldY' },
    ]);
    expect(() => findLeaks([{ kind: 'pin', value: '1234' }], [])).to.throw(/pin: a secret of 4 characters/);
  });

  it('takes a cookie file whole and each cookie value in it, and a proxy URL\'s password and userinfo, as secrets', () => {
    const file = '# Netscape HTTP Cookie File\n.video.example\tTRUE\t/\tTRUE\t0\tSID\tsid-value-0123456789\n#HttpOnly_.video.example\tTRUE\t/\tTRUE\t0\tHSID\thsid-value-abcdef\n';
    expect(cookieFileSecrets('cookie', file).map((s) => s.value)).to.deep.equal([file, 'sid-value-0123456789', 'hsid-value-abcdef']);
    const leaks = findLeaks(cookieFileSecrets('cookie', file), [{ source: 'gateway', text: 'cookie: SID=sid-value-0123456789' }]);
    expect(leaks).to.deep.equal(['cookie (value) (sid-…, 20 chars) in gateway']);
    expect(proxyUrlSecrets('proxy p1', 'http://user-session-1:pa%2Fss-0123456@127.0.0.1:3128')).to.deep.equal([
      { kind: 'proxy p1 password', value: 'pa/ss-0123456' }, { kind: 'proxy p1 userinfo', value: 'user-session-1:pa%2Fss-0123456' },
    ]);
    expect(proxyUrlSecrets('proxy p2', 'http://127.0.0.1:3128')).to.deep.equal([]);
  });
});
