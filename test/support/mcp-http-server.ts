/**
 * A Streamable HTTP MCP server for tests, built with the SDK's server classes (stateless, no session id: a server and
 * transport per request). Tools: `echo` (text), `picture` (an image and text), `fails` (isError), `stats` (structured content
 * only), `hang` (never answers).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

export interface TestMcpServer {
  url: string;
  /** Headers of the requests received (lower-case names). */
  headers: Record<string, string | string[] | undefined>[];
  close(): Promise<void>;
}

function buildServer(): McpServer {
  const server = new McpServer({ name: "test-http", version: "1.0.0" });
  server.registerTool("echo", { description: "Echo the text back.", inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } }, ({ text }) => ({
    content: [{ type: "text", text: `echo: ${text}` }],
  }));
  server.registerTool("picture", { description: "A picture.", inputSchema: {} }, () => ({
    content: [
      { type: "image", data: Buffer.alloc(1234).toString("base64"), mimeType: "image/png" },
      { type: "text", text: "a blank picture" },
    ],
  }));
  server.registerTool("fails", { description: "Always fails.", inputSchema: {} }, () => ({ content: [{ type: "text", text: "the database is down" }], isError: true }));
  server.registerTool("stats", { description: "Numbers.", inputSchema: {}, outputSchema: { count: z.number() } }, () => ({ content: [], structuredContent: { count: 3 } }));
  server.registerTool("hang", { description: "Never answers.", inputSchema: {} }, () => new Promise(() => {}));
  return server;
}

/** Starts the server on a free port of 127.0.0.1. */
export async function startTestMcpServer(): Promise<TestMcpServer> {
  const headers: TestMcpServer["headers"] = [];
  const http: Server = createServer((req, res) => {
    headers.push({ ...req.headers });
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST") {
        res.writeHead(405).end();
        return;
      }
      const server = buildServer();
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
      res.on("close", () => {
        void transport.close();
        void server.close();
      });
      void server
        .connect(transport)
        .then(() => transport.handleRequest(req, res, JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown))
        .catch(() => res.writeHead(500).end());
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    headers,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
