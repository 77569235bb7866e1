/**
 * Task budgets and streaming over a real nats-server with the mock model: `max_tokens` / `max_cost` are shared
 * by every Handler call of a task (sequential steps, subtasks, resumed sessions) and end the call that would
 * exceed them with RESOURCE_EXHAUSTION `budget`; a template node's budget covers its subtree; the result carries
 * the whole task's usage and cost; `stream: true` brings the answer as `model.delta` events before the result.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, type ExecuteRequest, type TaskEvent, type TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;

const usage = (prompt_tokens: number, completion_tokens: number) => ({ prompt_tokens, completion_tokens });

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: { regex: "^FIRST" } }, reply: "first done", usage: usage(1200, 800) },
        { match: { lastUser: { regex: "^SECOND" } }, reply: "second done", usage: usage(10, 10) },
        // A parent that asks for a child, then finishes with its answer.
        {
          match: { lastUser: { regex: "^PARENT" }, turn: 1 },
          toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "CHILD count" } }],
          usage: usage(600, 400),
        },
        { match: { lastUser: { regex: "^CHILD" } }, reply: "one two three", usage: usage(150, 50) },
        { match: { lastUser: { regex: "^PARENT" }, hasToolResult: true }, reply: "parent done", usage: usage(250, 50) },
        { match: { lastUser: { regex: "^STREAM" } }, reply: "Small actors listen, a message crosses the bus." },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const sequential = (attrs = "") =>
  `<task type="sequential"${attrs}><steps><task><description>FIRST step</description></task><task><description>SECOND step</description></task></steps></task>`;
const atomic = (description: string) => `<task type="atomic"><description>${description}</description></task>`;

/** The `handler.execute` requests of the stack's tasks, as sent on the bus. */
function recordExecutes(s: Stack): ExecuteRequest[] {
  const seen: ExecuteRequest[] = [];
  s.transport.bus.subscribe(createSubjects(s.root).execute, (msg) => {
    seen.push(JSON.parse(new TextDecoder().decode(msg.data)) as ExecuteRequest);
  });
  return seen;
}

/** The innermost error of a composite failure. */
function rootCause(outcome: TaskOutcome): unknown {
  let error: unknown = outcome.error;
  for (let i = 0; i < 10; i++) {
    const cause = (error as { details?: { cause?: unknown } } | undefined)?.details?.cause;
    if (cause === undefined) break;
    error = cause;
  }
  return error;
}

// Requests go over NATS (no local dispatch), where the tests read what the Evaluator asks the Handler.
const stack = (config: Record<string, unknown> = {}) => startStack({ url: server.url, mock, config: { localDispatch: false, ...config } });

describe("task budgets", () => {
  it("ends a sequential's second step with RESOURCE_EXHAUSTION budget once the first used the tokens", async () => {
    await using s = await stack();
    const executes = recordExecutes(s);
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: sequential(), taskId: newTaskId(), budget: { max_tokens: 1900 } }, (e) => events.push(e));
    expect(outcome.status).toBe("FAILED");
    expect(rootCause(outcome)).toMatchObject({
      type: "RESOURCE_EXHAUSTION",
      resource: "budget",
      budget: "tokens",
      metrics: { used: 2000, limit: 1900 },
      message: "the task's token budget of 1900 reached (2000 used)",
    });
    // Each step was sent what was left; the second never reached the model.
    expect(executes.map((e) => e.budget)).toEqual([{ tokens: 1900 }, { tokens: 0 }]);
    expect(mock.requests.filter((r) => JSON.stringify(r.body).includes("SECOND step"))).toHaveLength(0);
    expect(events.filter((e) => e.type === "model.turn")).toHaveLength(1);
    // The task's spend is reported after each Handler call.
    expect(events.find((e) => e.type === "task.usage")).toMatchObject({
      message: "task: 1200+800 tokens; left 0 tokens",
      data: { nodePath: "0.steps.0", usage: { promptTokens: 1200, completionTokens: 800 }, left: { tokens: 0 } },
    });
    expect(outcome.notes).toMatchObject({ task_usage: { promptTokens: 1200, completionTokens: 800 } });
  });

  it("gives a template node's max_tokens to its subtree", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: sequential(` max_tokens="1900"`), taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(rootCause(outcome)).toMatchObject({
      resource: "budget",
      metrics: { used: 2000, limit: 1900 },
      message: "a template node's token budget of 1900 reached (2000 used)",
    });
  });

  it("completes within the budget and reports the task's usage", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: sequential(), taskId: newTaskId(), budget: { max_tokens: 10_000 } });
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "second done",
      notes: { task_usage: { promptTokens: 1210, completionTokens: 810 } },
    });
  });

  it("passes the remaining budget to a subtask and counts only the resumed session's new usage", async () => {
    await using s = await stack();
    const executes = recordExecutes(s);
    const outcome = await s.client.run({ xml: atomic("PARENT work"), taskId: newTaskId(), budget: { max_tokens: 10_000 } });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "parent done" });
    // Parent 1,000, child 200, resumed parent 300 (its reply reports 1,300 for the whole session).
    expect(outcome.notes).toMatchObject({
      task_usage: { promptTokens: 1000, completionTokens: 500 },
      usage: { promptTokens: 850, completionTokens: 450 },
    });
    const sent = executes.map((e) => ({ prompt: e.prompt.slice(0, 6), resumed: e.resume !== undefined, budget: e.budget }));
    expect(sent).toEqual([
      { prompt: "PARENT", resumed: false, budget: { tokens: 10_000 } },
      { prompt: "CHILD ", resumed: false, budget: { tokens: 9_000 } },
      { prompt: "", resumed: true, budget: { tokens: 8_800 } },
    ]);
  });

  it("stops a subtask that would exceed the budget it inherited", async () => {
    await using s = await stack();
    const executes = recordExecutes(s);
    const childCalls = () =>
      mock.requests.filter((r) => JSON.stringify(r.body).includes("CHILD count") && !JSON.stringify(r.body).includes("PARENT")).length;
    const before = childCalls();
    const outcome = await s.client.run({ xml: atomic("PARENT work"), taskId: newTaskId(), budget: { max_tokens: 1100 } });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "subtask_failure" });
    // The child inherited the 100 tokens the parent left; its prompt alone (with the tool definitions) is more.
    expect(executes[1]).toMatchObject({ prompt: expect.stringMatching(/^CHILD/), budget: { tokens: 100 } });
    expect(JSON.stringify(outcome.error)).toMatch(/"resource":"budget".*"metrics":\{"used":1000,"limit":1100\}/);
    expect(childCalls()).toBe(before);
  });

  it("carries a template node's budget into the subtasks below it", async () => {
    await using s = await stack();
    const executes = recordExecutes(s);
    const outcome = await s.client.run({
      xml: `<task type="atomic" max_tokens="1100"><description>PARENT work</description></task>`,
      taskId: newTaskId(),
    });
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "subtask_failure" });
    expect(executes.map((e) => e.budget)).toEqual([{ tokens: 1100 }, { tokens: 100 }]);
  });

  it("checks max_cost with the price table and reports the task's cost", async () => {
    // 1,000 per 1M tokens: the first step's 2,000 tokens cost 2; the second step's prompt alone costs more than 0.1.
    await using s = await stack({ modelPrices: { "mock-model": { input: 1000, output: 1000 } } });
    const executes = recordExecutes(s);
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: sequential(), taskId: newTaskId(), budget: { max_cost: 2.1 } }, (e) => events.push(e));
    expect(outcome.status).toBe("FAILED");
    expect(rootCause(outcome)).toMatchObject({ resource: "budget", budget: "cost", metrics: { used: 2, limit: 2.1 } });
    expect(executes.map((e) => e.budget)).toEqual([{ cost: 2.1 }, { cost: 0.1 }]);
    expect(outcome.notes).toMatchObject({ task_usage: { promptTokens: 1200, completionTokens: 800 }, task_cost: 2 });
    expect(events.find((e) => e.type === "task.usage")?.data).toMatchObject({ cost: 2, left: { cost: 0.1 } });
  });

  it("refuses a budget attribute that is not a number", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: sequential(` max_cost="cheap"`), taskId: newTaskId() });
    expect(outcome.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "input_validation_failure",
      message: expect.stringContaining('max_cost="cheap"'),
    });
  });
});

describe("streaming a task", () => {
  it("brings the answer as model.delta events, in order, before the result", async () => {
    await using s = await stack();
    const executes = recordExecutes(s);
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: atomic("STREAM it"), taskId: newTaskId(), stream: true }, (e) => events.push(e));
    expect(outcome.status).toBe("COMPLETE");
    expect(executes[0]?.stream).toBe(true);
    const deltas = events.filter((e) => e.type === "model.delta");
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.map((e) => e.data?.["text"]).join("")).toBe(outcome.content);
    expect(deltas.map((e) => e.seq)).toEqual([...deltas.map((e) => e.seq)].sort((a, b) => a - b));
    const completed = events.findIndex((e) => e.type === "task.completed");
    expect(events.findLastIndex((e) => e.type === "model.delta")).toBeLessThan(completed);
  });

  it("streams nothing by default", async () => {
    await using s = await stack();
    const events: TaskEvent[] = [];
    await s.client.run({ xml: atomic("STREAM it"), taskId: newTaskId() }, (e) => events.push(e));
    expect(events.some((e) => e.type === "model.delta")).toBe(false);
  });
});
