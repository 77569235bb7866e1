/** The tool sources a configuration names besides the built-in tools: the MCP servers of `DIRIGENT_MCP_CONFIG`. */
import { realpath } from "node:fs/promises";
import type { Logger } from "../../actors/deps.js";
import type { Config } from "../config.js";
import { hiddenPaths } from "../secrets.js";
import { loadMcpConfig } from "./mcp-config.js";
import { startMcpSources, type McpSandbox } from "./mcp.js";
import { createSandbox, unavailableMessage } from "./sandbox.js";
import { ToolSourceError, type ToolSource } from "./source.js";

type SourceConfig = Pick<
  Config,
  "mcpConfig" | "workspaceRoot" | "sandbox" | "sandboxNetwork" | "sandboxReadOnly" | "natsPasswordFile" | "natsCreds" | "dataDir"
>;

/**
 * Starts the configured sources. Servers with `"sandbox": true` run in the sandbox of `run_script`.
 * @throws {ToolSourceError} when the MCP configuration is bad, a server does not start, or one asks for a sandbox
 * this host cannot give.
 */
export async function configuredSources(config: SourceConfig, log?: Logger): Promise<ToolSource[]> {
  if (config.mcpConfig === undefined) return [];
  const servers = await loadMcpConfig(config.mcpConfig);
  let sandbox: McpSandbox | undefined;
  if (Object.values(servers).some((s) => "command" in s && s.sandbox)) {
    const made = await createSandbox({
      mode: config.sandbox,
      network: config.sandboxNetwork === "on",
      readOnly: config.sandboxReadOnly,
      hidden: hiddenPaths(config),
    });
    if (made.unavailable !== undefined)
      throw new ToolSourceError(
        `MCP configuration ${config.mcpConfig}: a server asks for the sandbox, and ${unavailableMessage(made.unavailable)}`,
      );
    if (made.mode === "unsandboxed")
      log?.warn({ sandbox: "unsandboxed" }, 'DIRIGENT_SANDBOX=unsandboxed: MCP servers with "sandbox": true run WITHOUT isolation');
    sandbox = { sandbox: made, workspace: await realpath(config.workspaceRoot) };
  }
  return startMcpSources(servers, { ...(log ? { log } : {}), ...(sandbox ? { sandbox } : {}) });
}
