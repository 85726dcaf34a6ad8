// Each image carries every program its process spawns (issue 17, item 6).
// The gateway image once had no yt-dlp although POST /metadata and POST
// /is-short run it: on a real cluster they would have failed. This reads
// the code each image runs (every module reachable from its main.ts by
// static and dynamic imports, the shared library included) for the names of
// the external programs it spawns, and each Dockerfile's final stage for the
// programs it installs, and fails on a gap.
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** External programs the code may spawn, by the name it spawns them with (configs default to these names). */
const PROGRAMS = ['yt-dlp', 'ffmpeg', 'ffprobe', 'python3', 'rclone', 'curl'];

/** What installing a Debian package or the yt-dlp pip package puts on PATH. */
const PROVIDES: Record<string, string[]> = {
  'ffmpeg': ['ffmpeg', 'ffprobe'],
  'python3': ['python3'],
  'tini': ['tini'],
  'curl': ['curl'],
  'rclone': ['rclone'],
  'yt-dlp': ['yt-dlp'],
};

const IMAGES = [
  { name: 'api-gateway', dockerfile: 'api-gateway/Dockerfile', main: 'api-gateway/src/main.ts' },
  { name: 'operator', dockerfile: 'operator/Dockerfile', main: 'operator/src/main.ts' },
  { name: 'runner', dockerfile: 'runner-image/Dockerfile', main: 'runner-image/src/main.ts' },
];

/** A module specifier resolved to a source file of this repository, or undefined (a package). */
function resolveModule(from: string, spec: string): string | undefined {
  let target: string;
  if (spec.startsWith('.')) target = resolve(dirname(from), spec);
  else if (spec.startsWith('@mediajobs/lib/')) target = join(ROOT, 'lib/src', spec.slice('@mediajobs/lib/'.length));
  else if (spec === '@mediajobs/lib') target = join(ROOT, 'lib/src/index');
  else return undefined;
  const candidates = [target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts')];
  return candidates.find((c) => existsSync(c) && c.endsWith('.ts'));
}

/** Every repository module the entry point loads, itself included. */
function reachable(entry: string): Set<string> {
  const seen = new Set<string>();
  const queue = [join(ROOT, entry)];
  const importRe = /(?:from\s+|import\s*\(\s*|import\s+)['"]([^'"]+)['"]/g;
  while (queue.length) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const m of readFileSync(file, 'utf8').matchAll(importRe)) {
      const next = resolveModule(file, m[1]!);
      if (next && !seen.has(next)) queue.push(next);
    }
  }
  return seen;
}

/** The programs named as quoted strings in code that also spawns processes. */
function spawnedPrograms(modules: Set<string>): Set<string> {
  const sources = [...modules].map((f) => readFileSync(f, 'utf8'));
  if (!sources.some((s) => /\b(spawn|execFile|spawnSync|execFileSync)\s*\(/.test(s))) return new Set();
  const found = new Set<string>();
  for (const s of sources) {
    for (const p of PROGRAMS) if (s.includes(`'${p}'`) || s.includes(`"${p}"`)) found.add(p);
  }
  return found;
}

/** The programs the Dockerfile's final stage installs (apt-get packages, pip's yt-dlp); node comes with the base image. */
function installedPrograms(dockerfile: string): Set<string> {
  const text = readFileSync(join(ROOT, dockerfile), 'utf8').replace(/\\\n/g, ' ');
  const final = text.slice(text.lastIndexOf('\nFROM '));
  const out = new Set<string>(['node']);
  for (const m of final.matchAll(/apt-get install[^&\n]*/g)) {
    for (const word of m[0].split(/\s+/).slice(2)) for (const p of PROVIDES[word] ?? []) out.add(p);
  }
  if (/pip install[^&\n]*yt-dlp/.test(final)) out.add('yt-dlp');
  return out;
}

describe('images carry what their code spawns', () => {
  for (const image of IMAGES) {
    it(`${image.name}: every program its code spawns is installed in ${image.dockerfile}`, () => {
      const modules = reachable(image.main);
      expect(modules.size, 'the import walk found the code').to.be.greaterThan(5);
      const missing = [...spawnedPrograms(modules)].filter((p) => !installedPrograms(image.dockerfile).has(p));
      expect(missing, `${image.name} spawns ${missing.join(', ')} but its image does not install it`).to.deep.equal([]);
    });
  }

  it('the walk and the parse see what they should: the runner spawns yt-dlp, ffmpeg and ffprobe, and its image has them', () => {
    expect([...spawnedPrograms(reachable('runner-image/src/main.ts'))]).to.include.members(['yt-dlp', 'ffmpeg', 'ffprobe']);
    expect([...installedPrograms('runner-image/Dockerfile')]).to.include.members(['yt-dlp', 'ffmpeg', 'ffprobe']);
    // POST /metadata and /is-short run yt-dlp in the gateway; MediaBatches applied with kubectl are expanded by the operator.
    expect([...spawnedPrograms(reachable('api-gateway/src/main.ts'))]).to.include('yt-dlp');
    expect([...spawnedPrograms(reachable('operator/src/main.ts'))]).to.include('yt-dlp');
  });
});
