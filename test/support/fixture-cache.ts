// Generated test fixtures (media made with ffmpeg) kept on disk by content
// hash, so each is made once per checkout and not once per test process: in
// mocha's parallel mode every worker is a process of its own, and the same
// ladders cost seconds of CPU each time. The hash covers what decides the
// files: the fixture's name, the text of the module that makes it (its
// parameters and its ffmpeg arguments) and the ffmpeg that runs them; a
// change to any of them makes a new entry. Entries live in the checkout's
// .cache/test-fixtures/ (ignored by git, gone with `make clean`, so a fresh
// clone starts empty; not under node_modules/, which an `npm ci` replaces,
// mid-run if it must) and are never written in place: made in a scratch
// folder beside, then renamed.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const CACHE_DIR = fileURLToPath(new URL('../../.cache/test-fixtures/', import.meta.url));
/** A maker that holds the lock longer than this is taken for dead (its process killed mid-way). */
const STALE_LOCK_MS = 5 * 60_000;

let ffmpegVersion: string | undefined;
/** `ffmpeg -version`'s first line: another build may encode the same inputs differently. */
function ffmpegIdentity(): string {
  ffmpegVersion ??= execFileSync('ffmpeg', ['-version'], { encoding: 'utf8' }).split('\n')[0] ?? '';
  return ffmpegVersion;
}

/**
 * The folder holding fixture `name`, made by `make(dir)` into an empty folder
 * the first time this text of `module` (the maker's `import.meta.url`) and
 * this ffmpeg are seen. Processes asking at once wait for one maker (a lock
 * folder beside the entry); `make` must depend on nothing but its module.
 */
export async function cachedFixture(name: string, module: string, make: (dir: string) => Promise<void>): Promise<string> {
  const dir = fixturePath(name, module);
  if (existsSync(dir)) return dir;
  await mkdir(CACHE_DIR, { recursive: true });
  const lock = `${dir}.lock`;
  while (!takeLock(lock)) {
    if (existsSync(dir)) return dir;
    await delay(100);
  }
  try {
    if (existsSync(dir)) return dir;
    const scratch = await mkdtemp(`${dir}.making-`);
    try {
      await make(scratch);
      await rename(scratch, dir);
    } catch (err) {
      await rm(scratch, { recursive: true, force: true });
      throw err;
    }
    return dir;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Where fixture `name` of this text of `module` is kept (whether made yet or not); its lock is `<path>.lock`. */
export function fixturePath(name: string, module: string): string {
  const hash = createHash('sha256')
    .update(JSON.stringify([name, readFileSync(fileURLToPath(module), 'utf8'), ffmpegIdentity()]))
    .digest('hex').slice(0, 16);
  return join(CACHE_DIR, `${name}-${hash}`);
}

/** Take the lock folder; one left by a dead or long-stuck maker is taken over. */
function takeLock(lock: string): boolean {
  try {
    mkdirSync(lock);
    writeFileSync(join(lock, 'owner'), `${process.pid} ${Date.now()}`);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  let owner: string;
  try {
    owner = readFileSync(join(lock, 'owner'), 'utf8');
  } catch {
    // Being written just now, or its maker died between the two calls above.
    const made = statSync(lock, { throwIfNoEntry: false })?.mtimeMs;
    if (made === undefined || Date.now() - made < 10_000) return false;
    owner = '0 0';
  }
  const [pid, since] = owner.split(' ').map(Number);
  if (pid && alive(pid) && Date.now() - since! < STALE_LOCK_MS) return false;
  rmSync(lock, { recursive: true, force: true });
  return false; // the next turn takes it, unless another process was quicker
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
