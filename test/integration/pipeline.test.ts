/** A task travels NATS → Director → Evaluator → Handler → model (the real openai SDK over HTTP) and back. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { RemoteError } from "../../runtime/client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const HAIKU = `<task type="atomic">
  <description>Write a haiku about {{topic}}.</description>
  <system>You are a poet.</system>
  <model>scripted-model</model>
</task>`;

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "haiku about the sea" }, reply: "waves fold into foam", usage: { prompt_tokens: 11, completion_tokens: 4 } },
      ],
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

describe("pipeline over a real nats-server", () => {
  it("runs an atomic task end to end and reports its lifecycle in order", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const events = new Recorder<TaskEvent>();
    const outcome = await stack.client.run({ xml: HAIKU, inputs: { topic: "the sea" }, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "waves fold into foam",
      notes: { usage: { promptTokens: 11, completionTokens: 4 }, model: "scripted-model" },
    });
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(events.values.map((e) => e.type)).toEqual([
      "task.queued",
      "task.running",
      "node.started",
      "model.turn",
      "node.finished",
      "task.completed",
    ]);
    expect(events.values.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    const request = mock.requests.at(-1)?.body;
    expect(request?.model).toBe("scripted-model");
    expect(request?.messages[0]).toMatchObject({ role: "system" });
    expect(String(request?.messages[0]?.["content"])).toContain("You are a poet.");
  });

  it("stores the result: get answers after the task finished and after the runtime restarted", async () => {
    const taskId = newTaskId();
    const first = await startStack({ url: server.url, mock });
    await first.client.run({ xml: HAIKU, inputs: { topic: "the sea" }, taskId });
    await first.stop();
    await using second = await startStack({ url: server.url, mock, root: first.root });
    const status = await second.client.get(taskId);
    expect(status).toMatchObject({ taskId, state: "completed", result: { status: "COMPLETE", content: "waves fold into foam" } });
  });

  it("treats a repeated task id as a duplicate: one run, one result", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const results = new Recorder<unknown>();
    const watch = stack.client.watch(taskId);
    const sub = stack.transport.bus.subscribe(`${stack.root}.tasks.${taskId}.result`, (m) => results.push(m.data));
    await stack.transport.bus.flush();
    const before = mock.requests.length;
    expect(await stack.client.submit({ xml: HAIKU, inputs: { topic: "the sea" }, taskId })).toEqual({ taskId, status: "accepted" });
    expect(await stack.client.submit({ xml: HAIKU, inputs: { topic: "the sea" }, taskId })).toEqual({ taskId, status: "duplicate" });
    await watch.result;
    expect(await stack.client.submit({ xml: HAIKU, inputs: { topic: "the sea" }, taskId })).toEqual({ taskId, status: "duplicate" });
    expect(results.values).toHaveLength(1);
    expect(mock.requests.length - before).toBe(1);
    await sub.unsubscribe();
    await watch.close();
  });

  it("refuses at submission an atomic task whose variable no input fills, naming it (INVALID_TEMPLATE)", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const run = stack.client.run({ xml: HAIKU, taskId: newTaskId() });
    await expect(run).rejects.toMatchObject({ code: "INVALID_TEMPLATE", message: expect.stringContaining("no input 'topic'") });
  });

  it("fails a loop without its evaluator at run time with a clear error, never at parse time", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const xml = `<task type="director_evaluator_loop">\n  <director><description>a</description></director>\n</task>`;
    const outcome = await stack.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ reason: "input_validation_failure", message: "director_evaluator_loop requires an <evaluator>" });
  });

  it("fails a task type it does not know at run time, naming it with its line and column", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const outcome = await stack.client.run({ xml: `<task type="parallel">\n  <description>a</description>\n</task>`, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ reason: "not_supported" });
    expect(outcome.error?.message).toMatch(/type="parallel".*line 1, column 1.*not supported/);
  });

  it("refuses a malformed template with INVALID_TEMPLATE and its line and column", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const err = await stack.client.submit({ xml: "<task>\n  <description>x</descr>\n</task>" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RemoteError);
    expect(err).toMatchObject({ code: "INVALID_TEMPLATE" });
    const raw = await stack.transport.bus.request(
      `${stack.root}.tasks.submit`,
      new TextEncoder().encode("<task>\n  <description>x</descr>\n</task>"),
      { timeoutMs: 5000 },
    );
    const body = JSON.parse(new TextDecoder().decode(raw)) as { error: { code: string; line: number; col: number } };
    expect(body.error).toMatchObject({ code: "INVALID_TEMPLATE", line: 2 });
    expect(body.error.col).toBeGreaterThan(0);
  });

  it("cancels a running task: the model request in flight is aborted and the result is CANCELLED", async () => {
    const log = new Recorder<string>();
    const slowMock = await startMockLlm({
      port: 0,
      script: { rules: [{ reply: "too late", delayMs: 60_000 }] },
      log: (line) => log.push(line),
    });
    const stack = await startStack({ url: server.url, mock: slowMock });
    const taskId = newTaskId();
    const watch = stack.client.watch(taskId);
    await stack.transport.bus.flush();
    await stack.client.submit({ xml: "<task><description>slow please</description></task>", taskId });
    await log.until((v) => v.some((l) => l.includes("delaying")), "the model request to arrive");
    const reply = await stack.client.cancel(taskId);
    expect(reply).toEqual({ taskId, state: "cancelled", cancelled: true });
    const outcome = await watch.result;
    expect(outcome.status).toBe("CANCELLED");
    expect((await stack.client.get(taskId)).state).toBe("cancelled");
    expect(await stack.client.cancel(taskId)).toEqual({ taskId, state: "cancelled", cancelled: false });
    await log.until((v) => v.some((l) => l.includes("aborted by client")), "the model request to be aborted");
    await watch.close();
    await stack.stop();
    await slowMock.close();
  });

  it("answers get and cancel of an unknown task with NOT_FOUND", async () => {
    await using stack = await startStack({ url: server.url, mock });
    await expect(stack.client.get("nope")).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(stack.client.cancel("nope")).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("reports NO_RESPONDERS when no Director runs", async () => {
    await using stack = await startStack({ url: server.url, mock, roles: ["handler"] });
    await expect(stack.client.submit({ xml: HAIKU })).rejects.toMatchObject({ code: "NO_RESPONDERS" });
  });
});

describe("pipeline on the in-process bus", () => {
  it("runs the same task with no NATS server", async () => {
    await using stack = await startStack({ mock });
    const outcome = await stack.client.run({ xml: HAIKU, inputs: { topic: "the sea" }, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "waves fold into foam" });
  });
});
