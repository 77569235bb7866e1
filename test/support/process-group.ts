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
export async function pollUntil<T>(check: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
