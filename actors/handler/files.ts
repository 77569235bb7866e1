/**
 * The context a Handler attaches to a session (explicit `<file_paths>`): each file of an execute request, read with the
 * toolset's workspace-confined `read_file` tool and wrapped in `<file path="…">…</file>`, then the context text.
 * A file that cannot be read is left out and noted; it never fails the session.
 */
import type { Toolset } from "./toolset.js";

/** What was attached: text for the system prompt and the problems met. */
export interface AttachedContext {
  /** Text to append to the system prompt; empty when there is nothing to attach. */
  text: string;
  /** Notes for the result: `context_files` read, `context_file_errors` `{path, error}` for each file left out. */
  notes: Record<string, unknown>;
}

/** Most files one session attaches; the rest are noted as left out. */
export const MAX_CONTEXT_FILES = 50;

const escapeAttribute = (value: string) => value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");

/**
 * Reads `files` through `toolset` and formats them, then `context`. `read_file` answers an error as text starting
 * with `error: `; such an answer (or a malformed call, when the tool is not enabled) leaves the file out.
 */
export async function attachContext(
  toolset: Toolset,
  files: readonly string[] | undefined,
  context: string | undefined,
  signal: AbortSignal,
): Promise<AttachedContext> {
  const blocks: string[] = [];
  const errors: { path: string; error: string }[] = [];
  let read = 0;
  for (const [i, path] of (files ?? []).entries()) {
    if (i >= MAX_CONTEXT_FILES) {
      errors.push({ path, error: `more than ${MAX_CONTEXT_FILES} context files` });
      continue;
    }
    const answer = await toolset.run(
      { id: `context-file-${i}`, type: "function", function: { name: "read_file", arguments: JSON.stringify({ path }) } },
      signal,
    );
    if (answer.malformed || answer.content.startsWith("error: ")) {
      errors.push({ path, error: answer.content.replace(/^error: /, "") });
      continue;
    }
    read++;
    blocks.push(`<file path="${escapeAttribute(path)}">\n${answer.content}\n</file>`);
  }
  if (context?.trim()) blocks.push(context.trim());
  const notes: Record<string, unknown> = {
    ...(files && files.length > 0 ? { context_files: read } : {}),
    ...(errors.length > 0 ? { context_file_errors: errors } : {}),
  };
  return { text: blocks.length > 0 ? `\n\n===\n\n${blocks.join("\n\n")}` : "", notes };
}
