// What every storage provider test asserts about errors: a StorageError,
// thrown or rejected, whose every rendering is free of secrets and hosts.
import { expect } from 'chai';
import { inspect } from 'node:util';
import { StorageError } from '../src/storage/types.js';

/** The StorageError `p` rejects with (fails the test if it resolves or rejects with anything else). */
export async function caught(p: Promise<unknown>): Promise<StorageError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(StorageError);
    return err as StorageError;
  }
  expect.fail('expected a StorageError');
}

/** The StorageError `fn` throws. */
export function thrown(fn: () => unknown): StorageError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(StorageError);
    return err as StorageError;
  }
  expect.fail('expected a StorageError');
}

/** No secret (or host) in the message, reason, JSON, inspection or stack, and no `cause` carrying the raw error. */
export function expectSanitised(err: StorageError, secrets: string[]): void {
  const rendered = [err.message, err.reason, JSON.stringify(err), inspect(err, { depth: 5 }), String(err.stack)].join('\n');
  for (const s of secrets) expect(rendered, 'error text leaks a secret or host').not.to.include(s);
  expect(err).not.to.have.property('cause');
}
