/** `dirigent machines export`: every machine's chart as Mermaid, JSON or the Markdown of docs/machines.md. */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Command } from "commander";
import { UsageError } from "./common.js";
import { machineGraph, type MachineGraph } from "../charts/graph.js";
import { machinesMarkdown } from "../charts/doc.js";
import { toMermaid } from "../charts/mermaid.js";
import { machines } from "../charts/registry.js";

/** The formats `dirigent machines export --format` accepts. */
export const EXPORT_FORMATS = ["mermaid", "json", "markdown"] as const;

/** One of {@link EXPORT_FORMATS}. */
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** Checks a `--format` value; anything else is a {@link UsageError} listing the accepted formats. */
export function parseExportFormat(value: string): ExportFormat {
  const format = EXPORT_FORMATS.find((f) => f === value);
  if (!format) throw new UsageError(`--format '${value}': expected one of ${EXPORT_FORMATS.join(", ")}`);
  return format;
}

function json(graph: MachineGraph): string {
  return JSON.stringify(graph, null, 2) + "\n";
}

/**
 * The export as text for stdout: Mermaid charts one after another, each headed by a `%% <name>` comment; JSON as
 * one object keyed by machine name; Markdown as docs/machines.md.
 */
export function exportText(format: ExportFormat): string {
  if (format === "markdown") return machinesMarkdown(machines);
  if (format === "json") return JSON.stringify(Object.fromEntries(machines.map((m) => [m.name, machineGraph(m.machine)])), null, 2) + "\n";
  return machines.map((m) => `%% ${m.name}\n${toMermaid(machineGraph(m.machine))}`).join("\n");
}

/** The export as files: `<name>.mmd` or `<name>.json` per machine, or `machines.md` for Markdown. */
export function exportFiles(format: ExportFormat): Record<string, string> {
  if (format === "markdown") return { "machines.md": machinesMarkdown(machines) };
  const ext = format === "json" ? "json" : "mmd";
  return Object.fromEntries(
    machines.map((m) => {
      const graph = machineGraph(m.machine);
      return [`${m.name}.${ext}`, format === "json" ? json(graph) : toMermaid(graph)];
    }),
  );
}

/** Registers `dirigent machines export`. */
export function registerMachineCommands(program: Command): void {
  const group = program.command("machines").description("the XState machines of the runtime");
  group
    .command("export")
    .description("print every machine's chart (or write one file per machine to a directory)")
    .option("--format <format>", `output format: ${EXPORT_FORMATS.join("|")}`, "mermaid")
    .option("--out <dir>", "write <name>.mmd / <name>.json per machine into this directory")
    .action(async (flags: { format: string; out?: string }) => {
      const format = parseExportFormat(flags.format);
      if (!flags.out) {
        process.stdout.write(exportText(format));
        return;
      }
      const files = exportFiles(format);
      await mkdir(flags.out, { recursive: true });
      for (const [name, text] of Object.entries(files)) await writeFile(join(flags.out, name), text);
      process.stderr.write(`dirigent: wrote ${Object.keys(files).length} files to ${flags.out}\n`);
    });
}
