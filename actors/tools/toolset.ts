/**
 * The Handler's direct tools, offered to the model through the chat-completions tool-calling API. Each tool's
 * arguments are declared once as a zod schema, which gives both the JSON Schema sent to the model and the check
 * of what the model sends back. A malformed call (unknown tool, arguments that are not JSON or do not match)
 * and a failing tool both answer the model with error text; only malformed calls are counted against the
 * session's budget.
 */
import { z } from "zod";
import type { ToolCall } from "../../machines/handler-session.js";
import { listWorkspaceFiles, readWorkspaceFile, type FileToolLimits } from "./files.js";
import { formatOutcome, runScript, type ScriptLimits, type ScriptOutcome } from "./run-script.js";
import { openWorkspace, ToolError, type Workspace } from "./workspace.js";

/** Names of the direct tools. */
export const TOOL_NAMES = ["read_file", "list_files", "run_script"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/** Configuration of the tools of a Handler. */
export interface ToolsConfig extends FileToolLimits, ScriptLimits {
  /** The directory the tools are confined to. */
  workspaceRoot: string;
  /** Tools offered to the model. */
  enabled: readonly ToolName[];
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
  script(args: { argv: string[]; cwd?: string; timeoutMs?: number; env?: Readonly<Record<string, string>>; inheritEnv?: boolean }, signal: AbortSignal): Promise<{ outcome: ScriptOutcome } | { error: string }>;
}

const ReadFileArgs = z.strictObject({
  path: z.string().min(1).describe("File path relative to the workspace root."),
  offset: z.int().nonnegative().optional().describe("Byte offset to start reading at (for long files)."),
});
const ListFilesArgs = z.strictObject({
  path: z.string().optional().describe("Directory relative to the workspace root; the root by default."),
  recursive: z.boolean().optional().describe("List subdirectories too."),
});
const RunScriptArgs = z.strictObject({
  argv: z.array(z.string()).min(1).describe("Program and arguments; no shell is involved."),
  cwd: z.string().optional().describe("Working directory relative to the workspace root."),
  timeoutMs: z.int().positive().optional().describe("Timeout in milliseconds (capped by the Handler's limit)."),
});

type Run = (ws: Workspace, config: ToolsConfig, signal: AbortSignal) => Promise<string>;

/** A tool: its description, the JSON Schema of its arguments, and a check that yields a runnable call. */
interface Tool {
  description: string;
  parameters: Record<string, unknown>;
  prepare(raw: unknown): { ok: true; run: Run } | { ok: false; problems: string };
}

function defineTool<S extends z.ZodType>(
  description: string,
  args: S,
  run: (ws: Workspace, config: ToolsConfig, args: z.infer<S>, signal: AbortSignal) => Promise<string>,
): Tool {
  const { $schema: _ignored, ...parameters } = z.toJSONSchema(args);
  return {
    description,
    parameters,
    prepare(raw) {
      const parsed = args.safeParse(raw);
      if (parsed.success) return { ok: true, run: (ws, config, signal) => run(ws, config, parsed.data, signal) };
      return { ok: false, problems: parsed.error.issues.map((i) => `${i.path.join(".") || "(arguments)"}: ${i.message}`).join("; ") };
    },
  };
}

const TOOLS: Record<ToolName, Tool> = {
  read_file: defineTool(
    "Read a text file of the workspace. Long files are cut; read on with `offset`.",
    ReadFileArgs,
    (ws, config, args) => readWorkspaceFile(ws, config, args),
  ),
  list_files: defineTool(
    "List a directory of the workspace. Directories end in '/', symlinks in '@'.",
    ListFilesArgs,
    (ws, config, args) => listWorkspaceFiles(ws, config, args),
  ),
  run_script: defineTool(
    "Run a program (argv array, no shell) in the workspace and return its exit status and output.",
    RunScriptArgs,
    async (ws, config, args, signal) =>
      formatOutcome(await runScript(ws, config, args, signal), Math.min(args.timeoutMs ?? config.scriptTimeoutMs, config.scriptTimeoutMs)),
  ),
};

/** Creates the tools of a Handler; the workspace root must exist. */
export async function createToolset(config: ToolsConfig): Promise<Toolset> {
  const ws = await openWorkspace(config.workspaceRoot);
  const enabled = new Set(config.enabled);
  const definitions: ToolDefinition[] = [...enabled].map((name) => ({
    type: "function",
    function: { name, description: TOOLS[name].description, parameters: TOOLS[name].parameters },
  }));
  return {
    definitions,
    async run(call, signal) {
      const name = call.function.name;
      if (!isToolName(name) || !enabled.has(name)) {
        return { malformed: true, content: `error: no tool named '${name}'; available: ${[...enabled].join(", ") || "none"}` };
      }
      let raw: unknown;
      try {
        raw = call.function.arguments.trim() === "" ? {} : JSON.parse(call.function.arguments);
      } catch (err) {
        return { malformed: true, content: `error: the arguments of '${name}' are not valid JSON (${err instanceof Error ? err.message : String(err)}); send a JSON object` };
      }
      const prepared = TOOLS[name].prepare(raw);
      if (!prepared.ok) return { malformed: true, content: `error: invalid arguments for '${name}': ${prepared.problems}` };
      try {
        return { malformed: false, content: await prepared.run(ws, config, signal) };
      } catch (err) {
        if (signal.aborted) throw err;
        const message = err instanceof ToolError ? err.message : `${name} failed: ${err instanceof Error ? err.message : String(err)}`;
        return { malformed: false, content: `error: ${message}` };
      }
    },
    async script(args, signal) {
      if (!enabled.has("run_script")) return { error: "the run_script tool is not enabled in this Handler (DIRIGENT_TOOLS)" };
      try {
        return { outcome: await runScript(ws, config, args, signal) };
      } catch (err) {
        if (signal.aborted) throw err;
        return { error: err instanceof ToolError ? err.message : `run_script failed: ${err instanceof Error ? err.message : String(err)}` };
      }
    },
  };
}

function isToolName(name: string): name is ToolName {
  return (TOOL_NAMES as readonly string[]).includes(name);
}
