/**
 * `run_script` (`system:run_script`): runs a program from an argv array, never through a shell, with its working
 * directory inside the workspace, a timeout, capped output and an allowlisted environment. The program runs in
 * its own process group; on timeout or cancel the whole group gets SIGTERM, then SIGKILL after a grace period.
 */
import { spawn } from "node:child_process";
import type { Workspace } from "./workspace.js";
import { ToolError } from "./workspace.js";

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

/** What one run produced. */
export interface ScriptOutcome {
  /** Exit code, or null when a signal ended the program. */
  exitCode: number | null;
  /** The signal that ended the program, if any. */
  signal: string | null;
  /** Whether the timeout ended the run. */
  timedOut: boolean;
  stdout: string;
  stderr: string;
  /** Process id of the program (its process group id too). */
  pid: number | undefined;
}

/** Variables that never reach a script, whatever the allowlist says. */
const NEVER_PASSED = new Set(["OPENAI_API_KEY"]);

/** The environment of a script: only allowlisted variables present in `source`. */
export function scriptEnvironment(allow: readonly string[], source: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of allow) {
    const value = source[name];
    if (value !== undefined && !NEVER_PASSED.has(name)) env[name] = value;
  }
  return env;
}

/** Variables a script's own environment may never set: secrets, and loader or runtime hooks that inject code. */
export const REFUSED_ENV = /^(?:OPENAI_API_KEY|LD_\w+|DYLD_\w+|NODE_OPTIONS|BASH_ENV|ENV|PYTHONSTARTUP|PERL5OPT)$/;

function withoutRefused(env: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !REFUSED_ENV.test(name)));
}

/** Runs `argv` in the workspace. Resolves when the program and its output pipes are closed. */
export async function runScript(
  ws: Workspace,
  limits: ScriptLimits,
  args: { argv: string[]; cwd?: string | undefined; timeoutMs?: number | undefined; env?: Readonly<Record<string, string>> | undefined; inheritEnv?: boolean | undefined },
  signal: AbortSignal,
): Promise<ScriptOutcome> {
  const [command, ...rest] = args.argv;
  if (!command) throw new ToolError("argv must name a program");
  const cwd = await ws.resolve(args.cwd ?? ".");
  const timeoutMs = Math.min(args.timeoutMs ?? limits.scriptTimeoutMs, limits.scriptTimeoutMs);
  signal.throwIfAborted();
  const child = spawn(command, rest, {
    cwd,
    env: { ...(args.inheritEnv === false ? {} : scriptEnvironment(limits.scriptEnv, process.env)), ...withoutRefused(args.env ?? {}) },
    detached: true,
    shell: false,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stdout = capture(child.stdout, limits.scriptOutputMaxBytes);
  const stderr = capture(child.stderr, limits.scriptOutputMaxBytes);
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  const killGroup = (sig: NodeJS.Signals): void => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      // The group is already gone.
    }
  };
  const stop = (): void => {
    if (killTimer) return;
    killGroup("SIGTERM");
    killTimer = setTimeout(() => killGroup("SIGKILL"), limits.scriptKillGraceMs);
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
      // we are stopping, the group is killed outright.
      child.once("exit", () => {
        if (killTimer) killGroup("SIGKILL");
      });
    });
    return { exitCode, signal: exitSignal, timedOut, stdout: stdout.text(), stderr: stderr.text(), pid: child.pid };
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
