/**
 * A Handler process killed (`kill -9`) while a session's MCP tool calls run: another Handler takes the session over,
 * the model is not asked again for the turn, the finished (read-only) call is answered from its record without
 * calling the server again, and the call in flight (not idempotent) is not called again: the model is told its
 * outcome is unknown. The MCP server is a Streamable HTTP server in this process, so its calls are counted here.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, decode, TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type RecordedRequest } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { startTestMcpServer, type TestMcpServer } from "../support/mcp-http-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let http: TestMcpServer;
const processes: CliProcess[] = [];
const dir = mkdtempSync(join(tmpdir(), "dirigent-mcp-crash-"));

beforeAll(async () => {
  server = await startTestNatsServer();
  http = await startTestMcpServer();
  writeFileSync(join(dir, "mcp.json"), JSON.stringify({ mcpServers: { web: { url: http.url } } }));
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        {
          match: { lastUser: { regex: "^MCPCRASH" }, turn: 1 },
          toolCalls: [
            { name: "web__lookup", arguments: { word: "tide" } },
            { name: "web__note", arguments: { text: "high tide" } },
          ],
        },
        { match: { lastUser: { regex: "^MCPCRASH" }, hasToolResult: true }, reply: "noted" },
      ],
      default: { reply: "unexpected" },
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await http?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const hasToolResult = (r: RecordedRequest) => r.body.messages.some((m) => m["role"] === "tool");

function handler(root: string): CliProcess {
  const p = startCli(
    ["worker", "--role", "handler", "--nats", server.url, "--prefix", root, "--concurrency", "4", "--mcp-config", join(dir, "mcp.json")],
    {
      OPENAI_BASE_URL: mock.url,
      OPENAI_API_KEY: "test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_LOG_LEVEL: "info",
      DIRIGENT_WORKSPACE_ROOT: dir,
    },
  );
  processes.push(p);
  return p;
}

describe("a Handler killed while a session's MCP tools run", () => {
  it("is replaced by another Handler, which calls neither the finished tool nor the one in flight again", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock, root, roles: ["director", "evaluator", "memory"] });
    const results = new Recorder<TaskOutcome>();
    const taskId = newTaskId();
    stack.transport.bus.subscribe(createSubjects(root).taskResult(taskId), (m) => {
      const d = decode(TaskOutcome, m.data);
      if (d.ok) results.push(d.value);
    });
    await stack.transport.bus.flush();
    const first = handler(root);
    await first.waitFor(/ready/);
    await stack.client.submit({ taskId, xml: "<task><description>MCPCRASH take a note</description></task>" });
    // lookup answered (and was recorded); note is in flight and never answers this first call.
    await http.called("note");
    const second = handler(root);
    await second.waitFor(/ready/);
    first.child.kill("SIGKILL");
    await first.exited;

    await results.count(1, "the result", 45_000);
    expect(results.values[0]).toMatchObject({ taskId, status: "COMPLETE", content: "noted" });
    expect(http.calls).toMatchObject({ lookup: 1, note: 1 });
    const calls = mock.requests.filter((r) => JSON.stringify(r.body.messages).includes("MCPCRASH"));
    expect(calls.filter((r) => !hasToolResult(r))).toHaveLength(1);
    const final = calls.find(hasToolResult);
    const answers = (final?.body.messages ?? []).filter((m) => m["role"] === "tool").map((m) => String(m["content"]));
    expect(answers[0]).toBe("tide: a word");
    expect(answers[1]).toMatch(/^error: the outcome of this call of 'web__note' is unknown/);
  });
});
