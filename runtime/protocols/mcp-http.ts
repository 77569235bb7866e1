/**
 * The Streamable HTTP side of `dirigent mcp --http PORT`: one MCP session (a server and its transport) per client,
 * found again by its `mcp-session-id`, at `/mcp`. Every request passes the rules of `http-guard.ts` first.
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { listenGuarded, SECURITY_HEADERS } from "../inspect/guard.js";
import { checkListen, refuse } from "./http-guard.js";
import { messageOf } from "../../protocol/errors.js";

/** Most open sessions at once; a new session past it is refused until one ends. */
export const MAX_MCP_SESSIONS = 64;

/** Options of {@link startMcpHttp}. */
export interface McpHttpOptions {
  /** A new MCP server for each session. */
  newServer: () => Server;
  /** TCP port; 0 picks a free one. */
  port: number;
  /** Interface; `127.0.0.1` by default. Any other than loopback needs `token`. */
  host?: string;
  /** More `Host` names answered (`--allowed-host`). */
  allowedHosts?: readonly string[];
  /** Bearer token every request must carry. */
  token?: string;
  /** Told of a request that failed inside the transport. */
  onError?: (err: unknown) => void;
}

/** A running MCP HTTP server. */
export interface McpHttpServer {
  /** `http://<host>:<port>/mcp`. */
  readonly url: string;
  close(): Promise<void>;
}

const json = (res: ServerResponse, status: number, code: number, message: string) =>
  res
    .writeHead(status, { ...SECURITY_HEADERS, "content-type": "application/json" })
    .end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += buf.length;
    if (size > 4 * 1024 * 1024) throw new Error("request body over 4 MiB");
    chunks.push(buf);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/** Starts the HTTP server; rejects when the address is not allowed or the port is taken. */
export async function startMcpHttp(options: McpHttpOptions): Promise<McpHttpServer> {
  const host = options.host ?? "127.0.0.1";
  checkListen(host, options.token, "MCP server");
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: Server }>();
  let hosts = new Set<string>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (refuse(req, res, hosts, options.token)) return;
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/mcp") return json(res, 404, -32000, "not found: the MCP endpoint is /mcp");
    const sessionId = req.headers["mcp-session-id"];
    const session = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
    if (session) return session.transport.handleRequest(req, res);
    if (sessionId !== undefined) return json(res, 404, -32001, "session not found: initialize a new one");
    if (req.method !== "POST") return json(res, 400, -32000, "no session: start one with an initialize request");
    let body: unknown;
    try {
      body = await readJson(req);
    } catch (err) {
      return json(res, 400, -32700, `parse error: ${messageOf(err)}`);
    }
    if (!isInitializeRequest(body)) return json(res, 400, -32000, "no session: start one with an initialize request");
    if (sessions.size >= MAX_MCP_SESSIONS) return json(res, 503, -32000, `too many sessions (${MAX_MCP_SESSIONS}): close one first`);
    const server = options.newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      options.onError?.(err);
      if (!res.headersSent) json(res, 500, -32603, "internal error");
      else res.end();
    });
  });
  const listening = await listenGuarded(http, options.port, host, options.allowedHosts ?? []);
  hosts = listening.hosts;
  return {
    url: `${listening.base}/mcp`,
    close: async () => {
      await Promise.allSettled([...sessions.values()].map((s) => s.server.close()));
      sessions.clear();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
