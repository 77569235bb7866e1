/**
 * The MCP configuration file (`--mcp-config FILE`, `DIRIGENT_MCP_CONFIG`), in the format other MCP clients use:
 * `{"mcpServers": {"NAME": {"command", "args", "env", "cwd"}}}` for a stdio server the Handler starts,
 * `{"mcpServers": {"NAME": {"url", "headers"}}}` for a Streamable HTTP server. Keys other clients add (`disabled`,
 * `type`, …) are allowed; `"disabled": true` leaves a server out. `${VAR}` in `env` and `headers` values is
 * replaced by the variable of the Handler's environment (a missing one is an error), so secrets stay out of the file.
 */
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { z } from "zod";
import { ToolSourceError } from "./source.js";
import { messageOf } from "../../protocol/errors.js";

const Strings = z.record(z.string(), z.string());
const Limits = {
  /** Per-call timeout of this server's tools (ms). */
  timeoutMs: z.int().positive().optional(),
  /** Result cap of this server's tools (bytes). */
  maxResultBytes: z.int().positive().optional(),
  /** Leave this server out. */
  disabled: z.boolean().optional(),
};

/** A stdio server: a program the Handler starts, speaking MCP on its stdin and stdout. */
export const StdioServer = z.object({
  type: z.literal("stdio").optional(),
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  /** The server's whole environment besides HOME, LOGNAME, PATH, SHELL, TERM and USER: nothing else of the Handler's. */
  env: Strings.default({}),
  /** Working directory; relative to the configuration file's directory. */
  cwd: z.string().min(1).optional(),
  /** Start it in the sandbox of `run_script` (DIRIGENT_SANDBOX, its network and read-only paths; cwd in the workspace). */
  sandbox: z.boolean().optional(),
  ...Limits,
});
export type StdioServer = z.infer<typeof StdioServer>;

/** A Streamable HTTP server. */
export const HttpServer = z.object({
  type: z.enum(["http", "streamable-http", "streamableHttp"]).optional(),
  url: z.url({ protocol: /^https?$/ }),
  headers: Strings.default({}),
  ...Limits,
});
export type HttpServer = z.infer<typeof HttpServer>;

export type McpServer = StdioServer | HttpServer;

export const McpConfigFile = z.object({
  mcpServers: z.record(z.string().min(1), z.unknown()).default({}),
  /** Remote A2A agents whose skills are tools (`runtime/tools/a2a-agents.ts`). */
  a2aAgents: z.record(z.string().min(1), z.unknown()).optional(),
});

/** Servers by name, with the values taken from the environment (`${VAR}`): secrets, masked in every tool answer. */
export type McpConfig = Record<string, McpServer> & { readonly [SECRETS]?: readonly string[] };

/** Where {@link parseMcpConfig} keeps the values it took from the environment. */
export const SECRETS: unique symbol = Symbol("secrets");

/**
 * Reads and checks an MCP configuration file.
 * @throws {ToolSourceError} naming the file and the key of each problem.
 */
export async function loadMcpConfig(file: string, env: NodeJS.ProcessEnv = process.env): Promise<McpConfig> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new ToolSourceError(
      `MCP configuration ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)}) (--mcp-config / DIRIGENT_MCP_CONFIG)`,
    );
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ToolSourceError(`MCP configuration ${file}: not JSON (${messageOf(err)})`);
  }
  return parseMcpConfig(raw, file, env);
}

/**
 * Checks a parsed MCP configuration (`where` names it in errors).
 * @throws {ToolSourceError} naming each problem's key.
 */
export function parseMcpConfig(raw: unknown, where: string, env: NodeJS.ProcessEnv = process.env): McpConfig {
  const problems: string[] = [];
  const top = McpConfigFile.safeParse(raw);
  if (!top.success)
    throw new ToolSourceError(
      `MCP configuration ${where}: ${issues(top.error, "")}; expected {"mcpServers": {"NAME": {"command": ...} or {"url": ...}}}`,
    );
  const servers: Record<string, McpServer> = {};
  const secrets: string[] = [];
  for (const [name, entry] of Object.entries(top.data.mcpServers)) {
    const at = `mcpServers.${name}`;
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
      problems.push(`${at}: must be an object`);
      continue;
    }
    const hasCommand = "command" in entry;
    const hasUrl = "url" in entry;
    if (hasCommand === hasUrl) {
      problems.push(`${at}: needs either "command" (a stdio server) or "url" (a Streamable HTTP server)${hasCommand ? ", not both" : ""}`);
      continue;
    }
    const parsed = hasCommand ? StdioServer.safeParse(entry) : HttpServer.safeParse(entry);
    if (!parsed.success) {
      problems.push(issues(parsed.error, at));
      continue;
    }
    if (parsed.data.disabled) continue;
    const expand = (values: Record<string, string>, key: string) =>
      Object.fromEntries(
        Object.entries(values).map(([k, v]) => [
          k,
          v.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, variable: string) => {
            const value = env[variable];
            if (value !== undefined) secrets.push(value);
            if (value === undefined) problems.push(`${at}.${key}.${k}: the environment variable ${variable} is not set`);
            return value ?? "";
          }),
        ]),
      );
    if ("command" in parsed.data) {
      const server = parsed.data;
      servers[name] = {
        ...server,
        env: expand(server.env, "env"),
        ...(server.cwd ? { cwd: resolve(dirname(resolve(where)), server.cwd) } : {}),
      };
    } else {
      servers[name] = { ...parsed.data, headers: expand(parsed.data.headers, "headers") };
    }
  }
  if (problems.length > 0) throw new ToolSourceError(`MCP configuration ${where}: ${problems.join("; ")}`);
  return Object.assign(servers, { [SECRETS]: secrets });
}

function issues(error: z.ZodError, at: string): string {
  return error.issues.map((i) => `${[at, ...i.path.map(String)].filter((p) => p !== "").join(".") || "(top)"}: ${i.message}`).join("; ");
}
