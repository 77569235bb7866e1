/**
 * A Streamable HTTP MCP server for tests, built with the SDK's server classes (stateless, no session id: a server and
 * transport per request). Tools: `echo` (text), `picture` (an image and text), `fails` (isError), `stats` (structured content
 * only), `hang` (never answers), `lookup` (read-only) and `note` (not idempotent; never answers its first call),
 * counted in {@link TestMcpServer.calls}.
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
  /** Calls of each tool so far. */
  calls: Record<string, number>;
  /** Resolves once the tool `name` has been called `count` times. */
  called(name: string, count?: number): Promise<void>;
  close(): Promise<void>;
}

interface Counter {
  calls: Record<string, number>;
  count(name: string): number;
}

function buildServer(counter: Counter): McpServer {
  const server = new McpServer({ name: "test-http", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Echo the text back.", inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } },
    ({ text }) => ({
      content: [{ type: "text", text: `echo: ${text}` }],
    }),
  );
  server.registerTool("picture", { description: "A picture.", inputSchema: {} }, () => ({
    content: [
      { type: "image", data: Buffer.alloc(1234).toString("base64"), mimeType: "image/png" },
      { type: "text", text: "a blank picture" },
    ],
  }));
  server.registerTool("fails", { description: "Always fails.", inputSchema: {} }, () => ({
    content: [{ type: "text", text: "the database is down" }],
    isError: true,
  }));
  server.registerTool("stats", { description: "Numbers.", inputSchema: {}, outputSchema: { count: z.number() } }, () => ({
    content: [],
    structuredContent: { count: 3 },
  }));
  server.registerTool("hang", { description: "Never answers.", inputSchema: {} }, () => new Promise(() => {}));
  server.registerTool(
    "lookup",
    { description: "Looks a word up.", inputSchema: { word: z.string() }, annotations: { readOnlyHint: true } },
    ({ word }) => {
      counter.count("lookup");
      return { content: [{ type: "text", text: `${word}: a word` }] };
    },
  );
  server.registerTool(
    "note",
    { description: "Takes a note.", inputSchema: { text: z.string() }, annotations: { readOnlyHint: false, idempotentHint: false } },
    ({ text }) => (counter.count("note") === 1 ? new Promise(() => {}) : { content: [{ type: "text", text: `noted: ${text}` }] }),
  );
  return server;
}

/** Starts the server on a free port of 127.0.0.1. */
export async function startTestMcpServer(): Promise<TestMcpServer> {
  const headers: TestMcpServer["headers"] = [];
  const calls: Record<string, number> = {};
  const waiters: Array<{ name: string; count: number; resolve: () => void }> = [];
  const counter: Counter = {
    calls,
    count(name) {
      calls[name] = (calls[name] ?? 0) + 1;
      for (const w of waiters.filter((x) => x.name === name && x.count <= (calls[name] ?? 0))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      return calls[name];
    },
  };
  const http: Server = createServer((req, res) => {
    headers.push({ ...req.headers });
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST") {
        res.writeHead(405).end();
        return;
      }
      const server = buildServer(counter);
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
    calls,
    called: (name, count = 1) =>
      (calls[name] ?? 0) >= count ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ name, count, resolve })),
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
