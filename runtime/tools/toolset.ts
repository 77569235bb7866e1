/**
 * The Handler's direct tools, offered to the model through the chat-completions tool-calling API: the built-in
 * tools (a source of their own) composed with any other sources (MCP servers, TypeScript tools; runtime/tools/source.ts).
 * Each built-in tool's arguments are declared once as a zod schema, which gives both the JSON Schema sent to the
 * model and the check of what the model sends back. A malformed call (unknown tool, arguments that are not JSON or
 * do not match) and a failing tool both answer the model with error text; only malformed calls are counted against
 * the session's budget.
 */
import { z } from "zod";
import { listWorkspaceFiles, readWorkspaceFile, type FileToolLimits } from "./files.js";
import { editWorkspaceFile, writeWorkspaceFile } from "./write-files.js";
import { formatOutcome, runScript, type ScriptLimits } from "./run-script.js";
import type { ToolAnswer, ToolDefinition, Toolset } from "../../actors/handler/toolset.js";

export type { ToolAnswer, ToolDefinition, Toolset };
import { openWorkspace, ToolError, type Workspace } from "./workspace.js";
import { commandRefusal } from "../../actors/commands.js";
import { createSandbox, unavailableMessage, type Sandbox, type SandboxSettings } from "./sandbox.js";
import { createMasker, type Masker } from "../../actors/secrets.js";
import type { Logger } from "../../actors/deps.js";
import { messageOf } from "../../protocol/errors.js";
import { composeTools, type ToolSource, type ToolSpec } from "./source.js";

/** Names of the direct tools. */
export const TOOL_NAMES = ["read_file", "list_files", "run_script", "write_file", "edit_file"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

const isToolName = (name: string): name is ToolName => TOOL_NAMES.some((n) => n === name);

/**
 * What `DIRIGENT_TOOLS` (names and globs) means for a Handler: the built-in tools it names (only those exist, so
 * `run_script` stays opt-in, by its name), and the default selection of a session whose task names no tools. A list
 * of built-in names only (the form of before, and the default) selects every tool of the other sources too.
 */
export function toolSelection(list: readonly string[]): { enabled: ToolName[]; defaultTools?: string[] } {
  const enabled = list.filter(isToolName);
  return enabled.length === list.length ? { enabled } : { enabled, defaultTools: [...list] };
}

/** Configuration of the tools of a Handler. */
export interface ToolsConfig extends FileToolLimits, ScriptLimits {
  /** The directory the tools are confined to. */
  workspaceRoot: string;
  /** Tools offered to the model. */
  enabled: readonly ToolName[];
  /** Programs that commands of submitted templates may run (actors/commands.ts); none by default. */
  commands?: readonly string[];
  /** The sandbox programs run in; `bwrap` with no network by default. */
  sandbox?: SandboxSettings;
  /** Secret values masked in every tool answer and program output. */
  secrets?: readonly string[];
  /** Default per-call timeout of the tools of other sources (runtime/tools/source.ts); 60 s by default. */
  toolTimeoutMs?: number;
  /** Default result cap of the tools of other sources, in bytes; 64 KiB by default. */
  toolResultMaxBytes?: number;
  /** Largest description of a tool of another source, in bytes; a longer one leaves it out (4 KiB by default). */
  toolDescriptionMaxBytes?: number;
  /** Largest argument schema of a tool of another source, in bytes of JSON; a larger one leaves it out (16 KiB by default). */
  toolSchemaMaxBytes?: number;
}

/** The default sandbox: bubblewrap, no network, nothing extra bound or hidden. */
export const DEFAULT_SANDBOX: SandboxSettings = { mode: "bwrap", network: false, readOnly: [], hidden: [] };

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

const WriteFileArgs = z.strictObject({
  path: z.string().min(1).describe("File path relative to the workspace root; missing directories are created."),
  content: z.string().describe("The whole new content of the file (UTF-8)."),
});
const EditFileArgs = z.strictObject({
  path: z.string().min(1).describe("File path relative to the workspace root."),
  old: z.string().min(1).describe("The exact text to replace; it must occur exactly once in the file."),
  new: z.string().describe("The text to put in its place."),
});

/** What a tool runs with. */
interface ToolContext {
  ws: Workspace;
  config: ToolsConfig;
  sandbox: Sandbox;
}

type Run = (ctx: ToolContext, signal: AbortSignal) => Promise<string>;

/** A built-in tool: its description, the JSON Schema of its arguments, and a check that yields a runnable call. */
interface Tool {
  description: string;
  parameters: Record<string, unknown>;
  /** Reads only: a repeat does no harm. */
  idempotent: boolean;
  prepare(raw: unknown): { ok: true; run: Run } | { ok: false; problems: string };
}

function builtinTool<S extends z.ZodType>(
  description: string,
  args: S,
  idempotent: boolean,
  run: (ctx: ToolContext, args: z.infer<S>, signal: AbortSignal) => Promise<string>,
): Tool {
  const { $schema: _ignored, ...parameters } = z.toJSONSchema(args);
  return {
    description,
    parameters,
    idempotent,
    prepare(raw) {
      const parsed = args.safeParse(raw);
      if (parsed.success) return { ok: true, run: (ctx, signal) => run(ctx, parsed.data, signal) };
      return { ok: false, problems: parsed.error.issues.map((i) => `${i.path.join(".") || "(arguments)"}: ${i.message}`).join("; ") };
    },
  };
}

const TOOLS: Record<ToolName, Tool> = {
  read_file: builtinTool(
    "Read a text file of the workspace. Long files are cut; read on with `offset`.",
    ReadFileArgs,
    true,
    ({ ws, config }, args) => readWorkspaceFile(ws, config, args),
  ),
  list_files: builtinTool(
    "List a directory of the workspace. Directories end in '/', symlinks in '@'.",
    ListFilesArgs,
    true,
    ({ ws, config }, args) => listWorkspaceFiles(ws, config, args),
  ),
  run_script: builtinTool(
    "Run a program (argv array, no shell) in the workspace and return its exit status and output.",
    RunScriptArgs,
    false,
    async ({ ws, config, sandbox }, args, signal) =>
      formatOutcome(
        await runScript(ws, config, args, signal, sandbox),
        Math.min(args.timeoutMs ?? config.scriptTimeoutMs, config.scriptTimeoutMs),
      ),
  ),
  // Writing the same content again leaves the same file: a repeat does no harm.
  write_file: builtinTool("Create or replace a file of the workspace with the given content.", WriteFileArgs, true, ({ ws }, args) =>
    writeWorkspaceFile(ws, args),
  ),
  // A repeat of an edit that was done finds `old` gone (or edits a second occurrence): not idempotent.
  edit_file: builtinTool(
    "Replace exactly one occurrence of `old` by `new` in a text file of the workspace (an error if it occurs zero or several times).",
    EditFileArgs,
    false,
    ({ ws }, args) => editWorkspaceFile(ws, args),
  ),
};

/** What `dirigent tools list` shows of a built-in tool. */
export function builtinToolInfo(name: ToolName): { description: string; parameters: Record<string, unknown>; idempotent: boolean } {
  const { description, parameters, idempotent } = TOOLS[name];
  return { description, parameters, idempotent };
}

/** A sandbox of a Handler that runs no program at all. */
const NO_PROGRAMS: Sandbox = {
  mode: "bwrap",
  unavailable: "this Handler runs no programs (neither the run_script tool nor DIRIGENT_COMMANDS is set)",
  wrap: () => {
    throw new Error("this Handler runs no programs");
  },
};

/**
 * Creates the tools of a Handler; the workspace root must exist. When programs may run here (`run_script` is
 * enabled or `commands` lists programs), the sandbox is checked now: `log` gets an error when it is missing (every
 * program is then refused), a warning when the operator chose to run programs unsandboxed.
 */
export async function createToolset(config: ToolsConfig, log?: Logger, more: { sources?: readonly ToolSource[] } = {}): Promise<Toolset> {
  // The servers already started must not outlive a Handler that does not start.
  const closeSources = () => Promise.allSettled((more.sources ?? []).map((s) => s.close()));
  const ws = await openWorkspace(config.workspaceRoot).catch(async (err: unknown) => {
    await closeSources();
    throw err;
  });
  const enabled = new Set(config.enabled);
  const commands = config.commands ?? [];
  const mask: Masker = createMasker([...(config.secrets ?? []), ...(more.sources ?? []).flatMap((s) => s.secrets ?? [])]);
  const runsPrograms = enabled.has("run_script") || commands.length > 0;
  const sandbox = runsPrograms ? await createSandbox(config.sandbox ?? DEFAULT_SANDBOX) : NO_PROGRAMS;
  if (runsPrograms && sandbox.mode === "unsandboxed") {
    log?.warn(
      { sandbox: "unsandboxed" },
      "DIRIGENT_SANDBOX=unsandboxed: programs (run_script, template commands) run WITHOUT isolation, as this process's user, and can read its files and /proc",
    );
  } else if (runsPrograms && sandbox.unavailable !== undefined) {
    log?.error({ sandbox: "bwrap" }, `${unavailableMessage(sandbox.unavailable)}; every program will be refused`);
  }
  const ctx: ToolContext = { ws, config, sandbox };
  const builtins: ToolSource = {
    kind: "builtin",
    name: "the built-in tools",
    tools: [...enabled].map((name) => builtinSpec(name, ctx)),
    close: async () => {},
  };
  let composed: ReturnType<typeof composeTools>;
  try {
    composed = composeTools([builtins, ...(more.sources ?? [])], {
      mask,
      onProblem: (message) => log?.error({}, message),
      ...(config.toolTimeoutMs === undefined ? {} : { timeoutMs: config.toolTimeoutMs }),
      ...(config.toolResultMaxBytes === undefined ? {} : { maxResultBytes: config.toolResultMaxBytes }),
      ...(config.toolDescriptionMaxBytes === undefined ? {} : { maxDescriptionBytes: config.toolDescriptionMaxBytes }),
      ...(config.toolSchemaMaxBytes === undefined ? {} : { maxSchemaBytes: config.toolSchemaMaxBytes }),
    });
  } catch (err) {
    await closeSources();
    throw err;
  }
  return {
    get definitions() {
      return composed.definitions;
    },
    run: (call, signal) => composed.run(call, signal),
    info: (name) => composed.info(name),
    close: () => composed.close(),
    async script(args, signal) {
      const program = args.argv[0] ?? "";
      const refused = commandRefusal(program, commands);
      if (refused !== undefined) return { error: refused };
      if (args.env && Object.hasOwn(args.env, "PATH"))
        return { error: "a template command may not set PATH (the command allowlist names programs found on the Handler's PATH)" };
      try {
        const outcome = await runScript(ws, config, args, signal, sandbox);
        return { outcome: { ...outcome, stdout: mask(outcome.stdout), stderr: mask(outcome.stderr) } };
      } catch (err) {
        if (signal.aborted) throw err;
        return { error: mask(err instanceof ToolError ? err.message : `the command failed: ${messageOf(err)}`) };
      }
    },
    sandbox: { mode: sandbox.mode, unavailable: sandbox.unavailable },
  };
}

/**
 * A built-in tool as a source's tool. Its results are capped by its own limits (`readMaxBytes`, …), not the
 * general cap; `run_script` has its own timeout (the general one would end it first), the file tools the default.
 */
function builtinSpec(name: ToolName, ctx: ToolContext): ToolSpec {
  const tool = TOOLS[name];
  return {
    name,
    source: "builtin",
    description: tool.description,
    parameters: tool.parameters,
    idempotent: tool.idempotent,
    maxResultBytes: Number.POSITIVE_INFINITY,
    ...(name === "run_script" ? { timeoutMs: ctx.config.scriptTimeoutMs + ctx.config.scriptKillGraceMs + 5_000 } : {}),
    prepare(raw) {
      const prepared = tool.prepare(raw);
      return prepared.ok ? { ok: true, run: (signal) => prepared.run(ctx, signal) } : prepared;
    },
  };
}
