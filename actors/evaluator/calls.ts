/**
 * Function template calls and `<cond>` in the Evaluator's walk: an argument's value (a variable first, a literal
 * second), the binding of a call's arguments to the template's parameters, and the first true case of a `<cond>`.
 */
import type { TaskResult } from "../../protocol/index.js";
import { find, isPath, rootEnv, type Env } from "../../machines/language/env.js";
import { evaluateTest } from "../../machines/language/expression.js";
import { substitute, type SubstituteMode } from "../../machines/language/substitute.js";
import type { CondNode, TemplateDocument, TemplateNode } from "../../machines/language/ast.js";
import { checkParam, inputFailure } from "./nodes.js";
import { reservedOf, scopedWalk, type Walk } from "./document-walk.js";
const QUOTED = /^"([\s\S]*)"$|^'([\s\S]*)'$/;

/**
 * An argument's value: a variable (path) first, a literal second, so `<arg>report</arg>` passes the variable `report`
 * when there is one and the text otherwise, as template authors write both with the same syntax.
 */
export function argumentValue(text: string, env: Env, mode: SubstituteMode = "strict"): { value: unknown } | { missing: string[] } {
  const t = text.trim();
  const quoted = QUOTED.exec(t);
  if (quoted) return { value: quoted[1] ?? quoted[2] ?? "" };
  if (isPath(t)) {
    const found = find(env, t);
    if (found.found) return { value: found.value };
  }
  if (/^-?\d+(?:\.\d+)?$/.test(t)) return { value: Number(t) };
  if (t === "true" || t === "false") return { value: t === "true" };
  if (t === "null" || t === "none") return { value: null };
  if (t.includes("{{")) {
    const done = substitute(t, (p) => find(env, p), mode);
    return done.ok ? { value: done.text } : { missing: done.missing };
  }
  return { value: t };
}

/** An argument of a call: text (a variable or a literal), or a node to evaluate. */
type ArgSource = { name?: string; text: string } | { name?: string; nodePath: string };

/**
 * The function template `name`: the document's own first, else a function template of the template library (its
 * walk is then the library template's document, under `scope`, so that its node paths never collide with the
 * caller's and the templates of its own file resolve).
 */
export function resolveTemplate(walk: Walk, name: string, scope: string): { walk: Walk; index: number } | { error: string } {
  const own = walk.document.templates.findIndex((t) => t.name === name);
  if (own >= 0) return { walk, index: own };
  const entry = walk.library.get(name);
  const index = entry ? entry.document.templates.findIndex((t) => t.name === name) : -1;
  if (entry && index >= 0) return { walk: scopedWalk(walk, entry.document, scope), index };
  if (entry)
    return {
      error: `template '${name}' of the template library (${entry.file}) is a ${entry.type} task, not a function template: run it with <task ref="${name}"/>`,
    };
  return {
    error: `unknown template '${name}': neither the document nor the template library (--templates) defines a function template of that name`,
  };
}

/**
 * Binds arguments to the parameters of template `name` (the document's, else the library's: {@link resolveTemplate}):
 * positional in declared order, then named, then defaults. The body to run is `templates.<template>.body` of `walk`.
 */
export async function bindArgs(
  caller: Walk,
  name: string,
  args: readonly ArgSource[],
  env: Env,
  depth: number,
  signal: AbortSignal,
  scope: string,
): Promise<{ walk: Walk; template: number; env: Env } | { result: TaskResult }> {
  const resolved = resolveTemplate(caller, name, scope);
  if ("error" in resolved) return { result: inputFailure(resolved.error, { template: name }) };
  const { walk, index } = resolved;
  const template = walk.document.templates[index];
  if (!template) return { result: inputFailure(`unknown template '${name}'`) };
  // No prototype: a parameter may be named `constructor` or `__proto__` (template names are the submitter's).
  const params: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  let position = 0;
  for (const arg of args) {
    const param = arg.name ?? template.params[position++];
    if (param === undefined)
      return { result: inputFailure(`too many arguments for template '${template.name}' (it takes ${template.params.length})`) };
    if (!template.params.includes(param)) return { result: inputFailure(`template '${template.name}' has no parameter '${param}'`) };
    if ("text" in arg) {
      const got = argumentValue(arg.text, env, caller.substitution);
      if ("missing" in got)
        return { result: inputFailure(`missing required input: ${got.missing.map((m) => `'${m}'`).join(", ")}`, { missing: got.missing }) };
      params[param] = got.value;
    } else {
      const result = await caller.actors.evaluate(caller, arg.nodePath, env, depth + 1, signal);
      if (result.status !== "COMPLETE") return { result };
      params[param] = result.content;
    }
  }
  const checked = applyParamSpecs(template, params);
  if ("result" in checked) return checked;
  // A function template sees only its parameters (no caller's variables), and the Evaluator's reserved `$` bindings.
  return { walk, template: index, env: rootEnv({ ...reservedOf(env), ...params }) };
}

/** Fills in the defaults of `template`'s parameters missing from `params` and checks the declared types, in place. */
function applyParamSpecs(template: TemplateNode, params: Record<string, unknown>): { ok: true } | { result: TaskResult } {
  for (const spec of template.paramSpecs) {
    if (!(spec.name in params)) {
      if (spec.default !== undefined) params[spec.name] = spec.default;
      else if (spec.required === false) continue;
      else return { result: inputFailure(`missing argument '${spec.name}' of template '${template.name}'`, { missing: [spec.name] }) };
    }
    const checked = checkParam(spec.type, params[spec.name]);
    if (!checked.ok)
      return { result: inputFailure(`argument '${spec.name}' of template '${template.name}' is not of type ${spec.type ?? ""}`) };
    params[spec.name] = checked.value;
  }
  return { ok: true };
}

/**
 * The inputs of a subtask that runs library template `name` (`document`, as the library registered it): when it is a
 * function template (a template tool's call, or a `run_subtask` hint naming one), its parameters' defaults fill in
 * and their declared types are checked; other inputs are kept as they are.
 */
export function bindTemplateInputs(
  document: TemplateDocument,
  name: string,
  inputs: Readonly<Record<string, unknown>>,
): { inputs: Record<string, unknown>; function: boolean } | { result: TaskResult } {
  const template = document.templates.find((t) => t.name === name);
  const bound: Record<string, unknown> = Object.assign(Object.create(null) as Record<string, unknown>, inputs);
  if (!template || template.body !== document.entry) return { inputs: bound, function: false };
  const checked = applyParamSpecs(template, bound);
  return "result" in checked ? checked : { inputs: bound, function: true };
}

/**
 * Runs the body of the first case whose test is true, its nodes in order; the result is the last one's.
 * A test that does not parse counts as false and is reported as a `cond.test_error` progress event.
 * When no case matches, the result is COMPLETE with empty content and `notes.matchedCase: null`.
 */
export async function runCond(walk: Walk, node: CondNode, path: string, env: Env, depth: number, signal: AbortSignal): Promise<TaskResult> {
  for (let i = 0; i < node.cases.length; i++) {
    const branch = node.cases[i];
    if (!branch) continue;
    const test = evaluateTest(branch.test, env);
    if (!test.ok) walk.progress("cond.test_error", `case ${i + 1}: ${test.error}`, { nodePath: `${path}.cases.${i}`, test: branch.test });
    if (!test.ok || !test.value) continue;
    walk.progress("cond.matched", `case ${i + 1}/${node.cases.length}: ${branch.test}`, { nodePath: `${path}.cases.${i}` });
    let result: TaskResult = { content: "", status: "COMPLETE", notes: {} };
    for (let j = 0; j < branch.body.length; j++) {
      result = await walk.actors.evaluate(walk, `${path}.cases.${i}.body.${j}`, env, depth + 1, signal);
      if (result.status !== "COMPLETE") return result;
    }
    return { ...result, notes: { ...result.notes, matchedCase: i } };
  }
  return { content: "", status: "COMPLETE", notes: { matchedCase: null } };
}
