// The route of one gateway lookup of a platform's URL (api-gateway/src/
// platform-lookups.ts, docs/adr/0027 "The gateway's lookups"): which pool
// proxy it leaves by and what becomes of its cookie copy. The gateway's real
// egress (chained to the pool's proxy); the platforms and pools as the
// directory's last list holds them; the Secrets as read by name.
import { stat } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import { startLookupEgress, type RunningLookupEgress } from '@mediajobs/lib/media-info/egress';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { PlatformRouting } from '@mediajobs/lib/platforms/directory';
import type { MediaPlatform, ProxyPool } from '@mediajobs/lib/platforms/types';
import { PlatformLookups } from '../src/platform-lookups.js';

const NOW = Date.parse('2026-11-29T12:00:00Z');
const URL_OF_PLATFORM = 'https://video.example/watch?v=1';

function directory(platform: MediaPlatform, pools: ProxyPool[]): PlatformRouting {
  return {
    disabledFor: () => platform.spec.disabled === true,
    platformFor: (url) => (new URL(url).hostname === 'video.example' ? platform : undefined),
    pool: (name) => pools.find((p) => p.metadata.name === name),
  };
}

const platform = (spec: Partial<MediaPlatform['spec']>): MediaPlatform => ({
  apiVersion: 'mediajobs.io/v1alpha1', kind: 'MediaPlatform', metadata: { name: 'video' },
  spec: { match: { hosts: ['video.example'] }, ...spec } as MediaPlatform['spec'],
});

/** Two proxies (URLs without credentials), each cooling down until `coolingUntil` when given. */
const pool = (coolingUntil?: string): ProxyPool => ({
  apiVersion: 'mediajobs.io/v1alpha1', kind: 'ProxyPool', metadata: { name: 'exits' },
  spec: { proxies: [{ id: 'p1', url: 'http://127.0.0.1:9' }, { id: 'p2', url: 'http://127.0.0.1:9' }] } as ProxyPool['spec'],
  ...(coolingUntil && {
    status: { proxies: ['p1', 'p2'].map((id) => ({ id, state: 'CoolingDown' as const, successes: 0, defences: 1, coolingUntil })) },
  }),
});

describe('api-gateway: a lookup\'s route through a platform', () => {
  let egress: RunningLookupEgress;
  const log = pino({ level: 'silent' });

  before(async () => {
    egress = await startLookupEgress({ policy: new OutboundPolicy({ allowed: ['127.0.0.1/32'] }) });
  });
  after(async () => {
    await egress?.close();
  });

  it('every proxy of the pool cooling down: the lookup still leaves by one of them, the full run by the other', async () => {
    const cooling = new Date(NOW + 300_000).toISOString();
    const lookups = new PlatformLookups({
      platforms: directory(platform({ proxyPool: 'exits' }), [pool(cooling)]), egress, readSecret: async () => undefined, log, now: () => NOW,
    });
    const light = await lookups.open(URL_OF_PLATFORM);
    try {
      expect(light?.proxyId).to.be.oneOf(['p1', 'p2']);
      const full = await lookups.open(URL_OF_PLATFORM, light);
      try {
        expect(full?.proxyId, 'the new session leaves by the other exit').to.equal(light!.proxyId === 'p1' ? 'p2' : 'p1');
      } finally {
        await full?.close();
      }
    } finally {
      await light?.close();
    }
  });

  it('the cookie file is a private copy for the run, removed when it ends', async () => {
    const cookies = '# Netscape HTTP Cookie File\n.video.example\tTRUE\t/\tTRUE\t0\tSID\tsecret-value\n';
    const lookups = new PlatformLookups({
      platforms: directory(platform({ cookies: { secretRef: { namespace: 'mediajobs', name: 'video-cookies' } } }), []),
      egress, readSecret: async (ns, name) => (ns === 'mediajobs' && name === 'video-cookies' ? { main: cookies } : undefined), log, now: () => NOW,
    });
    const route = await lookups.open(URL_OF_PLATFORM);
    const file = route!.args[route!.args.indexOf('--cookies') + 1]!;
    expect(readFileSync(file, 'utf8')).to.equal(cookies);
    expect((await stat(file)).mode & 0o777, 'the file').to.equal(0o600);
    expect((await stat(dirname(file))).mode & 0o777, 'its directory').to.equal(0o700);
    await route!.close();
    const gone = await stat(dirname(file)).then(() => false, (err: NodeJS.ErrnoException) => err.code === 'ENOENT');
    expect(gone, 'the copy and its directory are removed').to.equal(true);
  });
});
