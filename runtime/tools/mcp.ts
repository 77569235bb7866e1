/**
 * MCP servers as tool sources, through the official client (`@modelcontextprotocol/sdk`). Each server is started
 * (stdio) or connected to (Streamable HTTP) once per Handler process, at start: its tools are listed then and
 * offered as `SERVER__TOOL` with the server's own description and input schema. A server that died (its process
 * ended, its connection closed) is started again by the next call of one of its tools; all are closed when the
 * Handler stops. A call's result goes back as text: its text content, structured content when there is no text,
 * other content described (`[image/png, 1234 bytes]`), `isError` as `error: …`.
 *
 * A stdio server is a program the operator configured, started with a cleared environment (HOME, LOGNAME, PATH,
 * SHELL, TERM and USER, plus what its `env` lists: no secret of the Handler's own environment, which its caller has
 * blanked in the Handler's `/proc/<pid>/environ` too: runtime/tools/configured.ts), outside the sandbox of
 * `run_script` unless it asks for it with `"sandbox": true` (docs/tools.md says why).
 */
import { createHash } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { Logger } from "../../actors/deps.js";
import type { Sandbox } from "./sandbox.js";
import { silentLogger } from "../../actors/deps.js";
import { ToolSourceError, type ToolSource, type ToolSpec } from "./source.js";
import { SECRETS, type McpConfig, type McpServer, type StdioServer } from "./mcp-config.js";
import { messageOf } from "../../protocol/errors.js";

/** Longest a server may take to start and list its tools. */
export const MCP_START_TIMEOUT_MS = 30_000;

/** Lines of a stdio server's stderr kept to explain a failed start. */
const STDERR_LINES = 20;

/** The sandbox of servers configured with `"sandbox": true`: the Handler's, around its workspace. */
export interface McpSandbox {
  sandbox: Sandbox;
  /** The workspace's real path: bound read-write, the default working directory. */
  workspace: string;
}

/** Options of {@link startMcpSources}. */
export interface McpOptions {
  log?: Logger;
  /** For servers with `"sandbox": true`; such a server does not start without it. */
  sandbox?: McpSandbox;
  /** Longest a server may take to start and list its tools; {@link MCP_START_TIMEOUT_MS} by default. */
  startTimeoutMs?: number;
}

/** The name a server's tool reaches the model by: `SERVER__TOOL`, made to fit `^[a-zA-Z0-9_-]{1,64}$`. */
export function mcpToolName(server: string, tool: string): string {
  const safe = (s: string) => s.replace(/[^a-zA-Z0-9_-]/g, "_");
  const name = `${safe(server)}__${safe(tool)}`;
  if (name.length <= 64) return name;
  const hash = createHash("sha256").update(`${server}\0${tool}`).digest("hex").slice(0, 8);
  return `${name.slice(0, 55)}_${hash}`;
}

/** One server's connection, made again when it was lost. */
class Connection {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  /** The client being connected: closed by {@link close} even before it answered. */
  private starting: Client | undefined;
  private closed = false;
  readonly stderr: string[] = [];

  constructor(
    readonly name: string,
    private readonly server: McpServer,
    private readonly log: Logger,
    private readonly sandbox: McpSandbox | undefined,
  ) {}

  /** The stdio transport of a server: its program, or `bwrap` around it when it asks for the sandbox. */
  private stdio(server: StdioServer): StdioClientTransport {
    if (!server.sandbox)
      return new StdioClientTransport({
        command: server.command,
        args: server.args,
        env: server.env,
        stderr: "pipe",
        ...(server.cwd ? { cwd: server.cwd } : {}),
      });
    if (!this.sandbox) throw new Error('"sandbox": true, but this process has no sandbox for it');
    const path = process.env["PATH"];
    const wrapped = this.sandbox.sandbox.wrap({
      workspace: this.sandbox.workspace,
      cwd: server.cwd ?? this.sandbox.workspace,
      argv: [server.command, ...server.args],
      env: { ...(path === undefined ? {} : { PATH: path }), HOME: this.sandbox.workspace, ...server.env },
    });
    return new StdioClientTransport({ command: wrapped.command, args: wrapped.args, env: wrapped.env, stderr: "pipe" });
  }

  /** The live client, connecting (again) when there is none. */
  get(): Promise<Client> {
    if (this.closed) return Promise.reject(new Error(`MCP server '${this.name}' is closed (the Handler is stopping)`));
    if (this.client) return Promise.resolve(this.client);
    return (this.connecting ??= this.connect().finally(() => (this.connecting = undefined)));
  }

  private async connect(): Promise<Client> {
    const client = new Client({ name: "dirigent", version: "1" });
    const transport =
      "command" in this.server
        ? this.stdio(this.server)
        : new StreamableHTTPClientTransport(new URL(this.server.url), { requestInit: { headers: this.server.headers } });
    if (transport instanceof StdioClientTransport) {
      transport.stderr?.on("data", (chunk: Buffer) => {
        for (const line of chunk.toString("utf8").split("\n")) {
          if (line.trim() === "") continue;
          this.stderr.push(line);
          if (this.stderr.length > STDERR_LINES) this.stderr.shift();
          this.log.debug({ mcpServer: this.name }, line);
        }
      });
    }
    client.onclose = () => {
      if (this.client === client) {
        this.client = undefined;
        if (!this.closed)
          this.log.warn(
            { mcpServer: this.name },
            `MCP server '${this.name}' closed its connection; the next call of one of its tools starts it again`,
          );
      }
    };
    this.starting = client;
    try {
      await client.connect(transport);
    } catch (err) {
      await client.close().catch(() => {});
      throw err;
    } finally {
      this.starting = undefined;
    }
    if (this.closed) {
      await client.close().catch(() => {});
      throw new Error(`MCP server '${this.name}' is closed (the Handler is stopping)`);
    }
    this.client = client;
    return client;
  }

  async close(): Promise<void> {
    this.closed = true;
    const clients = [this.client, this.starting].filter((c): c is Client => c !== undefined);
    this.client = undefined;
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
  }
}

/** Lists every tool of a server (all pages). */
async function listTools(client: Client, signal: AbortSignal): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : {}, { signal });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

/** Starts one server and lists its tools. */
async function startServer(name: string, server: McpServer, options: McpOptions, validator: AjvJsonSchemaValidator): Promise<ToolSource> {
  const log = options.log ?? silentLogger;
  const connection = new Connection(name, server, log, options.sandbox);
  const timeoutMs = options.startTimeoutMs ?? MCP_START_TIMEOUT_MS;
  let tools: Tool[];
  try {
    const signal = AbortSignal.timeout(timeoutMs);
    const timedOut = new Promise<never>((_, reject) =>
      signal.addEventListener("abort", () => reject(new Error(`no answer within ${timeoutMs} ms`)), { once: true }),
    );
    // Once the server answered, the timeout firing later rejects nothing anyone waits for.
    timedOut.catch(() => {});
    const client = await Promise.race([connection.get(), timedOut]);
    tools = await Promise.race([listTools(client, signal), timedOut]);
  } catch (err) {
    await connection.close();
    const said = connection.stderr.length ? `; its stderr: ${connection.stderr.join(" | ")}` : "";
    const what = "command" in server ? `'${[server.command, ...server.args].join(" ")}'` : server.url;
    throw new ToolSourceError(`MCP server '${name}' (${what}) did not start: ${messageOf(err)}${said}`);
  }
  const specs: ToolSpec[] = [];
  for (const tool of tools) {
    // As the model API wants it: no `$schema`, and `properties` even when there are none.
    const { $schema: _dialect, ...given } = tool.inputSchema as Record<string, unknown>;
    const schema: Record<string, unknown> = { ...given, properties: given["properties"] ?? {} };
    // A tool whose schema is unusable is left out (logged): the server's other tools stay offered.
    let check: (args: unknown) => { valid: boolean; errorMessage?: string | undefined };
    try {
      if (schema["type"] !== "object") throw new Error(`its type is '${String(schema["type"])}', not 'object'`);
      check = validator.getValidator(schema as Parameters<AjvJsonSchemaValidator["getValidator"]>[0]);
    } catch (err) {
      log.error(
        { mcpServer: name, tool: tool.name },
        `MCP server '${name}': tool '${tool.name}' left out: its input schema is not a usable JSON Schema (${messageOf(err)})`,
      );
      continue;
    }
    const annotations = tool.annotations ?? {};
    const toolTimeout = server.timeoutMs;
    specs.push({
      name: mcpToolName(name, tool.name),
      source: "mcp",
      origin: name,
      description: tool.description ?? tool.title ?? annotations.title ?? `Tool '${tool.name}' of the MCP server '${name}'.`,
      parameters: schema,
      idempotent: annotations.readOnlyHint === true || annotations.idempotentHint === true,
      ...(toolTimeout === undefined ? {} : { timeoutMs: toolTimeout }),
      ...(server.maxResultBytes === undefined ? {} : { maxResultBytes: server.maxResultBytes }),
      prepare(args) {
        if (args === null || typeof args !== "object" || Array.isArray(args))
          return { ok: false, problems: "(arguments): expected a JSON object" };
        const checked = check(args);
        if (!checked.valid) return { ok: false, problems: checked.errorMessage ?? "they do not match the tool's input schema" };
        return {
          ok: true,
          run: async (signal) => {
            const client = await connection.get();
            // The toolset's timeout ends the call first.
            const result = (await client.callTool({ name: tool.name, arguments: args as Record<string, unknown> }, undefined, {
              signal,
              timeout: 24 * 3600_000,
            })) as CallToolResult;
            return formatResult(result);
          },
        };
      },
    });
  }
  log.info({ mcpServer: name, tools: specs.length }, `MCP server '${name}' started with ${specs.length} tools`);
  return { kind: "mcp", name: `the MCP server '${name}'`, tools: specs, close: () => connection.close() };
}

/**
 * Starts every server of `config` (at once) and lists their tools.
 * @throws {ToolSourceError} naming each server that did not start (the others are closed again).
 */
export async function startMcpSources(config: McpConfig, options: McpOptions = {}): Promise<ToolSource[]> {
  const validator = new AjvJsonSchemaValidator();
  const settled = await Promise.allSettled(Object.entries(config).map(([name, server]) => startServer(name, server, options, validator)));
  const failed = settled.flatMap((s) => (s.status === "rejected" ? [s.reason instanceof Error ? s.reason.message : String(s.reason)] : []));
  const secrets = config[SECRETS] ?? [];
  const sources = settled.flatMap((s) => (s.status === "fulfilled" ? [{ ...s.value, secrets }] : []));
  if (failed.length > 0) {
    await Promise.allSettled(sources.map((s) => s.close()));
    throw new ToolSourceError(failed.join("; "));
  }
  return sources;
}

/** The text of a tool result for the model. */
export function formatResult(result: CallToolResult): string {
  const parts: string[] = [];
  for (const item of result.content ?? []) {
    switch (item.type) {
      case "text":
        parts.push(item.text);
        break;
      case "image":
      case "audio":
        parts.push(`[${item.type}: ${item.mimeType}, ${base64Bytes(item.data)} bytes, not shown]`);
        break;
      case "resource": {
        const r = item.resource;
        if ("text" in r && typeof r.text === "string") parts.push(`[resource ${r.uri}${r.mimeType ? `, ${r.mimeType}` : ""}]\n${r.text}`);
        else
          parts.push(
            `[resource ${r.uri}${r.mimeType ? `, ${r.mimeType}` : ""}, ${"blob" in r && typeof r.blob === "string" ? base64Bytes(r.blob) : 0} bytes, not shown]`,
          );
        break;
      }
      case "resource_link":
        parts.push(`[resource link: ${item.uri}${item.name ? ` (${item.name})` : ""}${item.mimeType ? `, ${item.mimeType}` : ""}]`);
        break;
      default:
        parts.push(`[${String((item as { type?: unknown }).type)} content, not shown]`);
    }
  }
  if (parts.length === 0 && result.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent));
  const text = parts.join("\n");
  return result.isError ? `error: ${text || "the tool failed (no message)"}` : text;
}

const base64Bytes = (data: string) => Math.floor((data.replace(/=+$/, "").length * 3) / 4);
