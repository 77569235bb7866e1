/**
 * `run_script` (`system:run_script`): runs a program from an argv array, never through a shell, in the Handler's
 * sandbox (runtime/tools/sandbox.ts), with its working directory inside the workspace, a timeout, capped output and
 * an allowlisted environment. Every program the runtime starts goes through {@link runScript}: the model's
 * `run_script`, `script` tasks, loop scripts, `file_paths` commands and `request_evaluation` targets. The sandbox
 * (or, unsandboxed, the program) runs in its own process group; on timeout or cancel the group gets SIGTERM, then
 * SIGKILL after a grace period; killing `bwrap` ends its whole PID namespace. Once the run is stopped and its first
 * process has exited, its pipes are closed: a process that escaped the group cannot keep the Handler waiting.
 */
import { spawn } from "node:child_process";
import type { Workspace } from "./workspace.js";
import { ToolError } from "./workspace.js";
import { REFUSED_ENV, unavailableMessage, withoutRefused, type Sandbox } from "./sandbox.js";

import type { ScriptOutcome } from "../../actors/handler/toolset.js";
export { REFUSED_ENV } from "./sandbox.js";
export type { ScriptOutcome };

/** Settings of `run_script`. */
export interface ScriptLimits {
  /** Default and largest timeout of one run. */
  scriptTimeoutMs: number;
  /** Time between SIGTERM and SIGKILL of the process group. */
  scriptKillGraceMs: number;
  /** Bytes kept of stdout and of stderr each; the rest is dropped with a note. */
  scriptOutputMaxBytes: number;
  /** Names of environment variables passed through to the program. */
  scriptEnv: readonly string[];
}

/** The environment of a script: only allowlisted variables present in `source`, none of {@link REFUSED_ENV}. */
export function scriptEnvironment(allow: readonly string[], source: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of allow) {
    const value = source[name];
    if (value !== undefined && !REFUSED_ENV.test(name)) env[name] = value;
  }
  return env;
}

/** What `bwrap` prints when it cannot start the program (not found, not executable). */
const EXEC_FAILED = /^bwrap: execvp [^:]*: (.*)$/m;

/** Runs `argv` in the workspace, in `sandbox`. Resolves when the program has exited and its output is read. */
export async function runScript(
  ws: Workspace,
  limits: ScriptLimits,
  args: {
    argv: string[];
    cwd?: string | undefined;
    timeoutMs?: number | undefined;
    env?: Readonly<Record<string, string>> | undefined;
    inheritEnv?: boolean | undefined;
  },
  signal: AbortSignal,
  sandbox: Sandbox,
): Promise<ScriptOutcome> {
  const [command] = args.argv;
  if (!command) throw new ToolError("argv must name a program");
  if (sandbox.unavailable !== undefined) throw new ToolError(unavailableMessage(sandbox.unavailable));
  const cwd = await ws.resolve(args.cwd ?? ".");
  const timeoutMs = Math.min(args.timeoutMs ?? limits.scriptTimeoutMs, limits.scriptTimeoutMs);
  signal.throwIfAborted();
  const inherited = args.inheritEnv === false ? {} : scriptEnvironment(limits.scriptEnv, process.env);
  // In the sandbox the Handler's home and temporary directory do not exist; its empty /tmp stands for both.
  if (sandbox.mode === "bwrap") for (const name of ["HOME", "TMPDIR"]) if (name in inherited) inherited[name] = "/tmp";
  const env = { ...inherited, ...withoutRefused(args.env ?? {}) };
  const wrapped = sandbox.wrap({ workspace: ws.root, cwd, argv: args.argv, env });
  const child = spawn(wrapped.command, wrapped.args, {
    cwd,
    env: sandbox.mode === "bwrap" ? wrapped.env : env,
    detached: true,
    shell: false,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stdout = capture(child.stdout, limits.scriptOutputMaxBytes);
  const stderr = capture(child.stderr, limits.scriptOutputMaxBytes);
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const killGroup = (sig: NodeJS.Signals): void => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      // The group is already gone.
    }
  };
  // Whatever still holds the pipes once the run is stopped and its first process is gone escaped the kill
  // (unsandboxed, a `setsid` child): its output is not waited for.
  const release = (): void => {
    child.stdout.destroy();
    child.stderr.destroy();
  };
  const stop = (): void => {
    if (killTimer) return;
    killGroup("SIGTERM");
    killTimer = setTimeout(() => killGroup("SIGKILL"), limits.scriptKillGraceMs);
    if (exited()) release();
  };
  const timer = setTimeout(() => {
    timedOut = true;
    stop();
  }, timeoutMs);
  signal.addEventListener("abort", stop, { once: true });
  try {
    const [exitCode, exitSignal] = await new Promise<[number | null, string | null]>((resolve, reject) => {
      child.once("error", (err) => reject(new ToolError(`cannot run '${command}': ${err.message}`)));
      child.once("close", (code, sig) => resolve([code, sig]));
      // A member of the group that outlives the leader would hold the pipes open; after the leader exits while
      // we are stopping, the group is killed outright and the pipes are let go.
      child.once("exit", () => {
        if (!killTimer) return;
        killGroup("SIGKILL");
        release();
      });
    });
    const err = stderr.text();
    const failed = sandbox.mode === "bwrap" && exitCode === 1 ? EXEC_FAILED.exec(err) : null;
    if (failed) throw new ToolError(`cannot run '${command}': ${failed[1] ?? "exec failed"}`);
    return { exitCode, signal: exitSignal, timedOut, stdout: stdout.text(), stderr: err, pid: child.pid };
  } finally {
    clearTimeout(timer);
    if (killTimer) clearTimeout(killTimer);
    signal.removeEventListener("abort", stop);
  }
}

/** Formats an outcome as the tool answer the model reads. */
export function formatOutcome(outcome: ScriptOutcome, timeoutMs: number): string {
  const status = outcome.timedOut
    ? `timed out after ${timeoutMs} ms; the process group was killed`
    : outcome.exitCode !== null
      ? `exit code ${outcome.exitCode}`
      : `ended by signal ${outcome.signal ?? "?"}`;
  return `${status}\n--- stdout ---\n${outcome.stdout}\n--- stderr ---\n${outcome.stderr}`;
}

function capture(stream: NodeJS.ReadableStream, maxBytes: number): { text(): string } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = 0;
  stream.on("data", (chunk: Buffer) => {
    const room = maxBytes - kept;
    if (room > 0) {
      const part = chunk.subarray(0, room);
      chunks.push(part);
      kept += part.length;
    }
    dropped += Math.max(0, chunk.length - Math.max(room, 0));
  });
  return {
    text: () => {
      const body = Buffer.concat(chunks).toString("utf8");
      return dropped > 0 ? `${body}\n[truncated: ${dropped} more bytes dropped]` : body;
    },
  };
}
