/** `dirigent templates list [DIR]` and `dirigent templates validate [DIR]`: the template library from the command line. */
import { stat } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { type LibraryError, type LoadedLibrary, loadLibrary } from "../../actors/library/library.js";
import { UsageError } from "./common.js";
import { counted } from "./output.js";
import { loadConfig } from "../config.js";

/** The starter library shipped with dirigent (`templates/` in the package). */
export const BUNDLED_TEMPLATES = fileURLToPath(new URL("../../../templates", import.meta.url));

/** Where the commands write their output (stdout by default; tests capture it). */
export type Write = (text: string) => void;

interface TemplateFlags {
  templates?: string;
  json?: boolean;
  warnings?: boolean;
}

/** `file:line:col: message`, the way compilers print it. */
export function formatLibraryError(error: LibraryError, severity?: "warning"): string {
  const at = error.line === undefined ? "" : `:${error.line}:${error.col ?? 1}`;
  return `${error.file}${at}: ${severity ? `${severity}: ` : ""}${error.message}`;
}

/** Registers `dirigent templates …`. */
export function registerTemplateCommands(program: Command, write: Write = (text) => process.stdout.write(text)): void {
  const templates = program
    .command("templates")
    .description("the template library: task templates matched to atomic tasks and subtasks (see docs/task-language.md)");

  templates
    .command("list")
    .description("list the templates of a library: name, type:subtype, file, description")
    .argument("[dir]", "templates directory (default: --templates, DIRIGENT_TEMPLATES or 'templates')")
    .option("--templates <dir>", "templates directory (env DIRIGENT_TEMPLATES)")
    .option("--json", "print the templates as JSON")
    .action(async (dir: string | undefined, flags: TemplateFlags) => {
      const { loaded, where } = await load(dir, flags);
      const { library, errors } = loaded;
      if (flags.json) {
        const rows = library.templates.map(({ name, type, subtype, file, description }) => ({
          name,
          type,
          ...(subtype ? { subtype } : {}),
          file,
          description,
        }));
        write(JSON.stringify({ dir: where, templates: rows, errors }, null, 2) + "\n");
      } else {
        const rows = library.templates.map((t) => [
          t.name,
          t.subtype ? `${t.type}:${t.subtype}` : t.type,
          t.file,
          oneLine(t.description, 70),
        ]);
        write(table(["NAME", "TYPE", "FILE", "DESCRIPTION"], rows));
        write(`${counted(library.templates.length, "template")} in ${where}\n`);
        for (const e of errors) process.stderr.write(formatLibraryError(e) + "\n");
      }
      if (errors.length > 0) process.exitCode = 1;
    });

  templates
    .command("validate")
    .description("parse and check every template file; print each problem as file:line:col: message (exit 1 when any)")
    .argument("[dir]", "templates directory or one .xml file (default: --templates, DIRIGENT_TEMPLATES or 'templates')")
    .option("--templates <dir>", "templates directory (env DIRIGENT_TEMPLATES)")
    .option("--warnings", "also print the parser's warnings (unsupported elements, …)")
    .option("--json", "print the result as JSON")
    .action(async (dir: string | undefined, flags: TemplateFlags) => {
      const { loaded, where } = await load(dir, flags);
      const { library, errors, warnings } = loaded;
      const files = new Set(library.templates.map((t) => t.file)).size;
      if (flags.json) {
        write(
          JSON.stringify({ dir: where, ok: errors.length === 0, templates: library.templates.length, errors, warnings }, null, 2) + "\n",
        );
      } else {
        for (const e of errors) write(formatLibraryError(e) + "\n");
        if (flags.warnings) for (const w of warnings) write(formatLibraryError(w, "warning") + "\n");
        write(
          errors.length === 0
            ? `ok: ${counted(library.templates.length, "template")} in ${counted(files, "file")} (${where})\n`
            : `${counted(errors.length, "error")}; ${counted(library.templates.length, "valid template")} (${where})\n`,
        );
      }
      if (errors.length > 0) process.exitCode = 1;
    });
}

/** The directory (argument, else `--templates`, else the config), which must exist: a missing one is a usage error. */
async function load(dir: string | undefined, flags: TemplateFlags): Promise<{ loaded: LoadedLibrary; where: string }> {
  if (dir !== undefined && flags.templates !== undefined && dir !== flags.templates) {
    throw new UsageError(`give the templates directory once: '${dir}' or --templates '${flags.templates}'`);
  }
  const where = dir ?? loadConfig({ templates: flags.templates }).templates;
  if (where.trim() === "") throw new UsageError("the templates directory must not be empty");
  const exists = await stat(where).then(
    () => true,
    () => false,
  );
  if (!exists)
    throw new UsageError(
      `templates directory '${where}' does not exist (give one as an argument, with --templates DIR or DIRIGENT_TEMPLATES)`,
    );
  return { loaded: await loadLibrary(where, { required: true }), where };
}

export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd() + "\n";
  return [header, ...rows].map(line).join("");
}
