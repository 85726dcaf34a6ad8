// The fixture cache (test/support/fixture-cache.ts): a fixture is made once
// for a given maker module, by one process when several ask at once, and
// again when its maker changes.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { cachedFixture, fixturePath } from './support/fixture-cache.js';

const CACHE_DIR = fileURLToPath(new URL('../.cache/test-fixtures/', import.meta.url));
const SUPPORT = fileURLToPath(new URL('./support/fixture-cache.ts', import.meta.url));

describe('fixture cache', () => {
  let scratch: string;
  let name: string;
  before(() => {
    scratch = mkdtempSync(join(tmpdir(), 'mj-fixture-cache-'));
  });
  beforeEach(() => {
    name = `cache-test-${randomBytes(4).toString('hex')}`;
  });
  afterEach(() => {
    for (const e of readdirSync(CACHE_DIR).filter((e) => e.startsWith(name))) rmSync(join(CACHE_DIR, e), { recursive: true, force: true });
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  /** A maker module; its text is what the cache keys on. */
  const maker = (text: string) => {
    const path = join(scratch, `${randomBytes(4).toString('hex')}.ts`);
    writeFileSync(path, text);
    return pathToFileURL(path).href;
  };

  it('makes a fixture once, and again only when the module that makes it changes', async () => {
    const module = maker('// maker v1\n');
    let made = 0;
    const make = async (dir: string) => {
      made++;
      writeFileSync(join(dir, 'file.txt'), `made ${made}`);
    };
    const first = await cachedFixture(name, module, make);
    expect(await cachedFixture(name, module, make)).to.equal(first);
    expect(readFileSync(join(first, 'file.txt'), 'utf8')).to.equal('made 1');
    expect(made).to.equal(1);

    appendFileSync(fileURLToPath(module), '// maker v2: other ffmpeg arguments\n');
    const second = await cachedFixture(name, module, make);
    expect(second).to.not.equal(first);
    expect(readFileSync(join(second, 'file.txt'), 'utf8')).to.equal('made 2');
  });

  it('leaves nothing behind when the maker fails, and makes it on the next ask', async () => {
    const module = maker('// failing maker\n');
    const failing = cachedFixture(name, module, async (dir) => {
      writeFileSync(join(dir, 'half.txt'), 'half');
      throw new Error('ffmpeg failed');
    });
    await failing.then(() => expect.fail('made'), (err: Error) => expect(err.message).to.equal('ffmpeg failed'));
    expect(readdirSync(CACHE_DIR).filter((e) => e.startsWith(name))).to.deep.equal([]);
    const dir = await cachedFixture(name, module, async (d) => writeFileSync(join(d, 'whole.txt'), 'whole'));
    expect(readdirSync(dir)).to.deep.equal(['whole.txt']);
  });

  it('several processes asking at once: one makes it, all get it', async function () {
    this.timeout(60_000);
    const module = maker('// shared maker\n');
    const log = join(scratch, `${name}.log`);
    // Each child asks for the fixture with a maker that takes a while and records that it ran.
    const child = join(scratch, `${name}-child.mts`);
    writeFileSync(child, [
      `import { appendFileSync, writeFileSync } from 'node:fs';`,
      `import { setTimeout as delay } from 'node:timers/promises';`,
      `import { cachedFixture } from ${JSON.stringify(pathToFileURL(SUPPORT).href)};`,
      `const dir = await cachedFixture(${JSON.stringify(name)}, ${JSON.stringify(module)}, async (d) => {`,
      `  appendFileSync(${JSON.stringify(log)}, 'made\\n');`,
      `  await delay(500);`,
      `  writeFileSync(d + '/file.txt', 'ok');`,
      `});`,
      `process.send!(dir);`,
    ].join('\n'));
    const dirs = await Promise.all([0, 1, 2].map(() => new Promise<string>((resolve, reject) => {
      const p = fork(child, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
      let err = '';
      p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      p.once('message', (m) => resolve(String(m)));
      p.once('exit', (code) => code !== 0 && reject(new Error(`child exited ${code}: ${err}`)));
    })));
    expect(new Set(dirs).size).to.equal(1);
    expect(readFileSync(join(dirs[0]!, 'file.txt'), 'utf8')).to.equal('ok');
    expect(readFileSync(log, 'utf8')).to.equal('made\n');
  });

  it('takes over the lock of a maker that died', async () => {
    const module = maker('// maker after a crash\n');
    mkdirSync(CACHE_DIR, { recursive: true });
    // What a killed maker leaves: the lock naming a process that is gone (pid 2^22 is above any pid_max).
    const lock = `${fixturePath(name, module)}.lock`;
    mkdirSync(lock);
    writeFileSync(join(lock, 'owner'), `${2 ** 22} ${Date.now()}`);
    const dir = await cachedFixture(name, module, async (d) => writeFileSync(join(d, 'file.txt'), 'ok'));
    expect(readFileSync(join(dir, 'file.txt'), 'utf8')).to.equal('ok');
  });
});
