/** The tool sources a configuration names besides the built-in tools: the MCP servers of `DIRIGENT_MCP_CONFIG`. */
import type { Logger } from "../../actors/deps.js";
import type { Config } from "../config.js";
import { loadMcpConfig } from "./mcp-config.js";
import { startMcpSources } from "./mcp.js";
import type { ToolSource } from "./source.js";

/**
 * Starts the configured sources.
 * @throws {ToolSourceError} when the MCP configuration is bad or a server does not start.
 */
export async function configuredSources(config: Pick<Config, "mcpConfig">, log?: Logger): Promise<ToolSource[]> {
  if (config.mcpConfig === undefined) return [];
  return startMcpSources(await loadMcpConfig(config.mcpConfig), log ? { log } : {});
}
