/**
 * An associative memory task (docs/task-language.md#associative-memory): `<task type="associative_memory">`, or an
 * atomic task of subtype `associative_matching`, runs no model session: it asks Memory which indexed files match its
 * query and answers `{context, matches}` (content as JSON, and `parsedContent`), so a later step can read the files.
 *
 * The query is `<query>` (substituted), else the task's prompt; the inputs Memory is told about are those
 * `<context_relevance>` includes (all of the task's inputs without it). `<constraints>` bounds the answer:
 * `<max_results>` (default 10) and `<relevance_threshold>` (a score in [0, 1]).
 */
import { find, type Env } from "../../../machines/language/env.js";
import { stringify, type SubstituteMode } from "../../../machines/language/substitute.js";
import { taskFailure, type TaskResult } from "../../../protocol/index.js";
import { messageOf } from "../../../protocol/errors.js";
import type { ElementNode, TaskNode } from "../../../machines/language/ast.js";
import type { MatchQuery } from "../context.js";
import { expandText, type InlineCall } from "../inline.js";
import { inputFailure } from "../nodes.js";

/** Matches an associative memory task answers with when `<max_results>` does not say. */
export const DEFAULT_MAX_RESULTS = 10;

/** Whether a task is an associative memory task. */
export function isMemoryTask(node: { type?: string | undefined; subtype?: string | undefined }): boolean {
  return node.type === "associative_memory" || (node.type === "atomic" && node.subtype === "associative_matching");
}

/** One file Memory matched. */
export interface MemoryMatch {
  path: string;
  relevance?: string;
  score?: number;
}

const child = (node: TaskNode, name: string): ElementNode | undefined => node.extra.find((e) => e.name === name);

/** `<constraints>`: `<max_results>` (1–100) and `<relevance_threshold>` (0–1); an error names a bad value. */
function constraints(node: TaskNode): { max: number; threshold?: number } | { error: string } {
  const c = child(node, "constraints");
  const text = (name: string) => c?.children.find((e) => e.name === name)?.text.trim();
  const maxText = text("max_results");
  const max = maxText === undefined ? DEFAULT_MAX_RESULTS : /^\d+$/.test(maxText) ? Number(maxText) : Number.NaN;
  if (!(max >= 1 && max <= 100)) return { error: `<max_results> '${maxText ?? ""}' is not an integer from 1 to 100` };
  const thresholdText = text("relevance_threshold");
  if (thresholdText === undefined) return { max };
  const threshold = Number(thresholdText);
  if (thresholdText === "" || !(threshold >= 0 && threshold <= 1))
    return { error: `<relevance_threshold> '${thresholdText}' is not a number from 0 to 1` };
  return { max, threshold };
}

/** The inputs Memory is told about: those `<context_relevance>` includes, else all, with their values (as text). */
function relevantInputs(node: TaskNode, env: Env): Record<string, unknown> {
  const relevance = child(node, "context_relevance");
  const included = relevance
    ? relevance.children
        .filter((e) => e.name === "input" && e.attributes["include"]?.trim() !== "false")
        .map((e) => e.attributes["name"] ?? "")
    : node.inputs.map((i) => i.name);
  const out: Record<string, unknown> = {};
  for (const name of included) {
    const found = find(env, name);
    if (found.found) out[name] = stringify(found.value).slice(0, 1000);
  }
  return out;
}

/** Runs an associative memory task: the query substituted in `env`, Memory asked through `match`. */
export async function runMemoryTask(
  node: TaskNode,
  env: Env,
  match: ((query: MatchQuery, signal: AbortSignal) => Promise<MemoryMatch[]>) | undefined,
  call: (c: InlineCall) => Promise<TaskResult>,
  mode: SubstituteMode,
  signal: AbortSignal,
): Promise<TaskResult> {
  const limits = constraints(node);
  if ("error" in limits) return inputFailure(`associative memory task: ${limits.error}`);
  const written = child(node, "query")?.text || [node.description, node.instructions].filter((t) => t?.trim()).join("\n\n");
  if (!written.trim()) return inputFailure("an associative memory task needs a <query> or a <description>: there is nothing to match");
  const expanded = await expandText(written, env, call, mode);
  if (!expanded.ok) {
    if ("result" in expanded) return expanded.result;
    return inputFailure(`missing required input: ${expanded.missing.map((m) => `'${m}'`).join(", ")}`, { missing: expanded.missing });
  }
  if (!match) return taskFailure("unexpected_error", "no Memory route in this Evaluator: an associative memory task cannot run");
  let found: MemoryMatch[];
  try {
    found = await match(
      {
        text: expanded.text,
        templateType: node.type,
        ...(node.subtype === undefined ? {} : { templateSubtype: node.subtype }),
        inputs: relevantInputs(node, env),
        limit: limits.max,
      },
      signal,
    );
  } catch (err) {
    return taskFailure("unexpected_error", `the Memory match failed: ${messageOf(err)}`);
  }
  const matches = found
    .filter((m) => limits.threshold === undefined || m.score === undefined || m.score >= limits.threshold)
    .slice(0, limits.max);
  const context =
    matches.length === 0
      ? `no indexed file matches "${expanded.text}"`
      : `${matches.length} file${matches.length === 1 ? "" : "s"} relevant to "${expanded.text}": ${matches.map((m) => m.path).join(", ")}`;
  const answer = { context, matches };
  return { content: JSON.stringify(answer), status: "COMPLETE", parsedContent: answer, notes: { matches: matches.length } };
}
