/**
 * Persisted snapshots of the task machine over a real nats-server: a Director taking a task over restores the
 * snapshot the dead owner stored (current version, or an older one it migrates), refuses one it cannot run on (a
 * newer version, an older one without a migration, a snapshot that lost its child, garbage) with one clear failure,
 * and keeps running either way; a running task's record carries its snapshot.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { PENDING_CLAIM_MS, readTaskRecord } from "../../actors/director/records.js";
import { restorable } from "../../actors/director/snapshot.js";
import { TASK_MACHINE_VERSION, taskMachine, type TaskInput } from "../../machines/director/task.js";
import { createSubjects, encode, encodeJson, TaskRecord, type TaskEvent, type TaskResult } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { connectNats } from "../../runtime/nats/bus.js";
import { readStoredTask } from "../../runtime/inspect/replay.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";
import { tid } from "../support/ids.js";

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "SLOWER" }, reply: "slower", delayMs: PENDING_CLAIM_MS + 600 },
        { match: { lastUser: "SLOW" }, reply: "slow", delayMs: 600 },
      ],
      default: { reply: "resumed answer" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const XML = "<task><description>resume me</description></task>";

/** Stores a record as a dead Director left it (claimed, running) and queues the task again. */
async function orphan(s: Stack, taskId: string, machine: TaskRecord["machine"]): Promise<void> {
  const at = new Date(Date.now() - 60_000).toISOString();
  const record: TaskRecord = {
    taskId: taskId as TaskRecord["taskId"],
    state: "running",
    xml: XML,
    inputs: {},
    submittedAt: at,
    updatedAt: at,
    owner: "director-dead",
    claimedAt: at,
    seq: 3,
    ...(machine ? { machine } : {}),
  };
  await s.transport.store.put(taskId, encode(TaskRecord, record));
  await s.transport.queue.enqueue(taskId, encodeJson({ taskId }));
}

/** A persisted snapshot of a task machine that is running its evaluation. */
async function runningSnapshot(taskId: string): Promise<unknown> {
  const actor = createActor(
    taskMachine.provide({ actors: { evaluate: fromPromise<TaskResult, TaskInput>(() => new Promise(() => undefined)) } }),
    { input: { taskId: tid(taskId), xml: XML, inputs: {} } },
  ).start();
  actor.send({ type: "task.start" });
  await waitFor(actor, (s) => s.hasTag("running"));
  const snapshot = actor.getPersistedSnapshot();
  actor.stop();
  return JSON.parse(JSON.stringify(snapshot));
}

/**
 * Waits until the intake message of the stack's tasks is acked (nothing more will be delivered), then counts the
 * task's results stored in the events stream.
 */
async function resultsOnceSettled(s: Stack, taskId: string): Promise<number> {
  const subjects = createSubjects(s.root);
  const nc = await connectNats({ servers: server.url, name: "snapshots-check" });
  try {
    const jsm = await jetstreamManager(nc);
    // The ack follows the result and nothing announces it: poll the consumer with a deadline.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const info = await jsm.consumers.info(subjects.intakeStream, subjects.directorConsumer);
      if (info.num_pending + info.num_ack_pending === 0) break;
      if (Date.now() > deadline)
        throw new Error(
          `intake message never acked: ${JSON.stringify({ pending: info.num_pending, ackPending: info.num_ack_pending, redelivered: info.num_redelivered })}`,
        );
      await delay(50);
    }
    return (await readStoredTask(nc, subjects, tid(taskId))).filter((m) => m.subject === subjects.taskResult(taskId)).length;
  } finally {
    await nc.close();
  }
}

/** Orphans a task with `machine`, and returns its one outcome once the intake message is settled. */
async function resumeOrphan(s: Stack, machine: TaskRecord["machine"], taskId = newTaskId()) {
  const watch = s.client.watch(taskId);
  await s.transport.bus.flush();
  await orphan(s, taskId, machine);
  const outcome = await watch.result;
  await watch.close();
  expect(await resultsOnceSettled(s, taskId)).toBe(1);
  expect((await readTaskRecord(s.transport.store, taskId))?.record.state).toBe(outcome.status === "COMPLETE" ? "completed" : "failed");
  return outcome;
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
    expect(outcome.error?.message).toContain(
      `cannot resume the task: stored snapshot is of task machine v${TASK_MACHINE_VERSION + 1}, newer than this release's v${TASK_MACHINE_VERSION}`,
    );
    // The Director goes on with other work.
    expect(await s.client.run({ xml: XML, taskId: newTaskId() })).toMatchObject({ status: "COMPLETE" });
  });

  it("fails a task whose current-version snapshot xstate cannot restore, once, with one result", async () => {
    await using s = await startStack({ url: server.url, mock });
    const outcome = await resumeOrphan(s, { id: "task", version: TASK_MACHINE_VERSION, snapshot: { garbage: true } });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error?.message).toContain("cannot resume the task: stored snapshot cannot be restored");
    expect(await s.client.run({ xml: XML, taskId: newTaskId() })).toMatchObject({ status: "COMPLETE" });
  });

  it("fails a task whose snapshot lost the child its state invokes, instead of waiting forever", async () => {
    await using s = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const { children: _dropped, ...withoutChildren } = (await runningSnapshot(taskId)) as Record<string, unknown>;
    const outcome = await resumeOrphan(s, { id: "task", version: TASK_MACHINE_VERSION, snapshot: withoutChildren }, taskId);
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error?.message).toContain("cannot resume the task: stored snapshot has no child 'evaluate'");
  });

  it("fails a task whose snapshot is of another task, instead of running it without its effects", async () => {
    await using s = await startStack({ url: server.url, mock });
    const other = newTaskId();
    const outcome = await resumeOrphan(s, { id: "task", version: TASK_MACHINE_VERSION, snapshot: await runningSnapshot(other) });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error?.message).toContain(`cannot resume the task: stored snapshot is of task '${other}'`);
  });

  it("migrates a v1 snapshot (its evaluation under xstate's generated id) and completes the task", async () => {
    await using s = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const current = (await runningSnapshot(taskId)) as { children: Record<string, unknown> };
    const v1 = { ...current, children: { "0.task.running": current.children.evaluate } };
    const outcome = await resumeOrphan(s, { id: "task", version: 1, snapshot: v1 }, taskId);
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "resumed answer" });
  });

  it("fails a task whose older snapshot has no migration, with a clear error", async () => {
    await using s = await startStack({ url: server.url, mock });
    const outcome = await resumeOrphan(s, { id: "task", version: 0, snapshot: await runningSnapshot(newTaskId()) });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error?.message).toContain(
      `cannot resume the task: stored snapshot is of task machine v0; this release (v${TASK_MACHINE_VERSION}) has no migration from v0`,
    );
  });

  it("applies the migrations it is given, in order, and refuses a migration that throws", async () => {
    const snapshot = await runningSnapshot("t-migrate");
    const at = new Date().toISOString();
    const record = (version: number): TaskRecord => ({
      taskId: "t-migrate" as TaskRecord["taskId"],
      state: "running",
      xml: XML,
      inputs: {},
      submittedAt: at,
      updatedAt: at,
      machine: { id: "task", version, snapshot: { old: true } },
    });
    const steps: number[] = [];
    const migrations = Object.fromEntries(
      Array.from({ length: TASK_MACHINE_VERSION }, (_, v) => [
        v,
        (old: unknown) => (steps.push(v), v === TASK_MACHINE_VERSION - 1 ? snapshot : old),
      ]),
    );
    expect(restorable(record(0), migrations)).toEqual({ kind: "snapshot", snapshot, migratedFrom: 0 });
    expect(steps).toEqual(Array.from({ length: TASK_MACHINE_VERSION }, (_, v) => v));
    const broken = restorable(record(0), {
      ...migrations,
      0: () => {
        throw new Error("bad shape");
      },
    });
    expect(broken).toEqual({ kind: "refused", message: expect.stringContaining("could not be migrated from v0: bad shape") });
  });

  it("stores the running machine's snapshot and version in the task's record", async () => {
    await using s = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const events = new Recorder<TaskEvent>();
    const watch = s.client.watch(taskId, (e) => events.push(e));
    await s.transport.bus.flush();
    // Longer than a pending claim: the claim, with the snapshot, is stored while the task runs.
    await s.client.submit({ xml: "<task><description>SLOWER one</description></task>", taskId });
    await events.until((v) => v.some((e) => e.type === "model.turn" || e.type === "node.started"), "the task to run");
    const deadline = Date.now() + 5000;
    let record = (await readTaskRecord(s.transport.store, taskId))?.record;
    // The checkpoint follows the state change asynchronously: poll the record briefly.
    while (!record?.machine && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      record = (await readTaskRecord(s.transport.store, taskId))?.record;
    }
    expect(record?.machine).toMatchObject({
      id: "task",
      version: TASK_MACHINE_VERSION,
      snapshot: { status: "active", value: { running: "executing" } },
    });
    await watch.result;
    await watch.close();
  });
});
