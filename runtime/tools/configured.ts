/**
 * The tool sources a configuration names besides the built-in tools: the MCP servers and A2A agents of
 * `DIRIGENT_MCP_CONFIG`, and the NATS services' tools when `DIRIGENT_NATS_TOOLS` is on.
 */
import { realpath } from "node:fs/promises";
import type { Logger } from "../../actors/deps.js";
import { DEFAULTS, type Config } from "../config.js";
import { blankInitialEnvironment, hiddenPaths, SECRET_ENV_NAMES, secretValues } from "../secrets.js";
import { providerKeys } from "../model/providers.js";
import { loadMcpConfig, SECRETS } from "./mcp-config.js";
import type { McpSandbox } from "./mcp.js";
import { createSandbox, unavailableMessage } from "./sandbox.js";
import { ToolSourceError, type ToolSource } from "./source.js";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Subjects } from "../../protocol/index.js";

type SourceConfig = Pick<
  Config,
  "mcpConfig" | "workspaceRoot" | "sandbox" | "sandboxNetwork" | "sandboxReadOnly" | "natsPasswordFile" | "natsCreds" | "dataDir"
> &
  Partial<Pick<Config, "natsTools" | "toolDiscoveryMs" | "natsToolAllow" | "openaiApiKey" | "natsPassword" | "natsToken" | "providers">>;

/**
 * Starts the configured sources. Servers with `"sandbox": true` run in the sandbox of `run_script`. The MCP and A2A
 * clients (their SDKs) are loaded only when `DIRIGENT_MCP_CONFIG` is set, the NATS services' discovery only when
 * `DIRIGENT_NATS_TOOLS` is on: not by every process.
 * @throws {ToolSourceError} when the MCP configuration is bad, a server does not start, or one asks for a sandbox
 * this host cannot give.
 */
export async function configuredSources(
  config: SourceConfig,
  log?: Logger,
  nats?: { connection: NatsConnection; subjects: Subjects },
): Promise<ToolSource[]> {
  const mcp = await mcpSources(config, log);
  const file = config.mcpConfig;
  const a2a =
    file === undefined
      ? []
      : await import("./a2a-agents.js")
          .then(async ({ loadA2aAgents, startA2aSources }) => startA2aSources(await loadA2aAgents(file), log))
          .catch(async (err: unknown) => {
            await Promise.allSettled(mcp.map((s) => s.close()));
            throw err;
          });
  mcp.push(...a2a);
  if (config.natsTools !== "on") return mcp;
  if (nats === undefined) {
    await Promise.allSettled(mcp.map((s) => s.close()));
    throw new ToolSourceError("DIRIGENT_NATS_TOOLS=on, but this process has no NATS connection (it runs on the in-process bus)");
  }
  const { startNatsToolSource } = await import("./nats-services.js");
  const found = await startNatsToolSource(nats.connection, {
    subjects: nats.subjects,
    rediscoverMs: config.toolDiscoveryMs ?? DEFAULTS.toolDiscoveryMs,
    allow: config.natsToolAllow ?? [],
    ...(log ? { log } : {}),
  });
  return [...mcp, found];
}

/**
 * The MCP servers of `DIRIGENT_MCP_CONFIG`, started once this process's initial environment holds none of the secrets
 * it knows, the values of the configuration's `${VAR}` among them: a stdio server reads it in `/proc/$PPID/environ`.
 */
async function mcpSources(config: SourceConfig, log?: Logger): Promise<ToolSource[]> {
  if (config.mcpConfig === undefined) return [];
  const servers = await loadMcpConfig(config.mcpConfig);
  const secrets = [...secretValues(config), ...providerKeys({ providers: config.providers ?? {} }), ...(servers[SECRETS] ?? [])];
  const kept = blankInitialEnvironment(SECRET_ENV_NAMES, secrets);
  if (kept !== undefined && Object.values(servers).some((s) => "command" in s && !s.sandbox))
    log?.warn({}, `MCP servers outside the sandbox may read this process's secrets in its environment: ${kept}`);
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
  const { startMcpSources } = await import("./mcp.js");
  return startMcpSources(servers, { ...(log ? { log } : {}), ...(sandbox ? { sandbox } : {}) });
}
