/**
 * The Evaluator's check of a submitted template's commands against the command allowlist (`DIRIGENT_COMMANDS`,
 * actors/commands.ts) before anything of the task runs: every `script` task's `<command>`, every loop's
 * `<script_execution>` command (or its `<call task="system:run_script">` argument) and every
 * `<file_paths source="command">`. A program known only at run time (`{{var}}` in `argv[0]`, a bare variable as the
 * argument of `system:run_script`) and a `request_evaluation` target are checked by the Handler when they run.
 */
import { isPath } from "../../machines/language/env.js";
import { splitCommand } from "../../machines/language/script-argv.js";

import { commandRefusal } from "../commands.js";
import type { TemplateDocument } from "../../machines/language/ast.js";

/** The command texts of the entry task of a document and of its function templates (what can run), each with where it is. */
export function templateCommands(document: TemplateDocument): { where: string; text: string }[] {
  const found: { where: string; text: string }[] = [];
  const seen = new WeakSet<object>();
  const visit = (value: unknown): void => {
    if (value === null || typeof value !== "object" || seen.has(value)) return;
    seen.add(value);
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
      return;
    }
    const node = value as Record<string, unknown>;
    const execution = node["execution"] as { command?: unknown } | undefined;
    if (node["type"] === "script" && typeof execution?.command === "string")
      found.push({ where: "script task <command>", text: execution.command });
    const se = node["scriptExecution"] as
      | { command?: unknown; call?: { templateName?: unknown; args?: { value?: unknown }[] } }
      | undefined;
    if (typeof se?.command === "string" && se.command.trim() !== "")
      found.push({ where: "<script_execution> <command>", text: se.command });
    const arg = se?.call?.templateName === "system:run_script" ? se.call.args?.[0]?.value : undefined;
    if (typeof arg === "string" && !isPath(arg.trim())) found.push({ where: '<call task="system:run_script">', text: arg });
    const fp = node["filePaths"] as { source?: unknown; command?: unknown } | undefined;
    if (fp?.source === "command" && typeof fp.command === "string")
      found.push({ where: '<file_paths source="command">', text: fp.command });
    for (const child of Object.values(node)) visit(child);
  };
  visit([document.entry, document.templates]);
  return found;
}

/** Why the document may not run under the allowlist `allow` (the first refused program, and where); undefined when it may. */
export function templateCommandRefusal(document: TemplateDocument, allow: readonly string[]): string | undefined {
  for (const { where, text } of templateCommands(document)) {
    const split = splitCommand(text.trim());
    const program = split.ok ? split.argv[0] : undefined;
    // A program named by a variable is only known at run time; the Handler checks it then.
    if (program === undefined || program.includes("{{")) continue;
    const refused = commandRefusal(program, allow);
    if (refused !== undefined) return `${where}: ${refused}`;
  }
  return undefined;
}
