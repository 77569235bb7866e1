/**
 * Reparse over a real nats-server with the mock model: an atomic task that runs out of turns (also after resuming
 * from a CONTINUATION) or whose Handler reports a recoverable failure is decomposed by the Compiler into a
 * sequential sub-tree that runs in its place; bounded to 3 attempts; `disable_reparsing` and `manual_xml` opt out.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCompiler } from "../../actors/compiler/compiler.js";
import { silentLogger } from "../../actors/deps.js";
import { createModelClient } from "../../runtime/model/openai.js";
import { serve } from "../../actors/serve.js";
import { createSubjects, Requests, type ExecuteReply, type TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;

const DECOMPOSED = `<task type="sequential"><steps>
  <task><description>PART one of {{topic}}</description></task>
  <task><description>PART two of {{topic}}</description></task>
</steps></task>`;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        // The Compiler's decompose requests.
        {
          match: { system: "dirigent task compiler", lastUser: { regex: "STUBBORN" } },
          reply: `<task type="sequential"><steps><task><description>STUBBORN again</description></task><task><description>STUBBORN more</description></task></steps></task>`,
        },
        { match: { system: "dirigent task compiler", lastUser: { regex: "ran out of resources" } }, reply: DECOMPOSED },
        // A session that asks for a subtask, then runs out of turns after resuming.
        {
          match: { lastUser: { regex: "^RESUMED" }, turn: 1 },
          toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "PART child" } }],
        },
        { match: { lastUser: { regex: "^RESUMED" }, hasToolResult: true }, toolCalls: [{ name: "list_files", arguments: {} }] },
        // Tasks that never finish within one turn: they keep calling a tool.
        { match: { lastUser: { regex: "^(BIG|STUBBORN)" } }, toolCalls: [{ name: "list_files", arguments: {} }] },
        { match: { lastUser: { regex: "^PART (\\w+)" } }, reply: "part done" },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const big = (extra = "") => `<task type="atomic"><description>BIG essay on {{topic}}</description>${extra}</task>`;

describe("reparse", () => {
  it("decomposes a task that ran out of turns and runs the decomposition in its place", async () => {
    await using s = await startStack({ url: server.url, mock, config: { maxTurns: 1 } });
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: big(), inputs: { topic: "tides" }, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "part done", notes: { reparsed: { attempts: 1 } } });
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["node.reparse", "node.reparsed"]));
    // The Compiler was told why the node failed; the decomposition's steps saw the node's variables.
    const compile = mock.requests.find((r) => JSON.stringify(r.body).includes("dirigent task compiler"));
    expect(JSON.stringify(compile?.body)).toContain("turn limit of 1 reached");
    expect(JSON.stringify(compile?.body)).toContain("{{topic}}");
    expect(mock.requests.some((r) => JSON.stringify(r.body).includes("PART two of tides"))).toBe(true);
  });

  it("gives up after 3 decompositions that fail the same way, keeping the last failure", async () => {
    await using s = await startStack({ url: server.url, mock, config: { maxTurns: 1 } });
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: `<task><description>STUBBORN task</description></task>`, taskId: newTaskId() }, (e) =>
      events.push(e),
    );
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "RESOURCE_EXHAUSTION", resource: "turns" });
    // Three decompositions of the top node; nodes inside decompositions are reparsed too, down to 3 levels.
    const top = events.filter((e) => e.type === "node.reparse" && e.data?.["nodePath"] === "0" && e.data["level"] === 1);
    expect(top.map((e) => e.data?.["attempt"])).toEqual([1, 2, 3]);
    expect(Math.max(...events.filter((e) => e.type === "node.reparse").map((e) => Number(e.data?.["level"])))).toBe(3);
  });

  it("does not reparse a task with <disable_reparsing>true</disable_reparsing>", async () => {
    await using s = await startStack({ url: server.url, mock, config: { maxTurns: 1 } });
    const before = mock.requests.length;
    const outcome = await s.client.run({
      xml: big("<disable_reparsing>true</disable_reparsing>"),
      inputs: { topic: "x" },
      taskId: newTaskId(),
    });
    expect(outcome.error).toMatchObject({ type: "RESOURCE_EXHAUSTION", resource: "turns" });
    expect(mock.requests.slice(before).some((r) => JSON.stringify(r.body).includes("dirigent task compiler"))).toBe(false);
  });

  it("does not reparse a task written by hand (<manual_xml>true</manual_xml>)", async () => {
    await using s = await startStack({ url: server.url, mock, config: { maxTurns: 1 } });
    const before = mock.requests.length;
    const outcome = await s.client.run({ xml: big("<manual_xml>true</manual_xml>"), inputs: { topic: "x" }, taskId: newTaskId() });
    expect(outcome.error).toMatchObject({ type: "RESOURCE_EXHAUSTION", resource: "turns" });
    expect(mock.requests.slice(before).some((r) => JSON.stringify(r.body).includes("dirigent task compiler"))).toBe(false);
  });

  it("does not reparse when DIRIGENT_REPARSE is off", async () => {
    await using s = await startStack({ url: server.url, mock, config: { maxTurns: 1, reparse: false } });
    const before = mock.requests.length;
    const outcome = await s.client.run({ xml: big(), inputs: { topic: "x" }, taskId: newTaskId() });
    expect(outcome.error).toMatchObject({ type: "RESOURCE_EXHAUSTION", resource: "turns" });
    expect(mock.requests.length - before).toBe(1);
  });

  it("decomposes a session that runs out of turns after resuming from a CONTINUATION", async () => {
    await using s = await startStack({ url: server.url, mock, config: { maxTurns: 2 } });
    const events: TaskEvent[] = [];
    const outcome = await s.client.run(
      { xml: `<task><description>RESUMED essay on {{topic}}</description></task>`, inputs: { topic: "tides" }, taskId: newTaskId() },
      (e) => events.push(e),
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "part done", notes: { reparsed: { attempts: 1 } } });
    const types = events.map((e) => e.type);
    expect(types.indexOf("continuation.resumed")).toBeGreaterThan(-1);
    expect(types.indexOf("node.reparse")).toBeGreaterThan(types.indexOf("continuation.resumed"));
  });

  it("decomposes a task whose Handler reports a failure with details.recoverable", async () => {
    // The Evaluator, Director and Memory are real; the Handler is scripted: its answer for FRAGILE is a
    // TASK_FAILURE marked recoverable, everything else completes. The Compiler is the real one, on the mock model.
    await using s = await startStack({ url: server.url, mock, roles: ["director", "evaluator", "memory"] });
    const deps = { bus: s.transport.bus, subjects: createSubjects(s.root), log: silentLogger, now: () => new Date(), newId: randomUUID };
    const prompts: string[] = [];
    const handler = serve(deps, Requests.execute, {
      concurrency: 4,
      handle: async (request): Promise<ExecuteReply> => {
        prompts.push(request.prompt);
        const base = { type: "handler.result" as const, taskId: request.taskId, nodePath: request.nodePath };
        if (request.prompt.startsWith("FRAGILE")) {
          return {
            ...base,
            result: {
              content: "",
              status: "FAILED",
              notes: {},
              error: { type: "TASK_FAILURE", reason: "unexpected_error", message: "too much at once", details: { recoverable: true } },
            },
          };
        }
        return { ...base, result: { content: `scripted: ${request.prompt}`, status: "COMPLETE", notes: {} } };
      },
    });
    const compiler = startCompiler(
      deps,
      { defaultModel: "mock-model", concurrency: 2 },
      createModelClient({ baseURL: mock.url, apiKey: "test-key", timeoutMs: 10_000, maxRetries: 0 }),
    );
    try {
      const events: TaskEvent[] = [];
      const outcome = await s.client.run(
        { xml: `<task><description>FRAGILE essay on {{topic}}</description></task>`, inputs: { topic: "tides" }, taskId: newTaskId() },
        (e) => events.push(e),
      );
      expect(outcome).toMatchObject({ status: "COMPLETE", content: "scripted: PART two of tides", notes: { reparsed: { attempts: 1 } } });
      expect(events.find((e) => e.type === "node.reparse")?.message).toContain("a recoverable failure");
      expect(prompts).toEqual(["FRAGILE essay on tides", "PART one of tides", "PART two of tides"]);
    } finally {
      await handler.unsubscribe();
      await compiler.stop();
    }
  });
});
