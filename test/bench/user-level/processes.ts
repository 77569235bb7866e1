/**
 * The processes of the user-level bench: a Node script (or a server binary) as a child process, ready once its output shows a line,
 * its output drained (a full pipe would stall it) and kept in a bounded tail for error messages.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { processCpuUs } from "../results.js";
import { cpuPerTask } from "./stats.js";

/** A script of this folder, by file name. */
export const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));

/** A running child process. */
export interface Child {
  readonly pid: number;
  /** The last few KB of its stdout and stderr. */
  output(): string;
  /** SIGTERM, then waits for its exit (SIGKILL after 10 s). Idempotent. */
  stop(): Promise<void>;
}

const TAIL_CHARS = 8192;

/**
 * Starts `node script ...args` with `env` added to this process's environment; resolves with the match of `ready`
 * in its output, or rejects when it exits first or after `timeoutMs`.
 */
export function startNode(
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  timeoutMs = 30_000,
): Promise<{ child: Child; match: RegExpMatchArray }> {
  return startProcess(process.execPath, [script, ...args], env, ready, timeoutMs);
}

/** {@link startNode} for any executable `file` (e.g. a server binary). */
export async function startProcess(
  file: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  timeoutMs = 30_000,
): Promise<{ child: Child; match: RegExpMatchArray }> {
  const label = file === process.execPath ? String(args[0]) : file;
  const proc: ChildProcess = spawn(file, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let tail = "";
  let onOutput: () => void = () => undefined;
  const take = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-TAIL_CHARS);
    onOutput();
  };
  proc.stdout?.on("data", take);
  proc.stderr?.on("data", take);
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const child: Child = {
    pid: proc.pid ?? 0,
    output: () => tail,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
  const match = await new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`${label}: not ready within ${timeoutMs} ms:\n${tail}`)), timeoutMs);
    const fail = (error: Error) => {
      clearTimeout(timer);
      onOutput = () => undefined;
      void child.stop().then(() => reject(error));
    };
    onOutput = () => {
      const m = tail.match(ready);
      if (!m) return;
      clearTimeout(timer);
      onOutput = () => undefined;
      resolve(m);
    };
    void exited.then(() => fail(new Error(`${label} exited (${proc.exitCode ?? proc.signalCode}) before it was ready:\n${tail}`)));
  });
  return { child, match };
}

/** Whose CPU is read: a process by pid, or a function reading CPU µs so far (e.g. `postgresCpuUs`). */
export type CpuSource = number | (() => number | undefined);

const cpuOf = (source: CpuSource) => (typeof source === "number" ? processCpuUs(source) : source());

/**
 * `run`, adding to each list of `into` the CPU its process (pid, or a reading of CPU µs such as PostgreSQL's) spent
 * per task in it, `tasks` tasks a run.
 */
export function withCpu(
  tasks: number,
  run: () => Promise<number>,
  into: ReadonlyArray<{ pid: CpuSource; list: number[] }>,
): () => Promise<number> {
  return async () => {
    const before = into.map(({ pid }) => cpuOf(pid));
    const value = await run();
    into.forEach(({ pid, list }, i) => {
      const used = cpuPerTask(before[i], cpuOf(pid), tasks);
      if (used !== undefined) list.push(used);
    });
    return value;
  };
}
