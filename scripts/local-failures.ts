// How local mode reports a start that cannot go on: one line saying what
// failed, why and what to do, never a stack trace. Each step that knows its
// likely failures throws a StartupError with that line; `explainFailure`
// turns anything else (a full disk, a permission, a bug) into one line too.
import { constants } from 'node:fs';
import { accessSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';

/** A failure whose message is already the line the user reads. */
export class StartupError extends Error {}

/** The one line for any error that ends the start; `stateDir` is named when the error names no file. */
export function explainFailure(err: unknown, stateDir: string): string {
  if (err instanceof StartupError) return err.message;
  const e = err as NodeJS.ErrnoException;
  const where = ` (${e.path ?? `state in ${stateDir}`})`;
  switch (e.code) {
    case 'ENOSPC': return `the disk is full${where}: free some space and run again`;
    case 'EDQUOT': return `the disk quota is used up${where}: free some space and run again`;
    case 'EROFS': return `the file system is read-only${where}: set MEDIAJOBS_LOCAL_DIR to a writable folder`;
    case 'EACCES':
    case 'EPERM': return `permission denied${where}: run as the user who owns the checkout, or set MEDIAJOBS_LOCAL_DIR to a folder you can write`;
    default: return `local mode failed: ${firstLine(e.message ?? String(err))}`;
  }
}

export function firstLine(text: string): string {
  return text.trim().split('\n')[0]?.trim() ?? '';
}

/** `what` on `port` is taken by something else: the line that says so and what to set instead. */
export function portTakenMessage(what: string, port: number, variable: string): string {
  return `${what} port ${port} is taken by another program: stop it, or set ${variable} to a free port`;
}

/**
 * Fails with the port-taken line if nothing can listen on `host:port` now.
 * Checked before anything starts, so a taken port costs no Postgres start and
 * stop; the real listen still reports EADDRINUSE should the port go meanwhile.
 */
export async function requireFreePort(host: string, port: number, what: string, variable: string): Promise<void> {
  if (!(await portFree(host, port))) throw new StartupError(portTakenMessage(what, port, variable));
}

/** Whether nothing listens on the port (a listen there succeeds). */
export function portFree(host: string, port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
}

/** Programs the runner pods need, looked up on PATH the way a spawn would. */
export function requireTools(tools: string[], path = process.env.PATH ?? ''): void {
  const missing = tools.filter((tool) => !path.split(delimiter).some((dir) => dir && isExecutable(join(dir, tool))));
  if (missing.length) {
    throw new StartupError(`${missing.join(', ')} not found on PATH: install them (\`make run\` does, from Debian's yt-dlp and ffmpeg packages) and run again`);
  }
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
