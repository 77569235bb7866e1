/**
 * Placeholders a submitted task can never fill, found at submission under strict substitution: a `{{name}}` in the
 * prose of an atomic entry task (not a library `ref`) whose name is neither a submitted input nor one of the task's
 * `<input>` bindings. Nothing else binds names there (steps, calls and maps do, so their tasks are left to the walk).
 */
import type { TemplateDocument } from "../../machines/language/ast.js";
import { isPath } from "../../machines/language/env.js";

const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;

/** What is wrong, for an `INVALID_TEMPLATE` reply at the entry task's line and column; undefined when nothing is. */
export function unfillablePlaceholder(
  document: TemplateDocument,
  inputs: Readonly<Record<string, unknown>>,
): { message: string; line: number; col: number } | undefined {
  const entry = document.entry;
  if (entry?.kind !== "task" || entry.type !== "atomic" || entry.ref !== undefined || document.templates.length > 0) return undefined;
  const bound = new Set([...Object.keys(inputs), ...entry.inputs.map((i) => i.name)]);
  const fields = [
    ["description", entry.description],
    ["instructions", entry.instructions],
    ["system", entry.system],
  ] as const;
  for (const [element, text] of fields) {
    for (const match of (text ?? "").matchAll(PLACEHOLDER)) {
      const path = (match[1] ?? "").trim();
      if (!isPath(path)) continue;
      const name = /^[^.[]+/.exec(path)?.[0] ?? path;
      if (bound.has(name) || name.startsWith("$")) continue;
      return {
        message: `{{${path}}} in <${element}> can never be filled: no input '${name}' is submitted or bound by an <input> of the task (pass it, e.g. --input ${name}=…, or declare <inputs><input name="${name}">…</input></inputs>)`,
        line: entry.loc.line,
        col: entry.loc.col,
      };
    }
  }
  return undefined;
}
