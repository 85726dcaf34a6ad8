// The deployment's GCS/Drive endpoint settings (storageEndpointsSchema), which
// the gateway, the operator and the runner load at start; the end-to-end run
// through the fakes is test/e2e/storage.test.ts.
import { expect } from 'chai';
import { ConfigError, loadConfig, storageEndpoints, storageEndpointsSchema } from '../src/config.js';

const load = (env: NodeJS.ProcessEnv) => storageEndpoints(loadConfig(storageEndpointsSchema, env));

function refusal(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(storageEndpointsSchema, env);
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('accepted');
}

describe('storage endpoint settings (GCS_*, DRIVE_*)', () => {
  it("unset: no provider options, so the clients use Google's endpoints", () => {
    expect(load({})).to.deep.equal({});
  });

  it("become createProvider's gcs and drive options, only those that are set", () => {
    expect(load({ GCS_API_ENDPOINT: 'https://storage-psc.p.googleapis.com', DRIVE_TOKEN_URI: 'http://127.0.0.1:4000/token' })).to.deep.equal({
      gcs: { apiEndpoint: 'https://storage-psc.p.googleapis.com' },
      drive: { tokenUri: 'http://127.0.0.1:4000/token' },
    });
    expect(load({ GCS_TOKEN_URI: 'https://oauth2-psc.p.googleapis.com/token', DRIVE_API_ENDPOINT: 'https://www-psc.p.googleapis.com/' })).to.deep.equal({
      gcs: { tokenUri: 'https://oauth2-psc.p.googleapis.com/token' },
      drive: { rootUrl: 'https://www-psc.p.googleapis.com/' },
    });
  });

  it('a value that is not an http(s) URL, or carries credentials, stops the start naming the variable but not the value', () => {
    for (const [name, value] of [
      ['GCS_API_ENDPOINT', 'storage.internal'],
      ['GCS_TOKEN_URI', 'ftp://oauth.internal/token'],
      ['DRIVE_API_ENDPOINT', 'https://user:hunter2@drive.internal/'],
      ['DRIVE_TOKEN_URI', ''],
    ] as const) {
      const message = refusal({ [name]: value });
      expect(message).to.include(`${name}: must be an http(s) URL without credentials`);
      if (value) expect(message).to.not.include(value);
    }
  });

  it('STORAGE_EMULATOR_HOST is refused, pointing at the settings to use instead', () => {
    expect(refusal({ STORAGE_EMULATOR_HOST: 'http://127.0.0.1:4443' })).to.include(
      'STORAGE_EMULATOR_HOST: is not honoured; set GCS_API_ENDPOINT and GCS_TOKEN_URI instead',
    );
  });
});
