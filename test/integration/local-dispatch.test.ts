/**
 * Local dispatch: roles of one process call each other directly while the asked role has a slot free, so a task's
 * requests and progress never cross NATS; switched off, or with the role elsewhere, they do, and the task ends the
 * same way.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createSubjects, type TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

const XML = `<task><description>Name the colour of {{thing}}.</description></task>`;

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ match: { lastUser: "colour of snow" }, reply: "white" }] } });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

/** Counts the messages on the subjects between roles: requests to the Evaluator and the Handler, and progress. */
function spy(stack: Stack) {
  const subjects = createSubjects(stack.root);
  const seen = new Recorder<string>();
  for (const subject of [subjects.evaluate, subjects.execute, subjects.anyProgress])
    stack.transport.bus.subscribe(subject, (m) => seen.push(m.subject));
  return seen;
}

async function runOne(stack: Stack) {
  const events = new Recorder<TaskEvent>();
  await stack.transport.bus.flush();
  const outcome = await stack.client.run({ xml: XML, inputs: { thing: "snow" }, taskId: newTaskId() }, (e) => events.push(e));
  await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
  return { outcome, types: events.values.map((e) => e.type) };
}

describe("local dispatch between the roles of one process", () => {
  it("runs a task without a request or progress report crossing NATS", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const seen = spy(stack);
    const { outcome, types } = await runOne(stack);
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "white" });
    expect(types).toEqual(["task.queued", "task.running", "node.started", "model.turn", "node.finished", "task.completed"]);
    await stack.transport.bus.flush();
    expect(seen.values).toEqual([]);
  });

  it("runs the asked role outside the asker's stack: XState warns about nothing", async () => {
    // A responder run inside the XState action that asked would create its actors while that action executes, and
    // XState warns ("Custom actions should not call `assign()` directly") for every task.
    const warn = vi.spyOn(console, "warn");
    try {
      await using stack = await startStack({ url: server.url, mock });
      const { outcome } = await runOne(stack);
      expect(outcome).toMatchObject({ status: "COMPLETE", content: "white" });
      expect(warn.mock.calls.map((args) => String(args[0]))).toEqual([]);
    } finally {
      warn.mockRestore();
    }
  });

  it("sends them over NATS when switched off, with the same outcome and events", async () => {
    await using stack = await startStack({ url: server.url, mock, config: { localDispatch: false } });
    const seen = spy(stack);
    const { outcome, types } = await runOne(stack);
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "white" });
    expect(types).toEqual(["task.queued", "task.running", "node.started", "model.turn", "node.finished", "task.completed"]);
    expect(seen.values.filter((s) => s.endsWith(".evaluate"))).toHaveLength(1);
    expect(seen.values.filter((s) => s.endsWith(".execute"))).toHaveLength(1);
    expect(seen.values.filter((s) => s.includes(".progress."))).toHaveLength(3);
  });

  it("sends a request over NATS to the role in another process", async () => {
    // This process has the Director only; the Evaluator and the Handler run in another.
    await using workers = await startStack({ url: server.url, mock, roles: ["evaluator", "handler", "memory"] });
    await using director = await startStack({ url: server.url, mock, root: workers.root, roles: ["director"] });
    const seen = spy(director);
    const { outcome } = await runOne(director);
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "white" });
    // The evaluation crossed to the other process; there the Evaluator asked its own Handler directly.
    expect(seen.values.filter((s) => s.endsWith(".evaluate"))).toHaveLength(1);
    expect(seen.values.filter((s) => s.endsWith(".execute"))).toHaveLength(0);
  });
});
