/** Checking from a test that a process group is gone, and polling for a condition with a deadline. */
import { readdirSync, readFileSync } from "node:fs";

/**
 * Whether process group `pgid` still has a live member. A zombie counts as dead: where PID 1 does not reap
 * orphans (some containers), a killed grandchild stays a zombie in its group, and `kill(-pgid, 0)` still finds it.
 */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw err;
  }
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true;
  }
  return entries.some((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // After "(comm) ": state, ppid, pgrp, …
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return state !== "Z" && Number(pgrp) === pgid;
    } catch {
      return false;
    }
  });
}

/** Resolves once `check()` returns a value other than undefined, polling every 20 ms; rejects after `timeoutMs`. */
export async function pollUntil<T>(check: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A sleep length (s) that names this run's test scripts among the machine's processes: another suite may run beside it. */
export const RUN_SLEEP = 7000 + Math.floor(Math.random() * 1000);

/**
 * Host pids of the live (not zombie) processes whose command line is exactly `command` (its argv joined by
 * spaces). Sandboxed programs run in a PID namespace of their own: the pids they print are not host pids, so a
 * test finds them by a command line of its own instead (`sleep 7301`).
 */
export function pidsRunning(command: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim() !== command) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z") found.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** Resolves once no live process runs `command` (a PID namespace is torn down asynchronously: polled). */
export const noneRunning = (command: string, timeoutMs = 5_000) =>
  pollUntil(() => (pidsRunning(command).length === 0 ? true : undefined), `no process running '${command}'`, timeoutMs);
