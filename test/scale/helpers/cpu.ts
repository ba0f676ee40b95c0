/**
 * Where the CPU went: seconds of CPU (user + system) per process, read from /proc/<pid>/stat, so a
 * scale run can say which part (API, PostgreSQL, workers, the rest) the machine's cores worked for.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** The fields of /proc/<pid>/stat after the command name (which is in parentheses and may hold spaces). */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds `pid` has used; with `reapedChildren`, those of its children that exited and were
 * waited for too (a postmaster's backends that have come and gone). 0 for a process that is gone.
 */
export function cpuSeconds(pid: number, { reapedChildren = false } = {}): number {
  const fields = statFields(pid);
  if (!fields) return 0;
  // After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
  const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]));
  return (utime! + stime! + (reapedChildren ? cutime! + cstime! : 0)) / ticksPerSecond;
}

/** The live children of `pid`. */
export function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((child) => Number(statFields(child)?.[1]) === pid);
}

/** A PostgreSQL server's CPU seconds: the postmaster, every backend it has reaped, and those alive. */
export function postgresCpuSeconds(postmasterPid: number): number {
  return cpuSeconds(postmasterPid, { reapedChildren: true }) + childrenOf(postmasterPid).reduce((sum, pid) => sum + cpuSeconds(pid), 0);
}

/** The machine's CPU seconds spent on anything but idle and I/O wait, summed over every core. */
export function machineBusySeconds(): number {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq, steal] = values.map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) / ticksPerSecond;
}
