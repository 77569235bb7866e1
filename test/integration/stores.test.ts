/**
 * The durable writes of a task (issue 21): a trivial one-turn task makes four JetStream stores and the ack (its intake
 * item, its final record, its events in one history batch, its result), its events and result are readable after the
 * fact, a long task's events are stored while it runs, and an events stream made by an older release is updated.
 */
import { jetstreamManager, RetentionPolicy, StorageType, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createSubjects,
  decode,
  decodeTaskHistory,
  TaskEvent,
  TaskOutcome,
  type Subjects,
  type TaskHistory,
} from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { NatsBus } from "../../runtime/nats/bus.js";
import { ensureEventsStream, readTaskEvents } from "../../runtime/nats/store.js";
import { readStoredTask } from "../../runtime/inspect/replay.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const ATOMIC = `<task type="atomic"><description>Say {{word}}.</description></task>`;
const LIFECYCLE = ["task.queued", "task.running", "node.started", "model.turn", "task.completed"];

let server: TestNatsServer;
let mock: MockLlmServer;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: { rules: [{ match: { lastUser: "slowly" }, reply: "late", delayMs: 600 }, { reply: "hello" }] },
  });
  nc = await connect({ servers: server.url });
});

afterAll(async () => {
  await nc?.close();
  await mock?.close();
  await server?.stop();
});

/** Messages each of a root's streams (intake, events, task and turn buckets) has stored so far (its last sequence). */
async function storedCounts(jsm: JetStreamManager, subjects: Subjects): Promise<Record<string, number>> {
  const names = [subjects.intakeStream, subjects.eventsStream, `KV_${subjects.tasksBucket}`, `KV_${subjects.turnsBucket}`];
  const counts: Record<string, number> = {};
  for (const name of names) counts[name] = (await jsm.streams.info(name)).state.last_seq;
  return counts;
}

const eventTypes = (messages: { subject: string; data: Uint8Array }[], subjects: Subjects, taskId: string) =>
  messages.map((m) => {
    if (m.subject === subjects.taskResult(taskId)) return "result";
    const event = decode(TaskEvent, m.data);
    return event.ok ? event.value.type : "unreadable";
  });

describe("the durable writes of a task", () => {
  it("stores a trivial one-turn task in four messages: intake item, final record, one batch of events, result", async () => {
    await using stack = await startStack({ url: server.url, mock });
    const subjects = createSubjects(stack.root);
    const jsm = await jetstreamManager(nc);
    // A first task opens what opens on first use; the second is counted.
    await stack.client.run({ xml: ATOMIC, inputs: { word: "one" }, taskId: newTaskId() });
    const before = await storedCounts(jsm, subjects);
    const taskId = newTaskId();
    expect(await stack.client.run({ xml: ATOMIC, inputs: { word: "two" }, taskId })).toMatchObject({
      status: "COMPLETE",
      content: "hello",
    });
    // Everything but the ack is stored before the result is announced.
    const after = await storedCounts(jsm, subjects);
    const delta = Object.fromEntries(Object.entries(after).map(([name, seq]) => [name, seq - (before[name] ?? 0)]));
    expect(delta).toEqual({
      [subjects.intakeStream]: 1,
      [subjects.eventsStream]: 2,
      [`KV_${subjects.tasksBucket}`]: 1,
      // The session is the task's only one and ended at once: no in-flight marker, no turn record.
      [`KV_${subjects.turnsBucket}`]: 0,
    });
    // The ack follows the result: the intake item goes (asked round trip by round trip).
    const queued = async () => (await jsm.streams.info(subjects.intakeStream)).state.messages;
    for (let i = 0; i < 100 && (await queued()) > 0; i++) await stack.transport.bus.flush();
    expect(await queued()).toBe(0);
  });

  it("keeps a finished task's events and result readable after the fact, in order", async () => {
    const taskId = newTaskId();
    const first = await startStack({ url: server.url, mock });
    await first.client.run({ xml: ATOMIC, inputs: { word: "three" }, taskId });
    await first.stop();
    const subjects = createSubjects(first.root);
    const expected = [...LIFECYCLE, "result"];
    expect(eventTypes(await readTaskEvents(nc, subjects, taskId), subjects, taskId)).toEqual(expected);
    expect(eventTypes(await readStoredTask(nc, subjects, taskId), subjects, taskId)).toEqual(expected);
    const read = await readTaskEvents(nc, subjects, taskId);
    expect(read.slice(0, -1).map((m) => (decode(TaskEvent, m.data) as { ok: true; value: TaskEvent }).value.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(decode(TaskOutcome, read.at(-1)?.data ?? new Uint8Array(0))).toMatchObject({ ok: true, value: { content: "hello" } });
  });

  it("stores a long task's events while it runs, at most DIRIGENT_HISTORY_FLUSH_MS after each", async () => {
    await using stack = await startStack({ url: server.url, mock, config: { historyFlushMs: 200 } });
    const subjects = createSubjects(stack.root);
    const taskId = newTaskId();
    const seen = new Recorder<string>();
    stack.transport.bus.subscribe(subjects.taskHistory(taskId), (m) => {
      const batch = decodeTaskHistory(m.data);
      seen.push(batch.ok ? `history:${batch.value.map((e: TaskHistory[number]) => e.type).join(",")}` : "unreadable");
    });
    stack.transport.bus.subscribe(subjects.taskResult(taskId), () => seen.push("result"));
    await stack.transport.bus.flush();
    await stack.client.run({ xml: ATOMIC, inputs: { word: "slowly" }, taskId });
    await seen.until((v) => v.includes("result"), "the result");
    // The model answered after 600 ms: the first batch was stored long before, the rest with the result.
    expect(seen.values[0]).toBe("history:task.queued,task.running,node.started");
    expect(seen.values.slice(1)).toEqual(["history:model.turn,task.completed", "result"]);
    expect(eventTypes(await readTaskEvents(nc, subjects, taskId), subjects, taskId)).toEqual([...LIFECYCLE, "result"]);
  });

  it("updates an events stream an older release made: events no longer stored one by one, the old ones still readable", async () => {
    const subjects = createSubjects(randomRoot());
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({
      name: subjects.eventsStream,
      subjects: [subjects.anyTaskEvents, subjects.anyTaskResult],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
    });
    const bus = new NatsBus(nc, { onError: () => undefined });
    const event = (taskId: string, seq: number, type: string): TaskEvent => ({
      taskId: taskId as TaskEvent["taskId"],
      seq,
      type,
      state: "running",
      at: new Date(0).toISOString(),
    });
    const text = (e: TaskEvent) => new TextEncoder().encode(JSON.stringify(e));
    bus.publish(subjects.taskEvents("old"), text(event("old", 1, "task.queued")));
    await bus.flush();

    await ensureEventsStream(nc, subjects);
    const config = (await jsm.streams.info(subjects.eventsStream)).config;
    expect([...(config.subjects ?? [])].sort()).toEqual([subjects.anyTaskHistory, subjects.anyTaskResult].sort());
    const last = (await jsm.streams.info(subjects.eventsStream)).state.last_seq;
    bus.publish(subjects.taskEvents("new"), text(event("new", 1, "task.queued")));
    bus.publish(
      subjects.taskHistory("new"),
      new TextEncoder().encode(JSON.stringify([event("new", 1, "task.queued"), event("new", 2, "task.running")])),
    );
    await bus.flush();
    // The live event was not stored; the batch was.
    expect((await jsm.streams.info(subjects.eventsStream)).state.last_seq).toBe(last + 1);
    expect(eventTypes(await readTaskEvents(nc, subjects, "new"), subjects, "new")).toEqual(["task.queued", "task.running"]);
    expect(eventTypes(await readStoredTask(nc, subjects, "old"), subjects, "old")).toEqual(["task.queued"]);
    expect(eventTypes(await readTaskEvents(nc, subjects, "old"), subjects, "old")).toEqual(["task.queued"]);
    // Ensured again: nothing left to change.
    await ensureEventsStream(nc, subjects);
    expect((await jsm.streams.info(subjects.eventsStream)).config.subjects).toEqual(config.subjects);
  });
});
