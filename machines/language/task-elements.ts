/**
 * Builders for the elements a task holds besides its steps, each into its typed part (machines/language/ast.ts):
 * context management, file paths, output format, inputs, script settings, termination condition, initial value,
 * model, tools, session and map attributes, parameters and returns. Each also stands alone as a fragment.
 */
import type {
  AccumulationFormat,
  MapSpec,
  ContextManagement,
  ElementNode,
  FilePathSource,
  FilePaths,
  FreshContext,
  InheritContext,
  InitialValue,
  InputBinding,
  ModelSpec,
  OutputFormat,
  ParameterSpec,
  ReturnSpec,
  ScriptEnvironment,
  ScriptExecution,
  ScriptSpec,
  TerminationCondition,
  ToolList,
} from "./ast.js";
import { badToolPatterns, splitToolList } from "../../protocol/tool-selection.js";
import {
  type BuildContext,
  type Mutable,
  childElements,
  clip,
  directText,
  fail,
  firstOnly,
  prose,
  readBoolean,
  readEnum,
  readSeconds,
  rejectMisplaced,
  splitList,
  strayText,
  unsupported,
} from "./values.js";
import type { XmlElement } from "./xml.js";
import { isPath } from "./env.js";

const INHERIT: readonly InheritContext[] = ["full", "none", "subset"];
const ACCUMULATION: readonly AccumulationFormat[] = ["notes_only", "full_output"];
const FRESH: readonly FreshContext[] = ["enabled", "disabled"];
const SOURCES: readonly FilePathSource[] = ["literal", "command", "description", "context_description"];
const EXECUTABLE = new Set(["task", "call", "cond"]);

/** `<context_management>`: older spellings read as aliases; values outside the enums refused. */
export function contextManagement(ctx: BuildContext, el: XmlElement): ContextManagement {
  const cm: Mutable<ContextManagement> = { kind: "context_management", loc: el.loc, extra: [] };
  const extra: ElementNode[] = [];
  const seen = new Set<string>();
  strayText(ctx, el);
  for (const child of childElements(el)) {
    const known = ["inherit_context", "accumulate_data", "accumulation_format", "fresh_context"].includes(child.name);
    if (known && !firstOnly(ctx, seen, child, el.name)) continue;
    const text = directText(child);
    if (child.name === "inherit_context")
      cm.inheritContext = readEnum(ctx, child, text, INHERIT, { aliases: { true: "full", false: "none" } });
    else if (child.name === "accumulate_data") cm.accumulateData = readBoolean(child, text);
    else if (child.name === "accumulation_format") {
      cm.accumulationFormat = readEnum(ctx, child, text, ACCUMULATION, { aliases: { minimal: "notes_only", full: "full_output" } });
    } else if (child.name === "fresh_context") cm.freshContext = readEnum(ctx, child, text, FRESH);
    else extra.push(misplacedOr(ctx, child, el.name));
  }
  cm.extra = extra;
  return cm;
}

/** Warn about the documented context constraints (fresh yet inherited context; no context at all). */
export function checkContext(ctx: BuildContext, cm: ContextManagement, hasFilePaths: boolean): void {
  if (cm.freshContext === "enabled" && cm.inheritContext !== undefined && cm.inheritContext !== "none") {
    ctx.warn(
      "fresh-context-conflict",
      `fresh_context 'enabled' with inherit_context '${cm.inheritContext}': fresh context is meant for inherit_context 'none'`,
      cm.loc,
    );
  }
  if (cm.inheritContext === "none" && cm.accumulateData === false && cm.freshContext === "disabled" && !hasFilePaths) {
    ctx.warn(
      "no-context",
      "inherit_context 'none', accumulate_data 'false' and fresh_context 'disabled': the task gets no context",
      cm.loc,
    );
  }
}

/** `<file_paths source>`. */
export function filePaths(ctx: BuildContext, el: XmlElement): FilePaths {
  const source = el.attrs.source === undefined ? "literal" : readEnum(ctx, el, el.attrs.source, SOURCES, { attribute: "source" });
  const fp: Mutable<FilePaths> = { kind: "file_paths", loc: el.loc, source, paths: [], extra: [] };
  const paths: string[] = [];
  const extra: ElementNode[] = [];
  const seen = new Set<string>();
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (child.name === "path") {
      const path = directText(child);
      if (path !== "") paths.push(path);
    } else if (child.name === "command" || child.name === "description" || child.name === "context_query") {
      if (!firstOnly(ctx, seen, child, el.name)) continue;
      const text = prose(ctx, child);
      if (child.name === "command") fp.command = text;
      else if (child.name === "description") fp.description = text;
      else fp.contextQuery = text;
    } else extra.push(misplacedOr(ctx, child, el.name));
  }
  fp.paths = paths;
  fp.extra = extra;
  return fp;
}

/** `<output_format type schema>`. */
export function outputFormat(ctx: BuildContext, el: XmlElement): OutputFormat {
  const type = el.attrs.type === undefined ? "text" : readEnum(ctx, el, el.attrs.type, ["json", "text"] as const, { attribute: "type" });
  for (const child of childElements(el)) {
    misplacedOr(ctx, child, el.name);
  }
  return el.attrs.schema === undefined
    ? { kind: "output_format", loc: el.loc, type }
    : { kind: "output_format", loc: el.loc, type, schema: el.attrs.schema };
}

/** One `<input name from>`: literal text, a nested task, or a reference (`from`). */
export function inputBinding(ctx: BuildContext, el: XmlElement): InputBinding {
  const name = el.attrs.name?.trim();
  if (name === undefined || name === "") fail(el, "<input> needs a 'name' attribute");
  const input: Mutable<InputBinding> = { kind: "input", loc: el.loc, name, extra: [] };
  if (el.attrs.from !== undefined) input.from = el.attrs.from.trim();
  const value = directText(el);
  if (value !== "") input.value = value;
  const extra: ElementNode[] = [];
  const seen = new Set<string>();
  for (const child of childElements(el)) {
    if (EXECUTABLE.has(child.name)) {
      if (firstOnly(ctx, seen, child, el.name)) input.task = ctx.step(child);
    } else if (child.name === "description" || child.name === "expected_output") {
      if (!firstOnly(ctx, seen, child, el.name)) continue;
      if (child.name === "description") input.description = prose(ctx, child);
      else input.expectedOutput = prose(ctx, child);
    } else extra.push(misplacedOr(ctx, child, el.name));
  }
  input.extra = extra;
  return input;
}

/** `<inputs>`: its `<input>` children, plus anything else kept aside. */
export function inputList(ctx: BuildContext, el: XmlElement): { inputs: InputBinding[]; extra: ElementNode[] } {
  const inputs: InputBinding[] = [];
  const extra: ElementNode[] = [];
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (child.name === "input") inputs.push(inputBinding(ctx, child));
    else extra.push(misplacedOr(ctx, child, el.name));
  }
  return { inputs, extra };
}

/** `<script_execution>` of a director–evaluator loop: a command or a call. */
export function scriptExecution(ctx: BuildContext, el: XmlElement): ScriptExecution {
  const se: Mutable<ScriptExecution> = { kind: "script_execution", loc: el.loc, inputs: [], extra: [] };
  const inputs: InputBinding[] = [];
  const extra: ElementNode[] = [];
  const seen = new Set<string>();
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (child.name === "inputs") {
      const list = inputList(ctx, child);
      inputs.push(...list.inputs);
      extra.push(...list.extra);
    } else if (child.name === "input") inputs.push(inputBinding(ctx, child));
    else if (child.name === "command" || child.name === "timeout" || child.name === "call") {
      if (!firstOnly(ctx, seen, child, el.name)) continue;
      if (child.name === "command") se.command = prose(ctx, child);
      else if (child.name === "timeout") se.timeout = readSeconds(child);
      else {
        const call = ctx.step(child);
        if (call.kind === "call") se.call = call;
      }
    } else extra.push(misplacedOr(ctx, child, el.name));
  }
  se.inputs = inputs;
  se.extra = extra;
  return se;
}

/** Builds (or extends) the execution settings of a script task from one child element; false if not one. */
export function addScriptSetting(ctx: BuildContext, spec: Mutable<ScriptSpec>, el: XmlElement, seen: Set<string>): boolean {
  if (el.name !== "command" && el.name !== "timeout" && el.name !== "environment") return false;
  if (!firstOnly(ctx, seen, el, "execution")) return true;
  if (el.name === "command") spec.command = prose(ctx, el);
  else if (el.name === "timeout") spec.timeout = readSeconds(el);
  else spec.environment = environment(ctx, el);
  return true;
}

/** `<execution>` or `<script>` of a script task. */
export function scriptSpec(ctx: BuildContext, el: XmlElement): ScriptSpec {
  const spec: Mutable<ScriptSpec> = { kind: "execution", loc: el.loc, extra: [] };
  const extra: ElementNode[] = [];
  const seen = new Set<string>();
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (!addScriptSetting(ctx, spec, child, seen)) extra.push(misplacedOr(ctx, child, el.name));
  }
  spec.extra = extra;
  return spec;
}

function environment(ctx: BuildContext, el: XmlElement): ScriptEnvironment {
  const variables: { name: string; value: string }[] = [];
  for (const child of childElements(el)) {
    const name = child.attrs.name?.trim();
    if (name !== undefined && name !== "") variables.push({ name, value: directText(child) });
    else misplacedOr(ctx, child, el.name);
  }
  const env: Mutable<ScriptEnvironment> = { kind: "environment", loc: el.loc, variables };
  if (el.attrs.inherit !== undefined) env.inherit = el.attrs.inherit.trim();
  return env;
}

/** `<termination_condition>`: `<condition>` children, or its own text. */
export function terminationCondition(ctx: BuildContext, el: XmlElement): TerminationCondition {
  const conditions: string[] = [];
  const extra: ElementNode[] = [];
  for (const child of childElements(el)) {
    if (child.name === "condition") conditions.push(prose(ctx, child));
    else extra.push(misplacedOr(ctx, child, el.name));
  }
  const own = directText(el);
  if (own !== "" && conditions.length === 0) conditions.push(own);
  else if (own !== "") strayText(ctx, el);
  return { kind: "termination_condition", loc: el.loc, conditions, extra };
}

/** `<initial_value>` of a reduce task. */
export function initialValue(ctx: BuildContext, el: XmlElement): InitialValue {
  const iv: Mutable<InitialValue> = { kind: "initial_value", loc: el.loc };
  const value = directText(el);
  if (value !== "") iv.value = value;
  const seen = new Set<string>();
  for (const child of childElements(el)) {
    if (EXECUTABLE.has(child.name) && firstOnly(ctx, seen, child, el.name)) iv.task = ctx.step(child);
    else if (!EXECUTABLE.has(child.name)) misplacedOr(ctx, child, el.name);
  }
  return iv;
}

/** `<model>`: text or `preferred`, plus `fallback`. */
export function modelSpec(el: XmlElement): ModelSpec {
  const model: Mutable<ModelSpec> = { kind: "model", loc: el.loc, fallback: splitList(el.attrs.fallback ?? "") };
  const name = directText(el) || el.attrs.preferred?.trim() || el.attrs.name?.trim() || "";
  if (name !== "") model.name = name;
  return model;
}

/** `<tools>read_file, fs__*</tools>`: tool names and globs, separated by commas or whitespace; empty: no tools. */
export function toolList(ctx: BuildContext, el: XmlElement): ToolList {
  for (const child of childElements(el)) misplacedOr(ctx, child, el.name);
  const patterns = splitToolList(directText(el));
  const bad = badToolPatterns(patterns);
  if (bad.length > 0) {
    const names = bad.map((b) => `'${clip(b)}'`).join(", ");
    fail(el, `invalid tool name or glob in <tools>: ${names} (letters, digits, '_', '-' and '*', at most 64 characters)`);
  }
  return { kind: "tools", loc: el.loc, patterns: [...new Set(patterns)] };
}

/** The session settings a `<task>` sets by attribute, with their ranges. */
const SESSION_ATTRIBUTES = {
  max_turns: { key: "maxTurns", min: 1, max: 100, integer: true },
  temperature: { key: "temperature", min: 0, max: 2, integer: false },
  max_output_tokens: { key: "maxOutputTokens", min: 1, max: 1_000_000, integer: true },
} as const;

/** Names of the attributes {@link sessionAttributes} reads. */
export const SESSION_ATTRIBUTE_NAMES: readonly string[] = Object.keys(SESSION_ATTRIBUTES);

/** `max_turns`, `temperature`, `max_output_tokens` of a `<task>`; a value out of its range is refused at the task. */
export function sessionAttributes(el: XmlElement): { maxTurns?: number; temperature?: number; maxOutputTokens?: number } {
  const out: { maxTurns?: number; temperature?: number; maxOutputTokens?: number } = {};
  for (const [name, rule] of Object.entries(SESSION_ATTRIBUTES)) {
    const raw = el.attrs[name];
    if (raw === undefined) continue;
    const text = raw.trim();
    const value = (rule.integer ? /^\d+$/ : /^\d+(\.\d+)?$/).test(text) ? Number(text) : Number.NaN;
    if (!(value >= rule.min && value <= rule.max)) {
      const kind = rule.integer ? "an integer" : "a number";
      fail(el, `invalid ${name} attribute of <${el.name}> '${clip(text)}': expected ${kind} from ${rule.min} to ${rule.max}`);
    }
    out[rule.key] = value;
  }
  return out;
}

/** `<parameters>` with `<parameter>`/`<param name type required default>` children. */
export function parameterList(ctx: BuildContext, el: XmlElement): ParameterSpec[] {
  const params: ParameterSpec[] = [];
  strayText(ctx, el);
  for (const child of childElements(el)) {
    if (child.name !== "parameter" && child.name !== "param") {
      misplacedOr(ctx, child, el.name);
      continue;
    }
    const name = child.attrs.name?.trim();
    if (name === undefined || name === "") fail(child, `<${child.name}> needs a 'name' attribute`);
    const spec: Mutable<ParameterSpec> = { name };
    if (child.attrs.type !== undefined) spec.type = child.attrs.type.trim();
    if (child.attrs.required !== undefined) spec.required = readBoolean(child, child.attrs.required);
    if (child.attrs.default !== undefined) spec.default = child.attrs.default;
    const description = directText(child);
    if (description !== "") spec.description = description;
    params.push(spec);
  }
  return params;
}

/** `<returns type items>text</returns>`, or `<returns>type</returns>`. */
export function returnsElement(el: XmlElement): ReturnSpec {
  const text = directText(el);
  const typeAttr = el.attrs.type?.trim();
  const spec: Mutable<ReturnSpec> = { type: typeAttr ?? text };
  if (el.attrs.items !== undefined) spec.items = el.attrs.items.trim();
  if (typeAttr !== undefined && text !== "") spec.description = text;
  return spec;
}

/** Refuse misplaced `<arg>`/`<template>`, otherwise keep the element with a warning. */
export function misplacedOr(ctx: BuildContext, el: XmlElement, parent: string): ElementNode {
  rejectMisplaced(el, parent);
  return unsupported(ctx, el, parent);
}

/** Names of the attributes {@link mapAttributes} reads. */
export const MAP_ATTRIBUTE_NAMES: readonly string[] = ["max_parallel", "on_failure", "over", "as"];

const NAME = /^[A-Za-z_][\w-]*$/;

/**
 * `max_parallel`, `on_failure`, `over` and `as` of a `map` task (`over` of a `reduce`); a bad value, or a
 * map over a list without exactly one step, is refused at the task. `undefined` when none is written.
 */
export function mapAttributes(el: XmlElement, type: string, stepCount: number | undefined): MapSpec | undefined {
  const spec: Mutable<MapSpec> = {};
  const allowed = type === "map" ? MAP_ATTRIBUTE_NAMES : type === "reduce" ? ["over"] : [];
  for (const name of MAP_ATTRIBUTE_NAMES) {
    const raw = el.attrs[name];
    if (raw === undefined) continue;
    const text = raw.trim();
    if (!allowed.includes(name))
      fail(el, `the ${name} attribute belongs to a map${name === "over" ? " or reduce" : ""} task, not to a ${type} task`);
    if (name === "max_parallel") {
      const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
      if (!(value >= 1 && value <= 1000))
        fail(el, `invalid max_parallel attribute of <${el.name}> '${clip(text)}': expected an integer from 1 to 1000`);
      spec.maxParallel = value;
    } else if (name === "on_failure") {
      if (text !== "fail_fast" && text !== "collect")
        fail(el, `invalid on_failure attribute of <${el.name}> '${clip(text)}': expected fail_fast or collect`);
      spec.onFailure = text;
    } else if (name === "over") {
      if (!isPath(text))
        fail(el, `invalid over attribute of <${el.name}> '${clip(text)}': expected a variable path such as files or step_results[0]`);
      spec.over = text;
    } else {
      if (!NAME.test(text)) fail(el, `invalid as attribute of <${el.name}> '${clip(text)}': expected a variable name`);
      spec.as = text;
    }
  }
  if (spec.as !== undefined && spec.over === undefined)
    fail(el, `the as attribute of <${el.name}> needs an over attribute: the list to bind it from`);
  if (type === "map" && spec.over !== undefined && stepCount !== 1)
    fail(el, `a map over a list runs one step template per element: it needs exactly one step in <steps>, found ${stepCount ?? 0}`);
  if (type === "map" && spec.over === undefined && !stepCount) fail(el, `a map task needs <steps> (its branches) or an over attribute`);
  return Object.keys(spec).length > 0 ? spec : undefined;
}
