/**
 * Commands of `script` tasks and of the `<script_execution>` of director–evaluator loops (argv, no shell): the command
 * text is split into argv ({@link splitCommand}), `{{var}}` is substituted in each element afterwards (strict), and
 * a Handler runs the argv in its sandbox when its command allowlist (`DIRIGENT_COMMANDS`) has the program. The result's content is stdout; `notes.scriptOutput` holds
 * `{stdout, stderr, exitCode}`.
 */
import { extend, find, isPath, type Env } from "../../machines/language/env.js";
import { splitCommand } from "../../machines/language/script-argv.js";
import { taskFailure, type TaskResult } from "../../protocol/index.js";
import { commandRefusal, REFUSED_ENV } from "../commands.js";
import { inputFailure } from "./nodes.js";
import { substitute } from "../../machines/language/substitute.js";
import type { ScriptEnvironment, ScriptExecution, TaskNode, TemplateDocument } from "../../machines/language/ast.js";

/** Default timeout of a command, in seconds: long enough for a build or test run, short enough that a hung command ends. */
export const DEFAULT_SCRIPT_TIMEOUT_S = 300;

/** What running one argv gave: the Handler's `handler.script_result`, without its routing fields. */
export interface CommandOutcome {
  exitCode: number | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  /** Why the command could not run at all. */
  error?: string | undefined;
}

/** Runs one argv in a Handler. */
export type RunCommand = (
  nodePath: string,
  command: { argv: string[]; timeoutMs: number; env?: Record<string, string>; inheritEnv?: boolean },
  signal: AbortSignal,
) => Promise<CommandOutcome>;

/** A script's `<environment>`: its variables substituted (strict), and whether the Handler's allowlist is inherited. */
export function scriptEnv(
  spec: ScriptEnvironment | undefined,
  env: Env,
): { ok: true; value: { env?: Record<string, string>; inheritEnv?: boolean } } | { ok: false; result: TaskResult } {
  if (!spec) return { ok: true, value: {} };
  const inherit = spec.inherit?.trim().toLowerCase();
  if (inherit !== undefined && inherit !== "none" && inherit !== "allowlist" && inherit !== "true" && inherit !== "false") {
    return {
      ok: false,
      result: inputFailure(
        `<environment inherit="${spec.inherit ?? ""}">: use "none" (only the listed variables) or "allowlist" (the Handler's allowlisted variables too; the default)`,
      ),
    };
  }
  const vars: Record<string, string> = Object.create(null) as Record<string, string>;
  const missing = new Set<string>();
  for (const v of spec.variables) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.name))
      return { ok: false, result: inputFailure(`<environment>: '${v.name}' is not a variable name`) };
    if (REFUSED_ENV.test(v.name) || v.name === "PATH")
      return { ok: false, result: inputFailure(`<environment>: '${v.name}' may not be set by a template`) };
    const done = substitute(v.value, (p) => find(env, p), "strict");
    if (done.ok) vars[v.name] = done.text;
    else for (const m of done.missing) missing.add(m);
  }
  if (missing.size > 0)
    return {
      ok: false,
      result: inputFailure(`missing required input: ${[...missing].map((m) => `'${m}'`).join(", ")}`, { missing: [...missing] }),
    };
  return { ok: true, value: { env: vars, ...(inherit === "none" || inherit === "false" ? { inheritEnv: false } : {}) } };
}

/** Evaluates a node (the `<call>` of a `<script_execution>`) in an environment. */
export type EvaluateAt = (path: string, env: Env) => Promise<TaskResult>;

const halted = (
  reason: "execution_halted" | "execution_timeout" | "unexpected_error" | "not_supported",
  message: string,
  details?: Record<string, unknown>,
): TaskResult => taskFailure(reason, message, details);

/** Splits `text` into argv and substitutes `{{var}}` from `env` in each element. */
export function commandArgv(text: string, env: Env): { ok: true; argv: string[] } | { ok: false; result: TaskResult } {
  const split = splitCommand(text.trim());
  if (!split.ok) return { ok: false, result: inputFailure(split.error) };
  const argv: string[] = [];
  const missing = new Set<string>();
  for (const word of split.argv) {
    const done = substitute(word, (p) => find(env, p), "strict");
    if (done.ok) argv.push(done.text);
    else for (const m of done.missing) missing.add(m);
  }
  if (missing.size > 0)
    return {
      ok: false,
      result: inputFailure(`missing required input: ${[...missing].map((m) => `'${m}'`).join(", ")}`, { missing: [...missing] }),
    };
  return { ok: true, argv };
}

/** Runs `text` as a command; with `failOnNonzero`, a non-zero exit fails the task (the output in the details). */
export async function runCommand(
  run: RunCommand,
  path: string,
  text: string,
  timeoutS: number,
  env: Env,
  failOnNonzero: boolean,
  signal: AbortSignal,
  environment: { env?: Record<string, string>; inheritEnv?: boolean } = {},
): Promise<TaskResult> {
  const prepared = commandArgv(text, env);
  if (!prepared.ok) return prepared.result;
  const timeoutMs = Math.round(timeoutS * 1000);
  const outcome = await run(path, { argv: prepared.argv, timeoutMs, ...environment }, signal);
  const scriptOutput = { stdout: outcome.stdout, stderr: outcome.stderr, exitCode: outcome.exitCode };
  const details = { argv: prepared.argv, ...scriptOutput };
  if (outcome.error !== undefined) return halted("unexpected_error", `script could not run: ${outcome.error}`, details);
  if (outcome.timedOut) return halted("execution_timeout", `script timed out after ${timeoutS} s`, details);
  if (outcome.exitCode === null) return halted("execution_halted", "script was ended by a signal", details);
  if (outcome.exitCode !== 0 && failOnNonzero) return halted("execution_halted", `script exited with code ${outcome.exitCode}`, details);
  return { content: outcome.stdout, status: "COMPLETE", notes: { scriptOutput } };
}

/** Runs a `script` task (its inputs already bound into `env`). */
export async function runScriptTask(run: RunCommand, node: TaskNode, path: string, env: Env, signal: AbortSignal): Promise<TaskResult> {
  const spec = node.execution;
  if (!spec?.command?.trim()) return inputFailure("a script task needs a <command>");
  const environment = scriptEnv(spec.environment, env);
  if (!environment.ok) return environment.result;
  const failOnNonzero = node.attributes["fail_on_nonzero"]?.trim().toLowerCase() !== "false";
  return runCommand(run, path, spec.command, spec.timeout ?? DEFAULT_SCRIPT_TIMEOUT_S, env, failOnNonzero, signal, environment.value);
}

/**
 * Runs the `<script_execution>` of a loop: its `<inputs>` (variables or literals) bound, then its `<command>`, or a
 * `<call task="system:run_script">` whose first argument is the command text, or a call of another template. A
 * non-zero exit is data for the evaluator, not a failure.
 */
export async function runScriptExecution(
  run: RunCommand,
  evaluate: EvaluateAt,
  se: ScriptExecution,
  path: string,
  env: Env,
  signal: AbortSignal,
): Promise<TaskResult> {
  // No prototype: an input may be named `__proto__` (template names are the submitter's).
  const bindings: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const input of se.inputs) {
    if (input.from !== undefined) {
      const found = find(env, input.from);
      if (!found.found)
        return inputFailure(`missing required input: '${input.from}' (bound to '${input.name}')`, { missing: [input.from] });
      bindings[input.name] = found.value;
    } else if (input.value !== undefined && input.value !== "") bindings[input.name] = input.value;
  }
  const scoped = extend(env, bindings);
  const timeout = se.timeout ?? DEFAULT_SCRIPT_TIMEOUT_S;
  if (se.command?.trim()) return runCommand(run, path, se.command, timeout, scoped, false, signal);
  if (!se.call) return inputFailure("a <script_execution> needs a <command> or a <call>");
  if (se.call.templateName !== "system:run_script") return evaluate(`${path}.call`, scoped);
  const arg = se.call.args[0]?.value;
  if (typeof arg !== "string" || arg.trim() === "")
    return inputFailure('<call task="system:run_script"> needs the command as its first argument');
  // A bare variable name stands for its value as one argument, like `{{name}}`.
  const text = isPath(arg.trim()) && find(scoped, arg.trim()).found ? `{{${arg.trim()}}}` : arg;
  return runCommand(run, path, text, timeout, scoped, false, signal);
}

/*
 * The Evaluator's check of a submitted template's commands against the command allowlist (`DIRIGENT_COMMANDS`,
 * actors/commands.ts) before anything of the task runs: every `script` task's `<command>`, every loop's
 * `<script_execution>` command (or its `<call task="system:run_script">` argument) and every
 * `<file_paths source="command">`. A program known only at run time (`{{var}}` in `argv[0]`, a bare variable as the
 * argument of `system:run_script`) and a `request_evaluation` target are checked by the Handler when they run.
 */
/** The command texts of the entry task of a document and of its function templates (what can run), each with where it is. */
export function templateCommands(document: TemplateDocument): { where: string; text: string }[] {
  const found: { where: string; text: string }[] = [];
  const seen = new WeakSet<object>();
  const visit = (value: unknown): void => {
    if (value === null || typeof value !== "object" || seen.has(value)) return;
    seen.add(value);
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
      return;
    }
    const node = value as Record<string, unknown>;
    const execution = node["execution"] as { command?: unknown } | undefined;
    if (node["type"] === "script" && typeof execution?.command === "string")
      found.push({ where: "script task <command>", text: execution.command });
    const se = node["scriptExecution"] as
      | { command?: unknown; call?: { templateName?: unknown; args?: { value?: unknown }[] } }
      | undefined;
    if (typeof se?.command === "string" && se.command.trim() !== "")
      found.push({ where: "<script_execution> <command>", text: se.command });
    const arg = se?.call?.templateName === "system:run_script" ? se.call.args?.[0]?.value : undefined;
    if (typeof arg === "string" && !isPath(arg.trim())) found.push({ where: '<call task="system:run_script">', text: arg });
    const fp = node["filePaths"] as { source?: unknown; command?: unknown } | undefined;
    if (fp?.source === "command" && typeof fp.command === "string")
      found.push({ where: '<file_paths source="command">', text: fp.command });
    for (const child of Object.values(node)) visit(child);
  };
  visit([document.entry, document.templates]);
  return found;
}

/**
 * Why a document may not run under the allowlist `allow` ({@link templateCommandRefusal}), answered once per shared
 * document: one from the parse cache is frozen and comes again with every task of its template
 * (machines/language/parse-cache.ts), so its tree is walked once, not once per task. A role makes its own.
 */
export function commandCheck(allow: readonly string[]): (document: TemplateDocument) => string | undefined {
  const checked = new WeakMap<TemplateDocument, string | undefined>();
  return (document) => {
    if (checked.has(document)) return checked.get(document);
    const refused = templateCommandRefusal(document, allow);
    // A document a walk may still change (not frozen) is checked again next time.
    if (Object.isFrozen(document)) checked.set(document, refused);
    return refused;
  };
}

/** Why the document may not run under the allowlist `allow` (the first refused program, and where); undefined when it may. */
export function templateCommandRefusal(document: TemplateDocument, allow: readonly string[]): string | undefined {
  for (const { where, text } of templateCommands(document)) {
    const split = splitCommand(text.trim());
    const program = split.ok ? split.argv[0] : undefined;
    // A program named by a variable is only known at run time; the Handler checks it then.
    if (program === undefined || program.includes("{{")) continue;
    const refused = commandRefusal(program, allow);
    if (refused !== undefined) return `${where}: ${refused}`;
  }
  return undefined;
}
