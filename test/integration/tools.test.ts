/**
 * Tools from other sources in a task's session, end to end: NATS → Director → Evaluator → Handler → the real
 * `openai` SDK → `dirigent mock-llm`, the Handler calling the reference MCP filesystem server (npm, over stdio), a
 * Streamable HTTP MCP server started here, and TypeScript tools of `startSystem({ tools })`.
 */
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { TaskEvent } from "../../protocol/index.js";
import { ToolCallEventData } from "../../protocol/index.js";
import type { MockScript } from "../../runtime/model/mock-server.js";
import { loadConfig, type Config } from "../../runtime/config.js";
import { defineTool, type TypeScriptTool } from "../../runtime/index.js";
import { startSystem } from "../../runtime/system.js";
import { openMemoryTransport } from "../../runtime/transport.js";
import { silentLogger } from "../../actors/deps.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startTestMcpServer, type TestMcpServer } from "../support/mcp-http-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const TASK = "<task><description>Summarise the notes.</description></task>";
const FS_SERVER = createRequire(import.meta.url).resolve("@modelcontextprotocol/server-filesystem/dist/index.js");

let server: TestNatsServer;
let http: TestMcpServer;
let workspace: string;
let mcpConfig: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  http = await startTestMcpServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-tools-ws-"));
  await writeFile(join(workspace, "notes.md"), "# Notes\nThe meeting is on Tuesday.\n");
  mcpConfig = join(workspace, "mcp.json");
  await writeFile(
    mcpConfig,
    JSON.stringify({ mcpServers: { fs: { command: process.execPath, args: [FS_SERVER, workspace] }, web: { url: http.url } } }),
  );
});

afterAll(async () => {
  await http?.close();
  await server?.stop();
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

/** Runs TASK on a fresh stack; returns the outcome, the `tool.call` events and the model's requests. */
async function run(script: MockScript, config: Partial<Config> = {}, tools?: readonly TypeScriptTool[]) {
  await using stack = await startStack({
    url: server.url,
    script,
    config: { workspaceRoot: workspace, reparse: false, continuationTools: [], ...config },
    ...(tools ? { tools } : {}),
  });
  const events = new Recorder<TaskEvent>();
  const outcome = await stack.client.run({ xml: TASK, taskId: newTaskId() }, (e) => events.push(e));
  await events.until((v) => v.some((e) => e.type.startsWith("task.") && e.state !== "running" && e.state !== "queued"), "the final event");
  const toolEvents = events.values.filter((e) => e.type === "tool.call");
  const calls = toolEvents.map((e) => ToolCallEventData.parse(e.data));
  return { outcome, calls, lines: toolEvents.map((e) => e.message ?? ""), requests: stack.mock.requests.map((r) => r.body) };
}

const offered = (body: Record<string, unknown> | undefined) =>
  ((body?.["tools"] ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name);
const toolMessages = (body: { messages: Array<Record<string, unknown>> } | undefined) =>
  (body?.messages ?? []).filter((m) => m["role"] === "tool").map((m) => String(m["content"]));

describe("MCP tools in a session", () => {
  it("reads a file through the reference filesystem server started by the Handler, and calls a Streamable HTTP server's tool", async () => {
    const { outcome, calls, lines, requests } = await run(
      {
        rules: [
          {
            match: { turn: 1 },
            toolCalls: [
              { name: "fs__read_text_file", arguments: { path: join(workspace, "notes.md") } },
              { name: "web__echo", arguments: { text: "hello" } },
              { name: "web__fails", arguments: {} },
            ],
          },
          { match: { hasToolResult: true }, reply: "Tuesday." },
        ],
      },
      { mcpConfig },
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "Tuesday." });
    expect(offered(requests[0])).toEqual(
      expect.arrayContaining(["read_file", "list_files", "fs__read_text_file", "fs__list_directory", "web__echo"]),
    );
    expect(toolMessages(requests[1])).toEqual(["# Notes\nThe meeting is on Tuesday.\n", "echo: hello", "error: the database is down"]);
    expect(calls.map((c) => [c.tool, c.source, c.malformed])).toEqual([
      ["fs__read_text_file", "mcp", false],
      ["web__echo", "mcp", false],
      ["web__fails", "mcp", false],
    ]);
    for (const c of calls) expect(c.durationMs).toBeGreaterThanOrEqual(0);
    // The event's line (the inspector's timeline, `dirigent run`) names the tool's source and how long it took.
    expect(lines[0]).toMatch(/^fs__read_text_file \(mcp\) in \d+ ms$/);
    // The stack has stopped: the Handler closed the server it started.
    expect(
      spawnSync("pgrep", ["-P", String(process.pid), "-f", FS_SERVER])
        .stdout.toString()
        .trim(),
    ).toBe("");
  });

  it("refuses to start a Handler with a bad MCP configuration, naming the file and the key", async () => {
    const bad = join(workspace, "bad-mcp.json");
    await writeFile(bad, JSON.stringify({ mcpServers: { fs: { command: process.execPath, args: "not a list" } } }));
    const transport = openMemoryTransport(silentLogger);
    try {
      await expect(
        startSystem({ config: { ...loadConfig({}, {}), workspaceRoot: workspace, mcpConfig: bad }, transport, roles: ["handler"] }),
      ).rejects.toThrow(`MCP configuration ${bad}: mcpServers.fs.args: `);
      await expect(
        startSystem({
          config: { ...loadConfig({}, {}), workspaceRoot: workspace, mcpConfig: join(workspace, "none.json") },
          transport,
          roles: ["handler"],
        }),
      ).rejects.toThrow(/cannot read it \(ENOENT\) \(--mcp-config \/ DIRIGENT_MCP_CONFIG\)/);
    } finally {
      await transport.close();
    }
  });
});

describe("TypeScript tools in a session", () => {
  const weather = defineTool({
    name: "get_weather",
    description: "The weather of a city.",
    parameters: z.object({ city: z.string() }),
    idempotent: true,
    run: ({ city }) => ({ city, sky: "clear" }),
  });
  const hang = defineTool({
    name: "hang",
    description: "Never answers.",
    parameters: z.object({}),
    timeoutMs: 200,
    run: () => new Promise(() => {}),
  });

  it("offers a defineTool tool, checks its arguments and answers its result; a hanging one is answered at its timeout", async () => {
    const { outcome, calls, requests } = await run(
      {
        rules: [
          {
            match: { turn: 1 },
            toolCalls: [
              { name: "get_weather", arguments: { city: "Oslo" } },
              { name: "get_weather", arguments: { town: "Oslo" } },
              { name: "hang", arguments: {} },
            ],
          },
          { match: { hasToolResult: true }, reply: "Clear in Oslo." },
        ],
      },
      {},
      [weather, hang],
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "Clear in Oslo." });
    expect(offered(requests[0])).toEqual(["read_file", "list_files", "get_weather", "hang"]);
    const answers = toolMessages(requests[1]);
    expect(answers[0]).toBe('{"city":"Oslo","sky":"clear"}');
    expect(answers[1]).toMatch(/^error: invalid arguments for 'get_weather': /);
    expect(answers[2]).toMatch(/^error: 'hang' did not answer within 200 ms \(its timeout\)/);
    expect(calls.map((c) => [c.tool, c.source, c.malformed])).toEqual([
      ["get_weather", "ts", false],
      ["get_weather", "ts", true],
      ["hang", "ts", false],
    ]);
    expect(calls[2]?.durationMs).toBeGreaterThanOrEqual(200);
  });
});
