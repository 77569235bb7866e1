/**
 * Inline calls in prompt text: `{{f(a, "lit", 3, k=v)}}` runs function template `f` and inserts its output
 * (docs/task-language.md). {@link expandText} does variables and inline calls in one pass over the original text, so
 * nothing inserted (a variable's value, a call's output) is ever scanned again: model output cannot call templates.
 */
import { find, isPath, type Env } from "../../machines/language/env.js";
import type { TaskResult } from "../../protocol/index.js";
import { stringify, type SubstituteMode } from "../../machines/language/substitute.js";

/** How deep inline calls may nest (a template whose prompt calls a template, …). */
export const MAX_INLINE_DEPTH = 5;

/** One argument of an inline call: its text, and its name when written `name=value`. */
export interface InlineArg {
  name?: string;
  text: string;
}

/** An inline call found in a placeholder. */
export interface InlineCall {
  template: string;
  args: InlineArg[];
}

const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;
const CALL = /^([A-Za-z_][\w-]*)\s*\(([\s\S]*)\)$/;
const NAMED = /^([A-Za-z_]\w*)\s*=(?!=)\s*([\s\S]*)$/;

/** Parses `f(a, "b, c", k=v)`; undefined when the text is not a call. */
export function parseInlineCall(text: string): InlineCall | undefined {
  const m = CALL.exec(text.trim());
  if (!m?.[1]) return undefined;
  const args: InlineArg[] = [];
  let current = "";
  let quote: string | undefined;
  const flush = () => {
    const piece = current.trim();
    current = "";
    if (piece === "") return;
    const named = NAMED.exec(piece);
    args.push(named?.[1] && named[2] !== undefined && !/^["']/.test(piece) ? { name: named[1], text: named[2].trim() } : { text: piece });
  };
  for (const ch of m[2] ?? "") {
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === ",") {
      flush();
      continue;
    }
    current += ch;
  }
  if (quote) return undefined;
  flush();
  return { template: m[1], args };
}

/** Outcome of {@link expandText}. */
export type ExpandResult = { ok: true; text: string } | { ok: false; missing: string[] } | { ok: false; result: TaskResult };

/**
 * Replaces `{{path}}` with the variable's value and `{{f(…)}}` with the output of calling `f` (strict: every
 * unresolved variable is collected; lenient: it becomes the marker `{{undefined:name}}`; a failing call fails
 * the whole text with its result). Other brace text stays.
 */
export async function expandText(
  text: string,
  env: Env,
  call: (c: InlineCall) => Promise<TaskResult>,
  mode: SubstituteMode = "strict",
): Promise<ExpandResult> {
  const pieces: string[] = [];
  const missing: string[] = [];
  let last = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    const inner = (match[1] ?? "").trim();
    pieces.push(text.slice(last, match.index));
    last = match.index + match[0].length;
    if (isPath(inner)) {
      const found = find(env, inner);
      if (found.found) pieces.push(stringify(found.value));
      else if (mode === "lenient") pieces.push(`{{undefined:${inner}}}`);
      else if (!missing.includes(inner)) missing.push(inner);
      continue;
    }
    const parsed = parseInlineCall(inner);
    if (!parsed) {
      pieces.push(match[0]);
      continue;
    }
    const result = await call(parsed);
    if (result.status !== "COMPLETE") return { ok: false, result };
    pieces.push(result.content);
  }
  pieces.push(text.slice(last));
  return missing.length > 0 ? { ok: false, missing } : { ok: true, text: pieces.join("") };
}
