/**
 * The context of an atomic task (docs/task-language.md#context): which files and which text a Handler attaches to the
 * session. The settings in effect come from {@link effectiveContext}; the context a parent hands down, a subtask
 * request's override and a sequential task's accumulated outputs are read from reserved environment names.
 *
 * - `inherit_context`: `full` takes the parent's files and text, `none` nothing, `subset` the parent's files that
 *   Memory matches against the prompt (or, when `<file_paths>` is given, those files instead).
 * - `fresh_context=enabled`: Memory is asked with the substituted prompt and the prior outputs.
 * - `accumulate_data`: outputs of earlier steps of the enclosing sequential task become context text.
 * - `<file_paths>`: listed files are always included; `literal`, `command`, `description` or `context_description`.
 *
 * File contents are never read here: the Handler reads them with its workspace-confined `read_file` tool.
 */
import { isAbsolute, normalize } from "node:path";
import {
  ACCUMULATED_BINDING,
  CONTEXT_BINDING,
  CONTEXT_OVERRIDE_BINDING,
  effectiveContext,
  type ContextSettings,
  type InheritedContext,
  type PartialContextSettings,
} from "../../machines/evaluator/context-defaults.js";
import { find, type Env } from "../../machines/language/env.js";
import { taskFailure, type TaskResult } from "../../protocol/index.js";
import { commandArgv, type RunCommand } from "./script.js";
import { inputFailure } from "./nodes.js";
import { substitute } from "../../machines/language/substitute.js";
import type { FilePaths, ReturnSpec, TaskNode, TemplateDocument } from "../../machines/language/ast.js";
import { messageOf } from "../../protocol/errors.js";

export { applyOutputFormat } from "./output-format.js";

/** What a Memory match is asked with: the query text and what Memory may know about the task asking. */
export interface MatchQuery {
  /** The query: the substituted prompt, or a `<file_paths>` description or context query. */
  text: string;
  /** Task type of the node asking (`atomic`). */
  templateType: string;
  /** Its subtype, when it has one. */
  templateSubtype?: string;
  /** Its declared inputs with the values bound in its environment (a string cut to 1000 characters, a larger value left out). */
  inputs: Record<string, unknown>;
  /** The parent's context: its text and the files it hands down (at most 4000 characters). */
  inheritedContext?: string;
  /** Outputs of earlier steps of the enclosing sequential task. */
  previousOutputs?: string[];
  /** Most matches wanted. */
  limit?: number;
}

/** What working out a task's context needs from the Evaluator. */
export interface ContextDeps {
  /** Associative matching by the Memory role (`memory.match`). */
  memoryMatch(query: MatchQuery, signal: AbortSignal): Promise<{ path: string; relevance?: string; score?: number }[]>;
  /** Runs an argv in a Handler (in its sandbox, if its command allowlist allows the program), for `<file_paths source="command">`. */
  runCommand?(argv: string[], signal: AbortSignal): Promise<{ stdout: string; exitCode: number | null }>;
}

/** The context of one atomic task. */
export interface AtomicContext {
  /** Files the Handler reads and attaches (workspace-relative or absolute paths), without duplicates. */
  files: string[];
  /** Context text: inherited text and accumulated step outputs. */
  context?: string;
  /** Notes for the result: the settings in effect, where the context came from, problems met. */
  notes: Record<string, unknown>;
}

/** Longest a `<file_paths source="command">` command may run. */
export const FILE_COMMAND_TIMEOUT_MS = 5_000;
/** Files one Memory match contributes at most. */
export const MATCH_LIMIT = 10;
/** Output of a file-paths command beyond this many characters is ignored. */
const MAX_COMMAND_OUTPUT = 1024 * 1024;

/** Why `path` cannot name a context file (empty, control characters, or `..` above the workspace), or undefined. */
export function badPath(path: string): string | undefined {
  if (path.trim() === "") return "empty path";
  if (/[\u0000-\u001f]/.test(path)) return `path '${path.replace(/[\u0000-\u001f]/g, "?")}' contains control characters`;
  if (!isAbsolute(path) && (normalize(path) === ".." || normalize(path).startsWith("../"))) return `path '${path}' leaves the workspace`;
  return undefined;
}

/** The lines of a command's output that are usable paths, trimmed, in order. */
export function pathLines(stdout: string): string[] {
  return stdout
    .slice(0, MAX_COMMAND_OUTPUT)
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && badPath(line) === undefined);
}

function inherited(env: Env): InheritedContext | undefined {
  const found = find(env, CONTEXT_BINDING);
  if (!found.found || typeof found.value !== "object" || found.value === null) return undefined;
  const files = Reflect.get(found.value, "files");
  const text = Reflect.get(found.value, "text");
  return {
    files: Array.isArray(files) ? files.filter((f): f is string => typeof f === "string") : [],
    ...(typeof text === "string" && text !== "" ? { text } : {}),
  };
}

function override(env: Env): PartialContextSettings | undefined {
  const found = find(env, CONTEXT_OVERRIDE_BINDING);
  return found.found && typeof found.value === "object" && found.value !== null ? (found.value as PartialContextSettings) : undefined;
}

function accumulated(env: Env): string[] {
  const found = find(env, ACCUMULATED_BINDING);
  return found.found && Array.isArray(found.value) ? found.value.filter((v): v is string => typeof v === "string") : [];
}

/** The context settings in effect for `node` in `env` (a subtask's override, the template, the defaults). */
export function contextSettings(node: TaskNode, env: Env): ContextSettings {
  return effectiveContext(node.type, subtypeOf(node), node.contextManagement, override(env));
}

/** The node's subtype; a director or evaluator step of a loop is one by its place. */
function subtypeOf(node: TaskNode): string | undefined {
  return node.subtype ?? (node.origin === "director" || node.origin === "evaluator" ? node.origin : undefined);
}

type Substituted = { ok: true; text: string } | { ok: false; result: TaskResult };

function substituted(text: string, env: Env): Substituted {
  const done = substitute(text, (p) => find(env, p), "strict");
  if (done.ok) return { ok: true, text: done.text };
  return {
    ok: false,
    result: inputFailure(`missing required input: ${done.missing.map((m) => `'${m}'`).join(", ")}`, { missing: done.missing }),
  };
}

class ContextFailure extends Error {
  override name = "ContextFailure";
}

/** Characters of one input value a Memory match is sent at most. */
const MATCH_INPUT_CHARS = 1000;
/** Characters of inherited context a Memory match is sent at most. */
const MATCH_CONTEXT_CHARS = 4000;
/** Input names the `memory.match` schema accepts. */
const INPUT_NAME = /^[A-Za-z_][\w.-]*$/;

/** What Memory is told about the node asking, besides the query text. */
type Asker = Omit<MatchQuery, "text" | "previousOutputs" | "limit">;

function askerOf(node: TaskNode, env: Env, parent: InheritedContext | undefined): Asker {
  const inputs: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const input of node.inputs) {
    const bound = find(env, input.name);
    if (!bound.found || bound.value === undefined || !INPUT_NAME.test(input.name)) continue;
    // Inputs are hints to Memory: a long text is cut, a large structure left out, so the request stays small.
    if (typeof bound.value === "string") inputs[input.name] = bound.value.slice(0, MATCH_INPUT_CHARS);
    else if ((JSON.stringify(bound.value)?.length ?? Infinity) <= MATCH_INPUT_CHARS) inputs[input.name] = bound.value;
  }
  const subtype = subtypeOf(node);
  const inheritedText = [
    parent?.text,
    parent && parent.files.length > 0 ? `Inherited files: ${parent.files.join(", ")}` : undefined,
  ].filter((t) => t !== undefined);
  return {
    templateType: node.type,
    ...(subtype === undefined ? {} : { templateSubtype: subtype }),
    inputs,
    ...(inheritedText.length > 0 ? { inheritedContext: inheritedText.join("\n\n").slice(0, MATCH_CONTEXT_CHARS) } : {}),
  };
}

async function match(deps: ContextDeps, query: Omit<MatchQuery, "limit">, signal: AbortSignal): Promise<string[]> {
  try {
    const matches = await deps.memoryMatch({ ...query, limit: MATCH_LIMIT }, signal);
    return matches.slice(0, MATCH_LIMIT).map((m) => m.path);
  } catch (err) {
    if (signal.aborted) throw err;
    throw new ContextFailure(`memory match failed: ${messageOf(err)}`, { cause: err });
  }
}

/** The files of a `<file_paths>` block; problems are collected in `errors` (they never fail the task). */
async function explicitFiles(
  deps: ContextDeps,
  fp: FilePaths,
  env: Env,
  prompt: string,
  asker: Asker,
  errors: string[],
  signal: AbortSignal,
): Promise<{ ok: true; files: string[] } | { ok: false; result: TaskResult }> {
  const noFiles = (why: string) => {
    errors.push(why);
    return { ok: true as const, files: [] };
  };
  switch (fp.source) {
    case "literal": {
      const files: string[] = [];
      for (const raw of fp.paths) {
        const path = substituted(raw, env);
        if (!path.ok) return path;
        const bad = badPath(path.text);
        if (bad) errors.push(bad);
        else files.push(path.text);
      }
      return { ok: true, files };
    }
    case "command": {
      if (!fp.command?.trim()) return noFiles("file_paths source 'command' has no <command>");
      const prepared = commandArgv(fp.command, env);
      if (!prepared.ok) return prepared;
      if (!deps.runCommand) return noFiles("file_paths commands cannot run here (no route to a Handler)");
      const timeout = AbortSignal.timeout(FILE_COMMAND_TIMEOUT_MS);
      try {
        const outcome = await deps.runCommand(prepared.argv, AbortSignal.any([signal, timeout]));
        if (outcome.exitCode !== 0) return noFiles(`file_paths command exited with ${outcome.exitCode ?? "no code"}`);
        return { ok: true, files: pathLines(outcome.stdout) };
      } catch (err) {
        if (signal.aborted) throw err;
        errors.push(
          timeout.aborted
            ? `file_paths command timed out after ${FILE_COMMAND_TIMEOUT_MS} ms`
            : `file_paths command failed: ${messageOf(err)}`,
        );
        return { ok: true, files: [] };
      }
    }
    case "description":
    case "context_description": {
      const query =
        fp.source === "description"
          ? fp.description?.trim()
            ? substituted(fp.description, env)
            : { ok: true as const, text: prompt }
          : substituted(fp.contextQuery ?? "", env);
      if (!query.ok) return query;
      if (query.text.trim() === "") return noFiles(`file_paths source '${fp.source}' has no query text`);
      return { ok: true, files: await match(deps, { ...asker, text: query.text }, signal) };
    }
  }
}

/** Keeps the parent's files that Memory also finds for `prompt` (paths compared as written, or as a suffix of an absolute match). */
function filterSubset(parent: readonly string[], matched: readonly string[]): string[] {
  const hit = (file: string) => matched.some((m) => m === file || m.endsWith(`/${normalize(file).replace(/^\.\//, "")}`));
  return parent.filter(hit);
}

/**
 * Works out the context of the atomic task `node`, whose substituted prompt is `prompt`, in `env`. Fails only when
 * a `{{var}}` of a file-paths query or command is missing (`input_validation_failure`) or Memory cannot be asked
 * (`context_retrieval_failure`); a bad path or a failing command is a note (`file_paths_error`).
 */
export async function atomicContext(
  deps: ContextDeps,
  node: TaskNode,
  env: Env,
  prompt: string,
  signal: AbortSignal,
): Promise<{ ok: true; value: AtomicContext } | { ok: false; result: TaskResult }> {
  const settings = contextSettings(node, env);
  const parent = inherited(env);
  const asker = askerOf(node, env, parent);
  const sources: string[] = [];
  const errors: string[] = [];
  const files: string[] = [];
  const text: string[] = [];
  try {
    let explicit: string[] | undefined;
    if (node.filePaths) {
      const got = await explicitFiles(deps, node.filePaths, env, prompt, asker, errors, signal);
      if (!got.ok) return got;
      explicit = got.files;
      sources.push(`file_paths:${node.filePaths.source}`);
    }
    if (settings.inheritContext === "full" && parent) {
      files.push(...parent.files);
      if (parent.text) text.push(parent.text);
      sources.push("inherited");
    } else if (settings.inheritContext === "subset" && parent && explicit === undefined && parent.files.length > 0) {
      files.push(...filterSubset(parent.files, await match(deps, { ...asker, text: prompt }, signal)));
      sources.push("inherited_subset");
    }
    files.push(...(explicit ?? []));
    const prior = accumulated(env);
    // The enclosing sequential task decides whether outputs accumulate; a step can still refuse them explicitly.
    const refuses = (override(env)?.accumulateData ?? node.contextManagement?.accumulateData) === false;
    const carried = prior.length > 0 && !refuses ? prior : [];
    if (carried.length > 0) {
      text.push(`Outputs of the earlier steps:\n\n${carried.join("\n\n")}`);
      sources.push("accumulated");
    }
    if (settings.freshContext === "enabled") {
      files.push(...(await match(deps, { ...asker, text: prompt, ...(carried.length > 0 ? { previousOutputs: carried } : {}) }, signal)));
      sources.push("fresh_context");
    }
  } catch (err) {
    if (!(err instanceof ContextFailure)) throw err;
    return { ok: false, result: taskFailure("context_retrieval_failure", err.message) };
  }
  const unique = [...new Set(files)];
  const notes: Record<string, unknown> = {
    context_management: settings,
    context_source: sources.length > 0 ? sources.join("+") : "none",
    context_files_count: unique.length,
    ...(errors.length > 0 ? { file_paths_error: errors } : {}),
  };
  return { ok: true, value: { files: unique, ...(text.length > 0 ? { context: text.join("\n\n") } : {}), notes } };
}

/** The context's notes merged into a result (the result's own notes win). */
export function withContextNotes(result: TaskResult, context: AtomicContext): TaskResult {
  // Merged into a new empty object: a literal that starts with a spread and gains keys gets a hidden class of its own
  // in Node 20's V8, made anew for each result.
  return { ...result, notes: Object.assign({}, context.notes, result.notes) };
}

/** The fields of an execute request that carry the context; empty ones are left out. */
export function contextFields(context: AtomicContext): { files?: string[]; context?: string } {
  return { ...(context.files.length > 0 ? { files: context.files } : {}), ...(context.context ? { context: context.context } : {}) };
}

/** {@link ContextDeps} for the walk of a document: Memory through `memoryMatch`, commands through the walk's script route. */
export function walkContextDeps(walk: { memoryMatch?: ContextDeps["memoryMatch"]; script: RunCommand }, nodePath: string): ContextDeps {
  return {
    memoryMatch: (query, signal) =>
      walk.memoryMatch ? walk.memoryMatch(query, signal) : Promise.reject(new Error("no Memory route in this Evaluator")),
    runCommand: async (argv, signal) => {
      const outcome = await walk.script(nodePath, { argv, timeoutMs: FILE_COMMAND_TIMEOUT_MS }, signal);
      if (outcome.error) throw new Error(outcome.error);
      return { stdout: outcome.stdout, exitCode: outcome.exitCode };
    },
  };
}

/**
 * The bindings a composite task (sequential, reduce, loop) gives its children. `$context`: with
 * `inherit_context=none` only its own literal `<file_paths>`, otherwise the parent's context plus those paths (no
 * binding when there is nothing to add). Accumulated outputs of an enclosing sequential task stop here. Matching
 * sources (`fresh_context`, `subset`, non-literal file paths) are left to the atomic tasks inside.
 */
export function compositeContextBindings(node: TaskNode, env: Env): Record<string, unknown> {
  if (node.type === "atomic" || node.type === "script") return {};
  const settings = contextSettings(node, env);
  // Outputs an enclosing sequential task accumulated belong to its own steps, not to the tasks inside this one.
  const reset = find(env, ACCUMULATED_BINDING).found ? { [ACCUMULATED_BINDING]: [] } : {};
  const own = node.filePaths?.source === "literal" ? node.filePaths.paths.filter((p) => !p.includes("{{") && badPath(p) === undefined) : [];
  if (settings.inheritContext === "none") return { ...reset, [CONTEXT_BINDING]: { files: own } satisfies InheritedContext };
  if (own.length === 0) return reset;
  const parent = inherited(env);
  const context: InheritedContext = {
    files: [...new Set([...(parent?.files ?? []), ...own])],
    ...(parent?.text ? { text: parent.text } : {}),
  };
  return { ...reset, [CONTEXT_BINDING]: context };
}

/** The declared `returns` of the function template whose body is the node at `path`, if any. */
export function returnsOf(document: TemplateDocument, path: string): ReturnSpec | undefined {
  const body = /^templates\.(\d+)\.body$/.exec(path);
  return body ? document.templates[Number(body[1])]?.returns : undefined;
}
