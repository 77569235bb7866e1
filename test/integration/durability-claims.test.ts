/**
 * Durable ownership of tasks over a real nats-server, at the level of the stores: the intake stream's configuration,
 * items that keep failing handed back with a pause, and compare-and-set claims on the task record.
 * (test/integration/durability-tasks.test.ts runs whole tasks.)
 */
import { AckPolicy, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { retryDelayMs, type TaskStore } from "../../actors/bus.js";
import { claimTask, pendingClaim, readTaskRecord, requestCancel, writeClaimed } from "../../actors/director/records.js";
import { createSubjects, encode, encodeJson, TaskRecord } from "../../protocol/index.js";
import { connectNats } from "../../runtime/nats/bus.js";
import { openTaskStore } from "../../runtime/nats/store.js";
import { DEFAULT_MAX_ACK_PENDING, openWorkQueue } from "../../runtime/nats/queue.js";
import { fixedNow, queuedRecord } from "../support/durability.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId } from "../support/stack.js";

let server: TestNatsServer;

beforeAll(async () => {
  server = await startTestNatsServer();
});

afterAll(async () => {
  await server?.stop();
});

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

  it("takes its own write as written when it landed and only the answer was lost, a final one too", async () => {
    const nc = await connectNats({ servers: server.url, name: "durability-lost-answer" });
    try {
      const real = await openTaskStore(nc, createSubjects(randomRoot()));
      // A write sent again after a reconnect is refused when the first one landed: the writer sees `undefined`, as
      // when another writer came first. `lose` makes each write land and then answer so.
      let lose = false;
      const store = new Proxy(real, {
        get(target, name) {
          if (name === "update")
            return async (key: string, value: Uint8Array, revision: number) => {
              const written = await target.update(key, value, revision);
              return lose ? undefined : written;
            };
          if (name === "createWithRevision")
            return async (key: string, value: Uint8Array) => {
              const written = await target.createWithRevision(key, value);
              return lose ? undefined : written;
            };
          const value: unknown = Reflect.get(target, name, target);
          return typeof value === "function" ? value.bind(target) : value;
        },
      }) as TaskStore;

      // A first delivery's pending claim: its first write, the final one, creates the record.
      const fresh = newTaskId();
      const pending = pendingClaim(queuedRecord(fresh), "director-a", fixedNow, 1);
      lose = true;
      expect(await writeClaimed(store, pending, (r) => ({ ...r, state: "completed", seq: 2 }))).toBe("written");
      expect((await readTaskRecord(real, fresh))?.record).toMatchObject({ state: "completed", owner: "director-a" });

      // A stored claim: a checkpoint, then the final write.
      const taskId = newTaskId();
      await real.create(taskId, encode(TaskRecord, queuedRecord(taskId)));
      const claimed = await claimTask(real, taskId, "director-a", fixedNow);
      if (claimed.kind !== "claimed") throw new Error("expected a claim");
      expect(await writeClaimed(store, claimed.claim, (r) => ({ ...r, seq: 2 }))).toBe("written");
      expect(await writeClaimed(store, claimed.claim, (r) => ({ ...r, state: "completed", seq: 3 }))).toBe("written");
      // Another final write of the same claim is not this one: the task is final, the claim is over.
      lose = false;
      expect(await writeClaimed(store, claimed.claim, (r) => ({ ...r, state: "failed", seq: 4 }))).toBe("lost");
      expect((await readTaskRecord(real, taskId))?.record).toMatchObject({ state: "completed", seq: 3 });
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
