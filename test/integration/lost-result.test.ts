/**
 * A task whose owner stored its final record and never got its result into the events stream (it died in between, or
 * the write failed): the Director that gets the task's delivery again finds it final and publishes the result once,
 * with the task's last event right after the last one stored, unless that one is stored already. Real nats-server and
 * a real Director; the test holds the intake item's first delivery (the owner's, who is gone) and stores what that
 * owner had stored before it hands the item back.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { WorkItem, WorkQueue } from "../../actors/bus.js";
import { encode, TaskEvent, TaskRecord, type TaskId } from "../../protocol/index.js";
import type { OpenTransport } from "../../runtime/transport.js";
import { follow, queuedRecord, XML } from "../support/durability.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;

beforeAll(async () => {
  server = await startTestNatsServer();
});

afterAll(async () => {
  await server?.stop();
});

/** The transport with each intake item's first delivery held in `held` until the test hands it back (`release`). */
function holdFirstDeliveries(opened: OpenTransport, held: Recorder<{ item: WorkItem; release: () => void }>): OpenTransport {
  const queue = new Proxy(opened.queue, {
    get: (target, name) => {
      if (name === "consume")
        return (handler: (item: WorkItem) => Promise<void>, options: { concurrency: number }) =>
          target.consume((item) => {
            if (item.deliveries > 1) return handler(item);
            return new Promise<void>((resolve) => held.push({ item, release: () => (item.nak(), resolve()) }));
          }, options);
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as WorkQueue;
  return { ...opened, queue };
}

/**
 * Submits a task whose first delivery the owner that is gone took: it stored the events `stored` (after the
 * intake's `task.queued`, seq 1) and its final record counting `counted` events, then never published the result.
 * The Director gets the item again once that is stored.
 */
async function finishedByAGoneOwner(stored: readonly { seq: number; type: string; state: TaskEvent["state"] }[], counted: number) {
  const held = new Recorder<{ item: WorkItem; release: () => void }>();
  const d = await startStack({ url: server.url, roles: ["director"], ackWaitMs: 1500, wrapTransport: (o) => holdFirstDeliveries(o, held) });
  onTestFinished(() => d.stop());
  const taskId = newTaskId();
  const watched = await follow(d, taskId);
  await d.client.submit({ xml: XML, inputs: { country: "France" }, taskId });
  const [first] = await held.count(1, "the first delivery");
  const at = new Date().toISOString();
  const record: TaskRecord = queuedRecord(taskId, {
    state: "completed",
    owner: "director-gone",
    claimedAt: at,
    seq: counted,
    result: { taskId: taskId as TaskId, status: "COMPLETE", content: "Paris", notes: {} },
  });
  expect(await d.transport.store.create(taskId, encode(TaskRecord, record))).toBe("created");
  const publishStored = d.transport.publishStored;
  if (publishStored === undefined) throw new Error("a NATS transport stores events");
  for (const e of stored)
    await publishStored(
      watched.subjects.taskEvents(taskId),
      encode(TaskEvent, { taskId: taskId as TaskId, seq: e.seq, type: e.type, state: e.state, at }),
      `gone-owner.${e.seq}`,
    );
  first?.release();
  await watched.results.count(1, "the result");
  await d.transport.bus.flush();
  return watched;
}

describe("a redelivered task whose owner stored its outcome and not its result", () => {
  it("gets its result published once, its last event right after the last one stored", async () => {
    // The owner's record counts 5 events (3 and 4 never stored): the last event is 3, not 5.
    const { events, results } = await finishedByAGoneOwner([{ seq: 2, type: "task.running", state: "running" }], 5);
    expect(results.values).toMatchObject([{ status: "COMPLETE", content: "Paris" }]);
    expect(events.values.map((e) => [e.seq, e.type])).toEqual([
      [1, "task.queued"],
      [2, "task.running"],
      [3, "task.completed"],
    ]);
  });

  it("publishes only the result when the task's last event is stored already", async () => {
    const { events, results } = await finishedByAGoneOwner(
      [
        { seq: 2, type: "task.running", state: "running" },
        { seq: 3, type: "task.completed", state: "completed" },
      ],
      3,
    );
    expect(results.values).toHaveLength(1);
    expect(events.values.map((e) => [e.seq, e.type])).toEqual([
      [1, "task.queued"],
      [2, "task.running"],
      [3, "task.completed"],
    ]);
  });
});
