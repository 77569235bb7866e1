/**
 * Small readers shared by the element builders: text content, attributes, enum/boolean/number
 * values with located errors, and the fallback for elements the runtime does not model.
 */
import type { ElementNode, KnownTaskType, ScriptSpec, SourceLocation, StepNode, TaskNode, TemplateWarningKind } from "./ast.js";
import { InvalidTemplateError } from "./errors.js";
import type { SourceText } from "./locate.js";
import type { XmlElement } from "./xml.js";

/** What every builder needs: the source for locations and prose, a warning sink, and the step builder. */
export interface BuildContext {
  readonly source: SourceText;
  /** Record a non-fatal finding. */
  warn(kind: TemplateWarningKind, message: string, loc: SourceLocation): void;
  /** Build the node for an element standing where a task may stand. */
  step(el: XmlElement): StepNode;
}

/** A writable view of a readonly AST shape, for building it field by field. */
export type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** The element children of `el`, in order. */
export function childElements(el: XmlElement): XmlElement[] {
  return el.children.filter((child): child is XmlElement => child.type === "element");
}

/** Direct character data of `el` (child elements ignored), trimmed. */
export function directText(el: XmlElement): string {
  let text = "";
  for (const child of el.children) if (child.type === "text") text += child.text;
  return text.trim();
}

/** Prose content of `el`, trimmed; markup inside it (e.g. `<b>` in a prompt) is kept as written. */
export function prose(ctx: BuildContext, el: XmlElement): string {
  return el.children.some((child) => child.type === "element") ? ctx.source.innerText(el.start, el.end).trim() : directText(el);
}

/** Warn about non-blank character data directly inside a container element; returns it trimmed. */
export function strayText(ctx: BuildContext, el: XmlElement): string {
  const text = directText(el);
  if (text !== "") {
    const first = el.children.find((child) => child.type === "text" && child.text.trim() !== "");
    const loc = first?.type === "text" ? ctx.source.locate(ctx.source.firstContent(first.at)) : el.loc;
    ctx.warn("stray-text", `text '${clip(text)}' inside <${el.name}> is ignored`, loc);
  }
  return text;
}

/** Throw a located semantic error about `el`. */
export function fail(el: XmlElement, message: string): never {
  throw new InvalidTemplateError(message, el.loc, el.name);
}

/**
 * Read an enumerated element text (or `attribute` value); `aliases` map legacy spellings to canonical
 * ones with a `value-alias` warning.
 */
export function readEnum<T extends string>(
  ctx: BuildContext,
  el: XmlElement,
  raw: string,
  allowed: readonly T[],
  options: { readonly aliases?: Readonly<Record<string, T>>; readonly attribute?: string } = {},
): T {
  const { aliases = {}, attribute } = options;
  const what = attribute === undefined ? `<${el.name}> value` : `${attribute} attribute of <${el.name}>`;
  const value = raw.trim();
  const known = allowed.find((candidate) => candidate === value);
  if (known !== undefined) return known;
  const alias = Object.hasOwn(aliases, value) ? aliases[value] : undefined;
  if (alias !== undefined) {
    ctx.warn("value-alias", `${what} '${value}' is read as '${alias}'`, el.loc);
    return alias;
  }
  return fail(el, `invalid ${what} '${clip(value)}': expected ${oneOf(allowed)}`);
}

function oneOf(values: readonly string[]): string {
  const quoted = values.map((v) => `'${v}'`);
  return quoted.length < 2 ? quoted.join("") : `${quoted.slice(0, -1).join(", ")} or ${quoted.at(-1) ?? ""}`;
}

/** Read `true`/`false` (any case). */
export function readBoolean(el: XmlElement, raw: string): boolean {
  const value = raw.trim().toLowerCase();
  if (value === "true") return true;
  if (value === "false") return false;
  return fail(el, `invalid <${el.name}> value '${clip(raw.trim())}': expected 'true' or 'false'`);
}

/** Read a positive integer from the element's text. */
export function readPositiveInt(el: XmlElement): number {
  const raw = directText(el);
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1) {
    return fail(el, `invalid <${el.name}> value '${clip(raw)}': expected a positive integer`);
  }
  return value;
}

/** Read a positive number of seconds from the element's text. */
export function readSeconds(el: XmlElement): number {
  const raw = directText(el);
  const value = /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isFinite(value) || value <= 0) {
    return fail(el, `invalid <${el.name}> value '${clip(raw)}': expected a positive number of seconds`);
  }
  return value;
}

/** Split a comma-separated list, trimming items and dropping empty ones. */
export function splitList(raw: string): string[] {
  return raw
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

/** The element verbatim, as an {@link ElementNode}. */
export function rawElement(el: XmlElement): ElementNode {
  return {
    kind: "element",
    loc: el.loc,
    name: el.name,
    attributes: { ...el.attrs },
    text: directText(el),
    children: childElements(el).map(rawElement),
  };
}

/**
 * Keep an element the runtime does not model, with an `unsupported-element` warning; one that is not in the language
 * at all (a typo such as `<descripton>`) is refused.
 */
export function unsupported(ctx: BuildContext, el: XmlElement, parent: string): ElementNode {
  unknownElement(el, parent);
  ctx.warn("unsupported-element", `<${el.name}> is not supported inside <${parent}>; kept as is`, el.loc);
  return rawElement(el);
}

/**
 * Track single-valued children: returns false (and warns) when `key` (the element name unless
 * two names mean the same thing) was already seen. The first occurrence wins.
 */
export function firstOnly(ctx: BuildContext, seen: Set<string>, el: XmlElement, parent: string, key = el.name): boolean {
  if (!seen.has(key)) {
    seen.add(key);
    return true;
  }
  ctx.warn("duplicate-element", `<${el.name}> is written twice inside <${parent}>; the first one is used`, el.loc);
  return false;
}

/** Refuse `<arg>` anywhere but directly inside `<call>`. */
export function rejectMisplaced(el: XmlElement, parent: string): void {
  if (el.name === "arg") fail(el, `<arg> is allowed only inside <call>, found inside <${parent}>`);
  if (el.name === "template") {
    fail(el, `<template> definitions are allowed only at top level, found inside <${parent}>`);
  }
}

/** Shorten a value for an error message. */
export function clip(value: string, max = 40): string {
  const flat = value.replace(/\s+/g, " ");
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

// Loose <command>/<timeout>/<environment> fill what <execution> leaves open.
export function mergeScript(execution: ScriptSpec | undefined, loose: ScriptSpec | undefined): ScriptSpec | undefined {
  if (execution === undefined || loose === undefined) return execution ?? loose;
  const merged: Mutable<ScriptSpec> = { ...execution };
  if (merged.command === undefined && loose.command !== undefined) merged.command = loose.command;
  if (merged.timeout === undefined && loose.timeout !== undefined) merged.timeout = loose.timeout;
  if (merged.environment === undefined && loose.environment !== undefined) merged.environment = loose.environment;
  return merged;
}

// Free text, or a list of <criterion>/<item> children: templates write criteria both ways.
export function criteria(ctx: BuildContext, el: XmlElement): string | string[] {
  const children = childElements(el);
  if (children.length > 0 && children.every((c) => c.name === "criterion" || c.name === "item")) {
    return children.map((c) => prose(ctx, c));
  }
  return prose(ctx, el);
}

/** Task types that run no model session of their own: a session's settings on them are ignored. */
export const NO_SESSION = new Set(["sequential", "map", "associative_memory", "reduce", "script", "director_evaluator_loop", "judge_loop"]);

export function ignoredSettings(ctx: BuildContext, task: TaskNode): void {
  const set = [
    task.tools ? "<tools>" : "",
    task.maxTurns === undefined ? "" : "max_turns",
    task.temperature === undefined ? "" : "temperature",
    task.maxOutputTokens === undefined ? "" : "max_output_tokens",
  ].filter((s) => s !== "");
  if (set.length > 0)
    ctx.warn("ignored-setting", `${set.join(", ")} set the session of an atomic task; on a ${task.type} task they are ignored`, task.loc);
}

/** The task types the runtime knows (aside from `director` and `evaluator`, accepted from templates in the earlier format). */
export const KNOWN_TYPES: readonly KnownTaskType[] = [
  "atomic",
  "sequential",
  "map",
  "reduce",
  "script",
  "director_evaluator_loop",
  "judge_loop",
  "associative_memory",
];

/**
 * Every element name of the task language: those the runtime models, and those of templates written for the earlier
 * format that it knows but ignores (kept with an `unsupported-element` warning, so such templates keep parsing, those
 * of the test corpus in docs/corpus.md among them). Any other element is a
 * mistake, refused with its line and column and the nearest known name ({@link unknownElement}).
 */
export const LANGUAGE_ELEMENTS: ReadonlySet<string> = new Set([
  ...["task", "call", "cond", "case", "arg", "template", "function", "library", "steps", "step", "body", "code"],
  ...["description", "instructions", "system", "criteria", "provider", "expected_output", "model", "tools"],
  ...["inputs", "input", "input_source", "initial_value", "item", "source_var", "parameters", "parameter", "param"],
  ...["returns", "return", "outputs", "output_slot", "output_format", "condition", "termination_condition"],
  ...["context_management", "inherit_context", "accumulate_data", "accumulation_format", "fresh_context"],
  ...["file_paths", "path", "context_query", "context_relevance", "context_description", "context_assembly"],
  ...["script", "script_execution", "execution", "command", "timeout", "environment", "max_iterations"],
  ...["director", "evaluator", "inner_task", "reduction_task", "worker", "judge", "intake", "criteria_judge"],
  ...["query", "constraints", "max_results", "relevance_threshold", "primary_elements", "secondary_elements"],
  ...["excluded_elements", "disable_reparsing", "continuation_policy", "rebuild_memory", "manual_xml"],
  ...["failed_task", "original_prompt", "error", "message", "name", "resource", "task_instructions"],
  ...["validation_rules"],
]);

/**
 * The attributes of `<task>`: those its builder reads, and those the runners of its types read (a judge loop's
 * timeouts and gates, a script's `fail_on_nonzero`, budgets). Any other is refused like an unknown element.
 */
export const TASK_ATTRIBUTE_VOCABULARY: ReadonlySet<string> = new Set([
  ...["type", "subtype", "name", "ref", "parameters", "params", "returns"],
  ...["max_turns", "temperature", "max_output_tokens", "max_parallel", "on_failure", "over", "as"],
  ...["max_tokens", "max_cost", "fail_on_nonzero", "include"],
  ...["worker_timeout", "judge_timeout", "gate_timeout", "interactive", "max_intake_rounds", "criteria_judge"],
]);

/** Edit distance of two short names (for "did you mean"). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row.push(Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/** `; did you mean <x>?` for the known name nearest to `name` (at most 2 edits, or a third of its length), else "". */
export function didYouMean(name: string, known: Iterable<string>, quote: (n: string) => string): string {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = distance(name.toLowerCase(), candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(name.length / 3)) ? `; did you mean ${quote(best)}?` : "";
}

/** Refuses an element that is not in {@link LANGUAGE_ELEMENTS}, naming its parent and the nearest known name. */
export function unknownElement(el: XmlElement, parent: string): void {
  if (LANGUAGE_ELEMENTS.has(el.name)) return;
  fail(el, `unknown element <${el.name}> inside <${parent}>${didYouMean(el.name, LANGUAGE_ELEMENTS, (n) => `<${n}>`)}`);
}
