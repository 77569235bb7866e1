/**
 * Durable ownership of tasks over a real nats-server: the intake stream's configuration, compare-and-set claims on
 * the task record, duplicate deliveries and resubmissions, items that keep failing handed back with a pause, and a
 * Director resuming a task whose owner is gone.
 */
import { AckPolicy, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { retryDelayMs } from "../../actors/bus.js";
import { claimTask, PENDING_CLAIM_MS, pendingClaim, readTaskRecord, requestCancel, writeClaimed } from "../../actors/director/records.js";
import { createSubjects, decode, encode, encodeJson, TaskEvent, TaskOutcome, TaskRecord } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { connectNats } from "../../runtime/nats/bus.js";
import { openTaskStore } from "../../runtime/nats/store.js";
import { DEFAULT_MAX_ACK_PENDING, openWorkQueue } from "../../runtime/nats/queue.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

const XML = `<task><description>Name the capital of {{country}}.</description><model>scripted-model</model></task>`;

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ match: { lastUser: "capital of France" }, reply: "Paris" }] } });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const fixedNow = () => new Date("2026-11-22T10:00:00.000Z");

const queuedRecord = (taskId: string, extra: Partial<TaskRecord> = {}): TaskRecord => ({
  taskId: taskId as TaskRecord["taskId"],
  state: "queued",
  xml: XML,
  inputs: { country: "France" },
  submittedAt: fixedNow().toISOString(),
  updatedAt: fixedNow().toISOString(),
  ...extra,
});

/** Records every event and result message of a task on the stack's bus. */
function watch(stack: Stack, taskId: string) {
  const events = new Recorder<TaskEvent>();
  const results = new Recorder<TaskOutcome>();
  const subjects = createSubjects(stack.root);
  stack.transport.bus.subscribe(subjects.taskEvents(taskId), (m) => {
    const d = decode(TaskEvent, m.data);
    if (d.ok) events.push(d.value);
  });
  stack.transport.bus.subscribe(subjects.taskResult(taskId), (m) => {
    const d = decode(TaskOutcome, m.data);
    if (d.ok) results.push(d.value);
  });
  return { events, results, subjects };
}

describe("the intake stream", () => {
  it("is a file-stored work queue that drops a repeated task id within two minutes, read by one durable consumer", async () => {
    const subjects = createSubjects(randomRoot());
    const nc = await connectNats({ servers: server.url, name: "durability-intake" });
    try {
      const queue = await openWorkQueue(nc, subjects, { ackWaitMs: 4000 });
      const jsm = await jetstreamManager(nc);
      const { config } = await jsm.streams.info(subjects.intakeStream);
      expect(config).toMatchObject({
        subjects: [subjects.anyIntake],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: 120_000 * 1_000_000,
        allow_direct: true,
      });
      const consumer = await jsm.consumers.info(subjects.intakeStream, subjects.directorConsumer);
      expect(consumer.config).toMatchObject({
        durable_name: subjects.directorConsumer,
        ack_policy: AckPolicy.Explicit,
        ack_wait: 4000 * 1_000_000,
        max_ack_pending: DEFAULT_MAX_ACK_PENDING,
      });
      expect(await queue.enqueue("t-1", encodeJson({ taskId: "t-1" }))).toEqual({ duplicate: false, seq: 1 });
      expect(await queue.enqueue("t-1", encodeJson({ taskId: "t-1" }))).toEqual({ duplicate: true, seq: 1 });
      expect((await jsm.streams.info(subjects.intakeStream)).state.messages).toBe(1);
    } finally {
      await nc.close();
    }
  });

  it("hands an item whose handler keeps failing back after a growing pause, never in a hot loop", async () => {
    const subjects = createSubjects(randomRoot());
    const nc = await connectNats({ servers: server.url, name: "durability-failing" });
    try {
      const queue = await openWorkQueue(nc, subjects, { onError: () => undefined });
      await queue.enqueue("t-fails", encodeJson({ taskId: "t-fails" }));
      const deliveries = new Recorder<{ n: number; at: number }>();
      const consuming = queue.consume(
        async (item) => {
          deliveries.push({ n: item.deliveries, at: Date.now() });
          throw new Error("cannot handle this item");
        },
        { concurrency: 1 },
      );
      await deliveries.count(4, "four deliveries", 10_000);
      await consuming.unsubscribe();
      const [first, ...later] = deliveries.values.slice(0, 4);
      let previous = first;
      for (const d of later) {
        // Redelivered no sooner than the pause after the previous delivery (the server's clock may round a little).
        expect(d.at - (previous?.at ?? 0)).toBeGreaterThanOrEqual(retryDelayMs(previous?.n ?? 1) - 20);
        previous = d;
      }
      expect(deliveries.values.slice(0, 4).map((d) => d.n)).toEqual([1, 2, 3, 4]);
    } finally {
      await nc.close();
    }
  });
});

describe("claims on the task record (compare-and-set, KV)", () => {
  it("claims a queued task, lets a redelivery take a stale claim over, and the first owner then loses every write", async () => {
    const nc = await connectNats({ servers: server.url, name: "durability-cas" });
    try {
      const store = await openTaskStore(nc, createSubjects(randomRoot()));
      const taskId = newTaskId();
      await store.create(taskId, encode(TaskRecord, queuedRecord(taskId)));

      const first = await claimTask(store, taskId, "director-a", fixedNow);
      expect(first).toMatchObject({ kind: "claimed", claim: { owner: "director-a", record: { state: "running", seq: 1 } } });
      if (first.kind !== "claimed") throw new Error("unreachable");
      expect(first.claim.previousOwner).toBeUndefined();

      // A cancel request from elsewhere is kept by the owner's next write.
      expect(await requestCancel(store, taskId, fixedNow, async () => undefined)).toMatchObject({ kind: "requested" });
      expect(await writeClaimed(store, first.claim, (r) => ({ ...r, seq: 4 }))).toBe("written");
      expect((await readTaskRecord(store, taskId))?.record).toMatchObject({ cancelRequested: true, seq: 4, owner: "director-a" });

      const second = await claimTask(store, taskId, "director-b", () => new Date("2026-11-22T10:00:30.000Z"));
      expect(second).toMatchObject({ kind: "claimed", claim: { owner: "director-b", previousOwner: "director-a", record: { seq: 4 } } });
      if (second.kind !== "claimed") throw new Error("unreachable");
      expect(await writeClaimed(store, first.claim, (r) => ({ ...r, state: "completed" }))).toBe("lost");

      expect(await writeClaimed(store, second.claim, (r) => ({ ...r, state: "completed" }))).toBe("written");
      expect(await claimTask(store, taskId, "director-c", fixedNow)).toMatchObject({
        kind: "final",
        record: { state: "completed", owner: "director-b" },
      });
      expect(await writeClaimed(store, second.claim, (r) => ({ ...r, state: "failed" }))).toBe("lost");
      expect(await claimTask(store, newTaskId(), "director-c", fixedNow)).toEqual({ kind: "missing" });
    } finally {
      await nc.close();
    }
  });

  it("gives a task to exactly one of several Directors claiming it at once", async () => {
    const nc = await connectNats({ servers: server.url, name: "durability-race" });
    try {
      const store = await openTaskStore(nc, createSubjects(randomRoot()));
      const taskId = newTaskId();
      await store.create(taskId, encode(TaskRecord, queuedRecord(taskId)));
      const claims = await Promise.all(["a", "b", "c", "d"].map((o) => claimTask(store, taskId, `director-${o}`, fixedNow)));
      const claimed = claims.flatMap((c) => (c.kind === "claimed" ? [c.claim] : []));
      // Every claimer that saw the record before a rival's write retries and takes it over; the last one holds it.
      const written = await Promise.all(claimed.map((c) => writeClaimed(store, c, (r) => ({ ...r, state: "completed" }))));
      expect(written.filter((w) => w === "written")).toHaveLength(1);
      expect((await readTaskRecord(store, taskId))?.record.state).toBe("completed");
    } finally {
      await nc.close();
    }
  });
});

describe("exactly one result per task", () => {
  it("ignores a duplicate intake delivery of a finished task and a resubmission with the same id", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const { events, results, subjects } = watch(stack, taskId);
    await stack.transport.bus.flush();
    const outcome = await stack.client.run({ xml: XML, inputs: { country: "France" }, taskId });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "Paris" });

    // A second intake message for the same task, outside the stream's de-duplication (no message id).
    stack.transport.bus.publish(subjects.intake(taskId), encodeJson({ taskId }));
    await stack.transport.bus.flush();
    expect(await stack.client.submit({ xml: XML, inputs: { country: "France" }, taskId })).toEqual({ taskId, status: "duplicate" });
    const nc = await connectNats({ servers: server.url, name: "durability-size" });
    try {
      const queue = await openWorkQueue(nc, subjects);
      // The Director acks the duplicate once it sees the final record; nothing signals that, so poll the queue.
      const deadline = Date.now() + 10_000;
      while ((await queue.size()) > 0) {
        if (Date.now() > deadline) throw new Error("duplicate intake message was never acked");
        await delay(50);
      }
    } finally {
      await nc.close();
    }
    await stack.transport.bus.flush();
    expect(results.values).toHaveLength(1);
    expect(events.values.filter((e) => e.type === "task.completed")).toHaveLength(1);
    expect((await stack.client.get(taskId)).state).toBe("completed");
  });

  it("resumes a task whose owner is gone: continues the seq, finishes once, records the new owner", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const taskId = newTaskId();
    const { events, results } = watch(stack, taskId);
    await stack.transport.bus.flush();
    const stale = queuedRecord(taskId, { state: "running", owner: "director-gone", claimedAt: fixedNow().toISOString(), seq: 5 });
    await stack.transport.store.create(taskId, encode(TaskRecord, stale));
    await stack.transport.queue.enqueue(taskId, encodeJson({ taskId }));

    await results.count(1, "the result", 10_000);
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(results.values[0]).toMatchObject({ status: "COMPLETE", content: "Paris" });
    expect(events.values[0]).toMatchObject({ type: "task.resumed", seq: 6, data: { previousOwner: "director-gone" } });
    const seqs = events.values.map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => 6 + i));
    const record = (await readTaskRecord(stack.transport.store, taskId))?.record;
    expect(record).toMatchObject({ state: "completed", seq: seqs.at(-1), result: { content: "Paris" } });
    expect(record?.owner).toMatch(/^director-/);
    expect(record?.owner).not.toBe("director-gone");
  });
});

describe("a Director whose claim was taken over", () => {
  it("publishes nothing when another finisher stored the final record first, and acks its delivery", async () => {
    const slow = await startMockLlm({ port: 0, script: { rules: [{ reply: "late answer", delayMs: 500 }] } });
    try {
      await using stack = await startStack({ url: server.url, mock: slow });
      const taskId = newTaskId();
      const { events, results, subjects } = watch(stack, taskId);
      await stack.transport.bus.flush();
      await stack.client.submit({ xml: XML, inputs: { country: "France" }, taskId });
      await events.until((v) => v.some((e) => e.type === "node.started"), "the evaluation to start");

      // The task runs under a pending claim (no record yet); another Director stores its claim first.
      const thief = await claimTask(stack.transport.store, taskId, "director-thief", fixedNow, { queued: queuedRecord(taskId) });
      if (thief.kind !== "claimed") throw new Error(`expected a claim, got ${thief.kind}`);
      const theirs: TaskOutcome = { taskId: thief.claim.record.taskId, status: "COMPLETE", content: "theirs", notes: {} };
      expect(await writeClaimed(stack.transport.store, thief.claim, (r) => ({ ...r, state: "completed", result: theirs }))).toBe("written");

      const nc = await connectNats({ servers: server.url, name: "durability-stolen" });
      try {
        const queue = await openWorkQueue(nc, subjects);
        // The Director acks once its model call returned and its final write lost; nothing signals that, so poll.
        const deadline = Date.now() + 10_000;
        while ((await queue.size()) > 0) {
          if (Date.now() > deadline) throw new Error("the Director never acked its delivery");
          await delay(50);
        }
      } finally {
        await nc.close();
      }
      await stack.transport.bus.flush();
      expect(slow.requests).toHaveLength(1);
      expect(results.values).toHaveLength(0);
      expect(events.values.some((e) => e.type.startsWith("task.completed"))).toBe(false);
      expect((await readTaskRecord(stack.transport.store, taskId))?.record).toMatchObject({
        owner: "director-thief",
        result: { content: "theirs" },
      });
    } finally {
      await slow.close();
    }
  });
});

describe("a task's record, from the intake queue to its final state", () => {
  /** Counts every write of a task's record: a KV write is a message on `$KV.<bucket>.<id>`. */
  function recordWrites(stack: Stack, taskId: string) {
    const writes = new Recorder<TaskRecord>();
    stack.transport.bus.subscribe(`$KV.${createSubjects(stack.root).tasksBucket}.${taskId}`, (m) => {
      const d = decode(TaskRecord, m.data);
      if (d.ok) writes.push(d.value);
    });
    return writes;
  }

  it("writes a short task's record once, final, and a longer one's claim while it runs", async () => {
    const slow = await startMockLlm({
      port: 0,
      script: { rules: [{ match: { lastUser: "slowly" }, reply: "late", delayMs: PENDING_CLAIM_MS + 400 }, { reply: "soon" }] },
    });
    try {
      await using stack = await startStack({ url: server.url, mock: slow });
      const quick = newTaskId();
      const long = newTaskId();
      const quickWrites = recordWrites(stack, quick);
      const longWrites = recordWrites(stack, long);
      await stack.transport.bus.flush();
      expect(await stack.client.run({ xml: "<task><description>answer</description></task>", taskId: quick })).toMatchObject({
        status: "COMPLETE",
        content: "soon",
      });
      expect(await stack.client.run({ xml: "<task><description>answer slowly</description></task>", taskId: long })).toMatchObject({
        status: "COMPLETE",
        content: "late",
      });
      await stack.transport.bus.flush();
      expect(quickWrites.values.map((r) => r.state)).toEqual(["completed"]);
      expect(quickWrites.values[0]).toMatchObject({
        owner: expect.stringMatching(/^director-/),
        intakeSeq: expect.any(Number),
        result: { content: "soon" },
      });
      // Claimed while it waited for the model (the pending claim fell due), then final.
      expect(longWrites.values[0]).toMatchObject({ state: "running", owner: expect.stringMatching(/^director-/) });
      expect(longWrites.values.at(-1)).toMatchObject({ state: "completed", result: { content: "late" } });
    } finally {
      await slow.close();
    }
  });

  it("answers status and cancel for a task still in the queue: queued, then cancelled without ever running", async () => {
    const slow = await startMockLlm({
      port: 0,
      script: { rules: [{ match: { lastUser: "blocker" }, reply: "done", delayMs: 1500 }, { reply: "ran" }] },
    });
    try {
      // One task at a time: the second waits in the queue behind the first.
      await using stack = await startStack({ url: server.url, mock: slow, config: { concurrency: 1 } });
      const blocker = newTaskId();
      const waiting = newTaskId();
      const { events, results } = watch(stack, waiting);
      const writes = recordWrites(stack, waiting);
      await stack.transport.bus.flush();
      await stack.client.submit({ xml: "<task><description>blocker</description></task>", taskId: blocker });
      await stack.client.submit({ xml: "<task><description>second</description></task>", taskId: waiting });
      expect(await stack.client.get(waiting)).toMatchObject({ taskId: waiting, state: "queued" });
      expect(await stack.client.cancel(waiting)).toEqual({ taskId: waiting, state: "cancelled", cancelled: true });
      await results.count(1, "the cancelled result");
      expect(results.values[0]).toMatchObject({ status: "CANCELLED" });
      expect(events.values.map((e) => e.type)).toEqual(["task.queued", "task.cancelled"]);
      expect(await stack.client.get(waiting)).toMatchObject({ state: "cancelled" });
      // The blocker ends; the cancelled task's queue item is gone, so it never runs.
      expect(await stack.client.run({ xml: "<task><description>third</description></task>", taskId: newTaskId() })).toMatchObject({
        content: "ran",
      });
      expect(slow.requests.map((r) => JSON.stringify(r.body)).filter((b) => b.includes("second"))).toHaveLength(0);
      expect(writes.values.map((r) => r.state)).toEqual(["cancelled"]);
      expect(await stack.client.cancel(waiting)).toEqual({ taskId: waiting, state: "cancelled", cancelled: false });
    } finally {
      await slow.close();
    }
  });

  it("answers a task submitted again after the duplicate window as a duplicate, and does not run it again", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    // The intake stream made beforehand with a one-second window (the runtime uses a stream as it finds it).
    const nc = await connectNats({ servers: server.url, name: "durability-window" });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({
        name: subjects.intakeStream,
        subjects: [subjects.anyIntake],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: 1_000_000_000,
        allow_direct: true,
      });
      await using stack = await startStack({ url: server.url, mock, root });
      const taskId = newTaskId();
      const { events, results } = watch(stack, taskId);
      await stack.transport.bus.flush();
      expect(await stack.client.run({ xml: XML, inputs: { country: "France" }, taskId })).toMatchObject({ status: "COMPLETE" });
      const calls = mock.requests.length;
      await delay(1200);
      expect(await stack.client.submit({ xml: XML, inputs: { country: "France" }, taskId })).toEqual({ taskId, status: "duplicate" });
      // The second queue item was removed at once.
      expect((await jsm.streams.info(subjects.intakeStream)).state.messages).toBe(0);
      await stack.transport.bus.flush();
      expect(mock.requests.length).toBe(calls);
      expect(results.values).toHaveLength(1);
      expect(events.values.filter((e) => e.type === "task.completed")).toHaveLength(1);
    } finally {
      await nc.close();
    }
  });

  it("loses a pending claim to a Director that stored the record first", async () => {
    const nc = await connectNats({ servers: server.url, name: "durability-pending" });
    try {
      const store = await openTaskStore(nc, createSubjects(randomRoot()));
      const taskId = newTaskId();
      const pending = pendingClaim(queuedRecord(taskId), "director-a", fixedNow, 7);
      expect(await readTaskRecord(store, taskId)).toBeUndefined();
      const other = await claimTask(store, taskId, "director-b", fixedNow, { queued: queuedRecord(taskId), intakeSeq: 7 });
      expect(other).toMatchObject({ kind: "claimed", claim: { owner: "director-b", record: { state: "running", intakeSeq: 7 } } });
      expect(await writeClaimed(store, pending, (r) => ({ ...r, state: "completed" }))).toBe("lost");
      // Another queue item of the same id is not this record's.
      expect(await claimTask(store, taskId, "director-c", fixedNow, { queued: queuedRecord(taskId), intakeSeq: 8 })).toEqual({
        kind: "duplicate",
      });
      expect((await readTaskRecord(store, taskId))?.record).toMatchObject({ owner: "director-b", state: "running" });
    } finally {
      await nc.close();
    }
  });
});
