// Run by test/loopback-guard.test.ts in a mocha of its own: a test that
// tries to leave the machine and swallows the error it gets, as a refusal
// test does. fe80::1 without a zone cannot leave even if the guard let it.
import { it } from 'mocha';

it('swallows a failed fetch of a link-local address', async () => {
  await fetch('http://[fe80::1]:8080/', { signal: AbortSignal.timeout(5000) }).catch(() => undefined);
});

it('runs after it', () => undefined);
