/**
 * What a Handler needs of its tools: the definitions offered to the model, a way to run one call, and the argv runs
 * of `script` tasks. The runtime builds the tools (runtime/tools/); the Handler only sees this seam.
 */
import type { ToolCall } from "../../machines/handler/session.js";
import type { ScriptReply, ScriptRequest, ToolSourceKind } from "../../protocol/index.js";

/** How programs are run: in a bubblewrap sandbox (default), or without isolation (an explicit operator choice). */
export type SandboxMode = "bwrap" | "unsandboxed";

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
  /** Process id of the process started (`bwrap`, or the program unsandboxed; its process group id too). */
  pid: number | undefined;
}

/** A tool definition in the chat-completions `tools` shape. */
export interface ToolDefinition {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** The answer to one tool call. */
export interface ToolAnswer {
  /** Text for the `tool` message. */
  content: string;
  /** The call itself was malformed (unknown tool, bad arguments). */
  malformed: boolean;
}

/** What the Handler knows of one tool beyond its definition: where it comes from, whether a repeat is harmless. */
export interface ToolInfo {
  source: ToolSourceKind;
  /**
   * Calling it again with the same arguments does no harm (a read, or an idempotent write): a call that was in flight
   * in a Handler that stopped runs again; any other such call is answered with an error saying its outcome is unknown.
   */
  idempotent: boolean;
}

/** The tools of one Handler. */
export interface Toolset {
  /** Definitions sent to the model; empty when no tool is enabled. */
  readonly definitions: ToolDefinition[];
  /** Runs one call; never throws for a tool failure (the error text is the answer). */
  run(call: ToolCall, signal: AbortSignal): Promise<ToolAnswer>;
  /**
   * Runs the argv of a `script` task with `run_script`'s confinement and limits, answering structured output
   * (never text to parse back); `error` says why it could not run (not enabled, unknown program, bad cwd).
   */
  script(
    args: { argv: string[]; cwd?: string; timeoutMs?: number; env?: Readonly<Record<string, string>>; inheritEnv?: boolean },
    signal: AbortSignal,
  ): Promise<{ outcome: ScriptOutcome } | { error: string }>;
  /** How programs run here: the sandbox's mode, and why none can run when it is missing. */
  readonly sandbox: { mode: SandboxMode; unavailable: string | undefined };
  /** Where the tool `name` comes from and whether it is idempotent; undefined for a name no source has. */
  info?(name: string): ToolInfo | undefined;
  /** Stops what the tools hold (MCP server processes and connections); called when the Handler stops. */
  close?(): Promise<void>;
}

/** Runs one command of a `script` task (`<root>.handler.script`) with the `run_script` tool's confinement and limits. */
export async function runScriptRequest(toolset: Toolset, request: ScriptRequest, signal: AbortSignal): Promise<ScriptReply> {
  const base = { type: "handler.script_result" as const, taskId: request.taskId, nodePath: request.nodePath };
  const ran = await toolset.script(
    {
      argv: request.argv,
      timeoutMs: request.timeoutMs,
      ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
      ...(request.env ? { env: request.env } : {}),
      ...(request.inheritEnv === undefined ? {} : { inheritEnv: request.inheritEnv }),
    },
    signal,
  );
  if ("error" in ran) return { ...base, exitCode: null, timedOut: false, stdout: "", stderr: "", error: ran.error };
  const { exitCode, timedOut, stdout, stderr } = ran.outcome;
  return { ...base, exitCode, timedOut, stdout, stderr };
}
