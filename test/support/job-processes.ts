// The processes of one job on this machine, where the local kubelet runs
// pods as processes: the runner and everything it started inherit its
// environment, MEDIAJOB_JOB_ID included. For cancellation tests and the
// cancellation benchmark (nothing of a cancelled job may keep running).
import { readdirSync, readFileSync } from 'node:fs';

/** Pids of live (not zombie) processes whose environment names `jobId`. */
export function jobProcesses(jobId: string): number[] {
  const found: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if (readFileSync(`/proc/${e}/environ`, 'utf8').split('\0').includes(`MEDIAJOB_JOB_ID=${jobId}`)) found.push(Number(e));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}
