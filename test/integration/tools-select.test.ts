/**
 * Which tools a task gets, and its own session settings, end to end: NATS → Director → Evaluator → Handler → the
 * real `openai` SDK → `dirigent mock-llm`, whose received requests show what the Handler sent. `<tools>` selects
 * among the Handler's tools (built-in and TypeScript tools here), `DIRIGENT_TOOLS` is the default, a task naming a
 * tool no Handler has fails before any model call; `max_turns`, `temperature`, `max_output_tokens` and
 * `<model fallback>` reach the session and the model call.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { TaskEvent } from "../../protocol/index.js";
import { ToolCallEventData } from "../../protocol/index.js";
import type { MockScript } from "../../runtime/model/mock-server.js";
import type { Config } from "../../runtime/config.js";
import { defineTool } from "../../runtime/index.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const TOOLS = [
  defineTool({
    name: "get_weather",
    description: "The weather of a city.",
    parameters: z.object({ city: z.string() }),
    idempotent: true,
    run: ({ city }) => `${city}: clear`,
  }),
  defineTool({ name: "db__query", description: "Query.", parameters: z.object({}), idempotent: true, run: () => "rows: 3" }),
  defineTool({ name: "db__insert", description: "Insert.", parameters: z.object({}), run: () => "inserted" }),
];

let server: TestNatsServer;
let workspace: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-tools-select-"));
});

afterAll(async () => {
  await server?.stop();
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

/** Runs `xml` on a fresh stack; returns the outcome, its events and the requests the model received. */
async function run(xml: string, script: MockScript, config: Partial<Config> = {}) {
  await using stack = await startStack({
    url: server.url,
    script,
    config: { workspaceRoot: workspace, reparse: false, continuationTools: [], ...config },
    tools: TOOLS,
  });
  const events = new Recorder<TaskEvent>();
  const outcome = await stack.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
  await events.until((v) => v.some((e) => e.type.startsWith("task.") && e.state !== "running" && e.state !== "queued"), "the final event");
  return { outcome, events: events.values, requests: stack.mock.requests.map((r) => r.body) };
}

const offered = (body: Record<string, unknown> | undefined) =>
  ((body?.["tools"] ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name);
const toolMessages = (body: { messages: Array<Record<string, unknown>> } | undefined) =>
  (body?.messages ?? []).filter((m) => m["role"] === "tool").map((m) => String(m["content"]));
const task = (inner: string, attrs = "") => `<task${attrs}><description>Check the weather.</description>${inner}</task>`;
const DONE: MockScript = { rules: [], default: { reply: "done" } };

describe("<tools>: which tools a task gets", () => {
  it("offers only the named tools and globs; a call of another tool of the Handler is answered as unavailable", async () => {
    const { outcome, events, requests } = await run(task("<tools>read_file, db__*</tools>"), {
      rules: [
        {
          match: { turn: 1 },
          toolCalls: [
            { name: "db__query", arguments: {} },
            { name: "get_weather", arguments: { city: "Oslo" } },
          ],
        },
        { match: { hasToolResult: true }, reply: "done" },
      ],
    });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "done" });
    expect(offered(requests[0])).toEqual(["read_file", "db__query", "db__insert"]);
    expect(toolMessages(requests[1])).toEqual([
      "rows: 3",
      "error: no tool named 'get_weather' is available; available: read_file, db__query, db__insert",
    ]);
    const calls = events.filter((e) => e.type === "tool.call").map((e) => ToolCallEventData.parse(e.data));
    expect(calls.map((c) => [c.tool, c.malformed])).toEqual([
      ["db__query", false],
      ["get_weather", true],
    ]);
  });

  it("an empty <tools/> offers no tools", async () => {
    const { outcome, requests } = await run(task("<tools/>"), DONE);
    expect(outcome.status).toBe("COMPLETE");
    expect(requests[0]?.["tools"]).toBeUndefined();
  });

  it("without <tools>: DIRIGENT_TOOLS of built-in names only offers every tool; with globs, what it selects", async () => {
    const all = await run(task(""), DONE);
    expect(offered(all.requests[0])).toEqual(["read_file", "list_files", "get_weather", "db__query", "db__insert"]);
    const some = await run(task(""), DONE, { tools: ["read_file", "get_*", "nowhere__*"] });
    expect(offered(some.requests[0])).toEqual(["read_file", "get_weather"]);
    // A task's <tools> still chooses among all of the Handler's tools.
    const own = await run(task("<tools>db__insert</tools>"), DONE, { tools: ["read_file", "get_*"] });
    expect(offered(own.requests[0])).toEqual(["db__insert"]);
  });

  it("a task naming tools no Handler has fails with the missing names, before any model call", async () => {
    const { outcome, requests } = await run(task("<tools>read_file, web__*, search, run_script</tools>"), DONE);
    expect(outcome).toMatchObject({
      status: "FAILED",
      error: { type: "TASK_FAILURE", reason: "input_validation_failure", details: { missingTools: ["web__*", "search", "run_script"] } },
    });
    expect(outcome.error?.message).toContain(
      "the task's <tools> names tools this Handler does not have: 'web__*', 'search', 'run_script' (its tools: read_file, list_files, get_weather, db__query, db__insert)",
    );
    // NATS services' tools are off (the default): the message says what would offer one.
    expect(outcome.error?.message).toMatch(
      /; if it is a tool of a NATS service, this Handler offers those only with DIRIGENT_NATS_TOOLS=on$/,
    );
    expect(requests).toEqual([]);
  });
});

describe("a task's session settings", () => {
  it("a session resumed after a subtask keeps its task's tools and settings", async () => {
    const xml = `<task temperature="0.7"><description>PARENT: check the weather.</description><tools>get_weather</tools></task>`;
    const { outcome, requests } = await run(
      xml,
      {
        rules: [
          {
            match: { lastUser: "PARENT", turn: 1 },
            toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "CHILD" } }],
          },
          { match: { lastUser: "CHILD" }, reply: "child done" },
          { match: { hasToolResult: true }, reply: "parent done" },
        ],
      },
      { continuationTools: ["subtask"] },
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "parent done" });
    expect(requests).toHaveLength(3);
    const [parent, child, resumed] = requests;
    expect(offered(parent)).toEqual(["get_weather", "run_subtask"]);
    expect(offered(child)).toEqual(expect.arrayContaining(["read_file", "list_files", "get_weather", "db__query"]));
    expect(child?.["temperature"]).toBeUndefined();
    expect(offered(resumed).filter((n) => n !== "run_subtask")).toEqual(["get_weather"]);
    expect(resumed?.["temperature"]).toBe(0.7);
  });

  it("sends temperature and max_output_tokens with each call, and ends the session at its max_turns", async () => {
    const { outcome, requests } = await run(task("", ` max_turns="1" temperature="0.3" max_output_tokens="64"`), {
      rules: [{ match: { turn: 1 }, toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }] }],
      default: { reply: "done" },
    });
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({ temperature: 0.3, max_tokens: 64 });
    expect(outcome).toMatchObject({
      status: "FAILED",
      error: { type: "RESOURCE_EXHAUSTION", resource: "turns", metrics: { used: 1, limit: 1 } },
    });
  });

  it("without them, sends no temperature and the Handler's limits", async () => {
    const { requests } = await run(task(""), DONE, { maxOutputTokens: 100 });
    expect(requests[0]?.["temperature"]).toBeUndefined();
    expect(requests[0]?.["max_tokens"]).toBe(100);
  });
});

describe("<model fallback>", () => {
  const xml = task(`<model fallback="busy-model, backup-model">primary-model</model>`);

  it("tries the fallbacks in order when the model is not found or fails after its retries; the events say which answered", async () => {
    const { outcome, events, requests } = await run(xml, {
      rules: [
        { match: { model: "primary-model" }, status: 404, error: "The model `primary-model` does not exist" },
        { match: { model: "busy-model" }, status: 503, error: "overloaded" },
        { match: { model: "backup-model" }, reply: "from the backup" },
      ],
    });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "from the backup", notes: { model: "backup-model" } });
    expect(requests.map((r) => r.model)).toEqual(["primary-model", "busy-model", "backup-model"]);
    const fallbacks = events.filter((e) => e.type === "model.fallback").map((e) => e.data);
    expect(fallbacks).toEqual([
      expect.objectContaining({ from: "primary-model", to: "busy-model", status: 404 }),
      expect.objectContaining({ from: "busy-model", to: "backup-model", status: 503 }),
    ]);
    expect(events.find((e) => e.type === "model.turn")?.data).toMatchObject({ model: "backup-model" });
  });

  it("does not fall back when the request itself is refused (400), nor past the last model", async () => {
    const refused = await run(xml, { rules: [{ status: 400, error: "bad request" }] });
    expect(refused.outcome).toMatchObject({ status: "FAILED", error: { type: "TASK_FAILURE", reason: "model_error" } });
    expect(refused.requests.map((r) => r.model)).toEqual(["primary-model"]);
    const gone = await run(xml, { rules: [{ status: 404, error: "no such model" }] });
    expect(gone.outcome).toMatchObject({ status: "FAILED", error: { type: "TASK_FAILURE", reason: "model_error" } });
    expect(gone.requests.map((r) => r.model)).toEqual(["primary-model", "busy-model", "backup-model"]);
  });
});
