/**
 * Which tools a session gets (docs/tools.md#which-tools-a-task-gets): a list of tool names and globs, written in a
 * task's `<tools>` element, in `DIRIGENT_TOOLS` (the process default) and in `ExecuteRequest.tools`. A glob is a name
 * with `*` standing for any run of characters (`fs__*`, `get_*`, `*`).
 */
import { z } from "zod";

/** A tool name (the chat-completions rule) or a glob of them: letters, digits, `_`, `-` and `*`, at most 64. */
export const TOOL_PATTERN = /^[a-zA-Z0-9_*-]{1,64}$/;

/** One entry of a tool list. */
export const ToolPattern = z.string().regex(TOOL_PATTERN, "a tool name or glob: letters, digits, '_', '-' and '*', at most 64 characters");
export type ToolPattern = z.infer<typeof ToolPattern>;

/** Splits a written tool list (commas and/or whitespace between entries); empty entries are dropped. */
export function splitToolList(text: string): string[] {
  return text.split(/[\s,]+/).filter((item) => item !== "");
}

/** The entries of a list that are not a tool name or glob, for an error message. */
export function badToolPatterns(patterns: readonly string[]): string[] {
  return patterns.filter((p) => !TOOL_PATTERN.test(p));
}

/** Whether `pattern` contains `*`. */
export const isToolGlob = (pattern: string): boolean => pattern.includes("*");

/** Whether the tool `name` is selected by `pattern` (a name, exactly, or a glob). */
export function toolMatches(pattern: string, name: string): boolean {
  if (!isToolGlob(pattern)) return pattern === name;
  const parts = pattern.split("*");
  const first = parts[0] ?? "";
  const last = parts.at(-1) ?? "";
  if (!name.startsWith(first) || name.length < first.length + last.length || !name.endsWith(last)) return false;
  // The middle parts in order, each after the previous one, between the fixed start and end.
  let at = first.length;
  const end = name.length - last.length;
  for (const part of parts.slice(1, -1)) {
    const found = name.indexOf(part, at);
    if (found < 0 || found + part.length > end) return false;
    at = found + part.length;
  }
  return true;
}

/**
 * The tools of `names` that `patterns` select, in the order of `names`, and the patterns that select none of them
 * (a name no tool has, a glob that matches nothing): the missing ones. A tool of `exactOnly` is selected by its exact
 * name only, never by a glob.
 */
export function selectTools(
  patterns: readonly string[],
  names: readonly string[],
  exactOnly: ReadonlySet<string> = new Set(),
): { selected: string[]; missing: string[] } {
  const matches = (p: string, name: string) => (exactOnly.has(name) ? p === name : toolMatches(p, name));
  const selected = names.filter((name) => patterns.some((p) => matches(p, name)));
  const missing = patterns.filter((p) => !names.some((name) => matches(p, name)));
  return { selected, missing: [...new Set(missing)] };
}
