/**
 * Persisted snapshots of the task machine over a real nats-server: a Director taking a task over restores the
 * snapshot the dead owner stored (current version), refuses one of a newer version with a clear failure, and keeps
 * running either way; a running task's record carries its snapshot.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { readRecord } from "../../actors/director-records.js";
import { TASK_MACHINE_VERSION, taskMachine, type TaskInput } from "../../machines/task.js";
import { encode, encodeJson, TaskRecord, type TaskEvent, type TaskResult } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/mock-llm.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ match: { lastUser: "SLOW" }, reply: "slow", delayMs: 600 }], default: { reply: "resumed answer" } } });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const XML = "<task><description>resume me</description></task>";

/** Stores a record as a dead Director left it (claimed, running) and queues the task again. */
async function orphan(s: Stack, taskId: string, machine: TaskRecord["machine"]): Promise<void> {
  const at = new Date(Date.now() - 60_000).toISOString();
  const record: TaskRecord = { taskId: taskId as TaskRecord["taskId"], state: "running", xml: XML, inputs: {}, submittedAt: at, updatedAt: at, owner: "director-dead", claimedAt: at, seq: 3, ...(machine ? { machine } : {}) };
  await s.transport.store.put(taskId, encode(TaskRecord, record));
  await s.transport.queue.enqueue(taskId, encodeJson({ taskId }));
}

/** A persisted snapshot of a task machine that is running its evaluation. */
async function runningSnapshot(taskId: string): Promise<unknown> {
  const actor = createActor(taskMachine.provide({ actors: { evaluate: fromPromise<TaskResult, TaskInput>(() => new Promise(() => undefined)) } }), { input: { taskId, xml: XML, inputs: {} } }).start();
  actor.send({ type: "task.start" });
  await waitFor(actor, (s) => s.hasTag("running"));
  const snapshot = actor.getPersistedSnapshot();
  actor.stop();
  return JSON.parse(JSON.stringify(snapshot));
}

describe("task machine snapshots", () => {
  it("restores the stored snapshot when a task is taken over, and completes it", async () => {
    await using s = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const watch = s.client.watch(taskId, (e) => events.push(e));
    const events = new Recorder<TaskEvent>();
    await s.transport.bus.flush();
    await orphan(s, taskId, { id: "task", version: TASK_MACHINE_VERSION, snapshot: await runningSnapshot(taskId) });
    const outcome = await watch.result;
    await watch.close();
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "resumed answer" });
    await events.until((v) => v.some((e) => e.type === "task.resumed"), "the resume event");
    // Numbering goes on from the stored checkpoint.
    expect(events.values.find((e) => e.type === "task.resumed")?.seq).toBeGreaterThan(3);
  });

  it("fails a task whose snapshot is of a newer machine version, with a clear error, and keeps running", async () => {
    await using s = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const watch = s.client.watch(taskId);
    await s.transport.bus.flush();
    await orphan(s, taskId, { id: "task", version: TASK_MACHINE_VERSION + 1, snapshot: {} });
    const outcome = await watch.result;
    await watch.close();
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error?.message).toContain(`cannot resume the task: stored snapshot is of task machine v${TASK_MACHINE_VERSION + 1}, newer than this release's v${TASK_MACHINE_VERSION}`);
    // The Director goes on with other work.
    expect(await s.client.run({ xml: XML, taskId: newTaskId() })).toMatchObject({ status: "COMPLETE" });
  });

  it("stores the running machine's snapshot and version in the task's record", async () => {
    await using s = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const events = new Recorder<TaskEvent>();
    const watch = s.client.watch(taskId, (e) => events.push(e));
    await s.transport.bus.flush();
    await s.client.submit({ xml: "<task><description>SLOW one</description></task>", taskId });
    await events.until((v) => v.some((e) => e.type === "model.turn" || e.type === "node.started"), "the task to run");
    const deadline = Date.now() + 5000;
    let record = (await readRecord(s.transport.store, taskId))?.record;
    // The checkpoint follows the state change asynchronously: poll the record briefly.
    while (!record?.machine && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      record = (await readRecord(s.transport.store, taskId))?.record;
    }
    expect(record?.machine).toMatchObject({ id: "task", version: TASK_MACHINE_VERSION, snapshot: { status: "active", value: { running: "executing" } } });
    await watch.result;
    await watch.close();
  });
});
