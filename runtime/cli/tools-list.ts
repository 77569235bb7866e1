/** `dirigent tools list`: the tools a Handler started with this configuration offers, and where each comes from. */
import type { Command } from "commander";
import { loadConfig } from "../config.js";
import { configuredSources } from "../tools/configured.js";
import { composeTools, type ToolSource } from "../tools/source.js";
import { builtinToolInfo } from "../tools/toolset.js";
import { oneLine, table, type Write } from "./templates.js";

interface ListFlags {
  mcpConfig?: string;
  json?: boolean;
}

/** One tool as listed. */
export interface ListedTool {
  name: string;
  source: string;
  origin?: string;
  idempotent: boolean;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * The tools of a configuration: the enabled built-ins and the tools of the MCP servers (started to list them, then
 * closed). TypeScript tools exist only in the program that passes them to `startSystem`, so they are not here.
 * @throws {ToolSourceError} for a bad MCP configuration, a server that does not start, or a name taken twice.
 */
export async function listTools(flags: { mcpConfig?: string } = {}, env: NodeJS.ProcessEnv = process.env): Promise<ListedTool[]> {
  const config = loadConfig({ mcpConfig: flags.mcpConfig }, env);
  const builtins: ToolSource = {
    kind: "builtin",
    name: "the built-in tools",
    tools: config.tools.map((name) => ({ name, source: "builtin", ...builtinToolInfo(name), prepare: () => ({ ok: false, problems: "listed only" }) })),
    close: async () => {},
  };
  const composed = composeTools([builtins, ...(await configuredSources(config))]);
  try {
    return [...composed.specs.values()].map((s) => ({ name: s.name, source: s.source, ...(s.origin ? { origin: s.origin } : {}), idempotent: s.idempotent, description: s.description, parameters: s.parameters }));
  } finally {
    await composed.close();
  }
}

/** Registers `dirigent tools …`. */
export function registerToolsListCommand(program: Command, write: Write = (text) => process.stdout.write(text)): void {
  const tools = program.command("tools").description("the tools a Handler offers to the model: built-in, MCP servers (see docs/tools.md)");
  tools
    .command("list")
    .description("list the tools of this configuration with their source (starts the MCP servers to ask them)")
    .option("--mcp-config <file>", "MCP servers configuration (env DIRIGENT_MCP_CONFIG)")
    .option("--json", "print the tools as JSON (with their parameters)")
    .action(async (flags: ListFlags) => {
      const listed = await listTools(flags);
      if (flags.json) {
        write(JSON.stringify({ tools: listed }, null, 2) + "\n");
        return;
      }
      const rows = listed.map((t) => [t.name, t.origin ? `${t.source}:${t.origin}` : t.source, t.idempotent ? "yes" : "no", oneLine(t.description, 70)]);
      write(table(["NAME", "SOURCE", "IDEMPOTENT", "DESCRIPTION"], rows));
      write(`${listed.length} tool${listed.length === 1 ? "" : "s"}\n`);
    });
}
