/**
 * `dirigent mcp` driven by the MCP SDK's own client, over stdio and Streamable HTTP, against a runtime on a real
 * nats-server and the mock model: the library as tools, a call with progress, a cancelled call, the task resources,
 * the budget, and the HTTP server's Host/Origin/token rules.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Progress } from "@modelcontextprotocol/sdk/types.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { CLI, startCli, type CliProcess } from "../support/processes.js";
import { startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let stack: Stack;
let dir: string;

const SUMMARY = "Actors exchange typed messages over NATS.";

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [{ match: { lastUser: "HOLD" }, reply: "released", gate: { name: "hold", count: 1000 } }],
      default: { reply: SUMMARY, usage: { prompt_tokens: 40, completion_tokens: 9 } },
    },
  });
  dir = mkdtempSync(join(tmpdir(), "dirigent-mcp-"));
  writeFileSync(
    join(dir, "summarize.xml"),
    '<task name="summarize" type="atomic"><description>Summarize the key points of this text: {{text}}</description></task>',
  );
  writeFileSync(join(dir, "hold.xml"), '<task name="hold" type="atomic"><description>HOLD until released: {{why}}</description></task>');
  stack = await startStack({ url: server.url, mock, config: { templates: dir } });
});

afterAll(async () => {
  await stack?.stop();
  await mock?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const mcpArgs = (...more: string[]) => ["mcp", "--nats", server.url, "--prefix", stack.root, "--templates", dir, ...more];

async function stdioClient(...more: string[]): Promise<Client> {
  const client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [CLI, ...mcpArgs(...more)], stderr: "pipe" }));
  return client;
}

describe("dirigent mcp over stdio", () => {
  let client: Client;
  beforeAll(async () => {
    client = await stdioClient();
  });
  afterAll(async () => {
    await client?.close();
  });

  it("lists every library template as a tool with its inputs as the schema, and the task tools", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["cancel_task", "hold", "run_task", "summarize", "task_status"]);
    const summarize = tools.find((t) => t.name === "summarize");
    expect(summarize?.inputSchema).toMatchObject({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });
    expect(summarize?.description).toMatch(/Summarize the key points/);
  });

  it("runs a library template: the task's events as progress, the result as text and structured content, the task as a resource", async () => {
    const progress: Progress[] = [];
    const result = await client.callTool({ name: "summarize", arguments: { text: "dirigent" } }, undefined, {
      onprogress: (p) => progress.push(p),
    });
    expect(result.isError).toBe(false);
    expect(result.content).toEqual([{ type: "text", text: SUMMARY }]);
    expect(result.structuredContent).toMatchObject({
      status: "COMPLETE",
      content: SUMMARY,
      usage: { promptTokens: 40, completionTokens: 9 },
    });
    const taskId = String((result.structuredContent as { taskId: string }).taskId);
    expect(progress[0]?.message).toBe(`task ${taskId} submitted`);
    expect(progress.map((p) => p.message)).toContainEqual(expect.stringMatching(/^task\.completed \(completed\)/));
    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
    // The template's input reached the model.
    expect(mock.requests.some((r) => JSON.stringify(r).includes("this text: dirigent"))).toBe(true);

    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri)).toContain(`dirigent://tasks/${taskId}`);
    const read = await client.readResource({ uri: `dirigent://tasks/${taskId}` });
    const body = JSON.parse(String((read.contents[0] as { text: string }).text));
    expect(body).toMatchObject({ taskId, state: "completed", result: { status: "COMPLETE", content: SUMMARY } });
    // Its nodes are listed, and each is a resource of its own with its conversation.
    const nodes = body.nodes as { path: string; kind: string }[];
    expect(nodes.length).toBeGreaterThan(0);
    const node = await client.readResource({ uri: `dirigent://tasks/${taskId}/nodes/${encodeURIComponent(nodes[0]?.path ?? "")}` });
    const record = String((node.contents[0] as { text: string }).text);
    expect(record).toContain("this text: dirigent");
    await expect(client.readResource({ uri: `dirigent://tasks/${taskId}/nodes/no.such.node` })).rejects.toThrow(/no node 'no.such.node'/);
    await expect(client.readResource({ uri: "dirigent://tasks/no-such-task" })).rejects.toThrow(/no task 'no-such-task'/);
    await expect(client.readResource({ uri: "file:///etc/passwd" })).rejects.toThrow(/expected dirigent:\/\/tasks/);
  });

  it("refuses arguments that do not fit the template, and runs any template with run_task", async () => {
    const missing = await client.callTool({ name: "summarize", arguments: {} });
    expect(missing).toMatchObject({ isError: true, content: [{ text: "summarize: missing input 'text'" }] });
    const unknown = await client.callTool({ name: "summarize", arguments: { text: "x", extra: 1 } });
    expect(unknown).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/unknown input 'extra'/) }] });
    const run = await client.callTool({
      name: "run_task",
      arguments: { xml: "<task><description>Say {{word}}</description></task>", inputs: { word: "hi" } },
    });
    expect(run).toMatchObject({ isError: false, structuredContent: { status: "COMPLETE", content: SUMMARY } });
    const bad = await client.callTool({ name: "run_task", arguments: { xml: "<task><description>" } });
    expect(bad).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/^INVALID_TEMPLATE/) }] });
  });

  it("cancels the task when the call is cancelled, and task_status reports it", async () => {
    const abort = new AbortController();
    let submitted!: (id: string) => void;
    const taskId = new Promise<string>((resolve) => (submitted = resolve));
    const call = client.callTool({ name: "hold", arguments: { why: "a long task" } }, undefined, {
      signal: abort.signal,
      onprogress: (p) => {
        const id = /^task (\S+) submitted$/.exec(p.message ?? "")?.[1];
        if (id) submitted(id);
      },
    });
    const id = await taskId;
    const watch = stack.client.watch(id);
    await stack.transport.bus.flush();
    abort.abort("the user changed their mind");
    await expect(call).rejects.toThrow();
    expect((await watch.result).status).toBe("CANCELLED");
    await watch.close();
    const status = await client.callTool({ name: "task_status", arguments: { task_id: id } });
    expect(status.structuredContent).toMatchObject({ taskId: id, state: "cancelled" });
  });
});

describe("dirigent mcp with a budget", () => {
  it("applies --max-tokens to every task it starts", async () => {
    const client = await stdioClient("--max-tokens", "10");
    try {
      const result = await client.callTool({ name: "summarize", arguments: { text: "long" } });
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({ status: "FAILED", error: expect.stringMatching(/RESOURCE_EXHAUSTION \(budget\)/) });
    } finally {
      await client.close();
    }
  });
});

describe("dirigent mcp --http", () => {
  let cli: CliProcess;
  let url: string;
  let tokenCli: CliProcess;
  let tokenUrl: string;
  const token = "a-test-token-0123456789";

  beforeAll(async () => {
    cli = startCli(mcpArgs("--http", "0"));
    url = (await cli.waitFor(/MCP server on (http:\/\/\S+)/))[1] ?? "";
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, `${token}\n`);
    tokenCli = startCli(mcpArgs("--http", "0", "--token-file", tokenFile));
    tokenUrl = (await tokenCli.waitFor(/MCP server on (http:\/\/\S+)/))[1] ?? "";
  });
  afterAll(async () => {
    await cli?.stop();
    await tokenCli?.stop();
  });

  it("serves the tools over Streamable HTTP, with progress", async () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain("summarize");
      const progress: Progress[] = [];
      const result = await client.callTool({ name: "summarize", arguments: { text: "http" } }, undefined, {
        onprogress: (p) => progress.push(p),
      });
      expect(result.structuredContent).toMatchObject({ status: "COMPLETE", content: SUMMARY });
      expect(progress.length).toBeGreaterThan(1);
    } finally {
      await client.close();
    }
  });

  it("answers only its own Host, refuses a foreign Origin, and requires the token when given one", async () => {
    const init = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } },
    };
    const post = (target: string, headers: Record<string, string>) =>
      fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify(init),
      });
    const port = new URL(url).port;
    // fetch sets Host from the URL; a rebinding attack names another host: reach the port through a raw request.
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path: "/mcp", method: "POST", headers: { host: `evil.example:${port}` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end("{}");
    });
    expect(status).toBe(421);
    expect((await post(url, { origin: "http://evil.example" })).status).toBe(403);
    expect((await post(url, { origin: `http://127.0.0.1:${port}` })).status).toBe(200);

    expect((await post(tokenUrl, {})).status).toBe(401);
    expect((await post(tokenUrl, { authorization: "Bearer wrong-token-0123456789" })).status).toBe(401);
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(tokenUrl), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    );
    expect((await client.listTools()).tools.length).toBe(5);
    await client.close();
  });

  it("refuses to listen beyond loopback without a token", async () => {
    const refused = startCli(mcpArgs("--http", "0", "--host", "0.0.0.0"));
    expect(await refused.exited).toBe(2);
    expect(refused.output()).toMatch(/not on loopback: give a bearer token with --token-file FILE/);
  });
});
