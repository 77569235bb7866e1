/**
 * `{{var}}` substitution (strict by default, docs/design.md): the Evaluator's only templating step, run on
 * every prompt-bearing field before a Handler sees it. Values are inserted once and never re-scanned.
 */

import { isPath, type LookupResult } from "./env.js";

export { resolvePath, type LookupResult } from "./env.js";

/** Resolves a placeholder path (`name`, `a.b.c`, `results[1].name`). */
export type Lookup = (path: string) => LookupResult;

/** `strict`: any unresolved variable fails the substitution; `lenient`: it becomes `{{undefined:name}}`. */
export type SubstituteMode = "strict" | "lenient";

/** Outcome of {@link substitute}. */
export type SubstituteResult =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; /** Every unresolved path, once each, in order of appearance. */ readonly missing: string[] };

const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;

/**
 * Replace every `{{path}}` in `text` with the looked-up value: strings as they are, anything else
 * as JSON. Placeholders that are not variable paths are left untouched: inline calls such as
 * `{{f(a, "b")}}` (evaluated elsewhere), `{{undefined:name}}` markers, and other brace text.
 *
 * @example
 * substitute("Hi {{user.name}}", (p) => resolvePath({ user: { name: "Ada" } }, p), "strict");
 * // → { ok: true, text: "Hi Ada" }
 */
export function substitute(text: string, lookup: Lookup, mode: SubstituteMode): SubstituteResult {
  const missing: string[] = [];
  const out = text.replace(PLACEHOLDER, (match, inner: string) => {
    const path = inner.trim();
    if (!isPath(path)) return match;
    const result = lookup(path);
    if (result.found) return stringify(result.value);
    if (!missing.includes(path)) missing.push(path);
    return `{{undefined:${path}}}`;
  });
  if (mode === "strict" && missing.length > 0) return { ok: false, missing };
  return { ok: true, text: out };
}

const STEP_RESULT_KEYS = new Set(["content", "status", "parsedContent", "notes", "error"]);

/** A `step_results` entry (`{content, status, parsedContent?, notes?}`): as text it is its content. */
function isStepResult(value: unknown): value is { content: string } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return (
    typeof Reflect.get(value, "content") === "string" &&
    typeof Reflect.get(value, "status") === "string" &&
    keys.every((k) => STEP_RESULT_KEYS.has(k))
  );
}

/**
 * A value as placeholder text: strings as they are, a step result as its content (`{{step_results[0]}}`), anything
 * else as JSON (else `String()`).
 */
export function stringify(value: unknown): string {
  if (typeof value === "string") return value;
  if (isStepResult(value)) return value.content;
  try {
    const json = JSON.stringify(value);
    if (json !== undefined) return json;
  } catch {
    // BigInt or a cycle: fall through to String().
  }
  return String(value);
}
