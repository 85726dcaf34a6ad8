// argv that runs a TypeScript entry point with tsx from any working
// directory: pods of the local cluster run in their own directories, where
// a bare `--import tsx` would not resolve.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

export function tsxCommand(script: string): string[] {
  const loader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return [process.execPath, '--import', loader, script];
}
