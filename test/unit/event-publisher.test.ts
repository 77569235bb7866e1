/** Task events stored in the events stream (actors/director/message-fit.ts): one task's in order, each under its own id. */
import { describe, expect, it } from "vitest";
import { eventPublisher } from "../../actors/director/message-fit.js";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { createSubjects, decode, TaskEvent } from "../../protocol/index.js";
import { MemoryBus } from "../../runtime/in-process/bus.js";

const deps = (): ActorDeps => ({
  bus: new MemoryBus({ onError: () => undefined }),
  subjects: createSubjects("unit"),
  log: silentLogger,
  now: () => new Date(0),
  newId: () => "id",
});

describe("eventPublisher with a store", () => {
  it("stores one task's events one after the other in the order published, each under a message id of its own", async () => {
    const stored: { taskId: string; seq: number; id: string }[] = [];
    const inFlight = new Set<string>();
    let overlapped = false;
    // Earlier events take longer to store: stored side by side, later ones would land first.
    const store = async (_subject: string, data: Uint8Array, id: string) => {
      const event = decode(TaskEvent, data);
      if (!event.ok) throw new Error("not an event");
      const { taskId, seq } = event.value;
      if (inFlight.has(taskId)) overlapped = true;
      inFlight.add(taskId);
      await new Promise((resolve) => setTimeout(resolve, 20 - 3 * seq));
      inFlight.delete(taskId);
      // The third event's store gives up (an election outlasting its patience): logged, the next ones still go.
      if (taskId === "t1" && seq === 3) throw new Error("no leader");
      stored.push({ taskId, seq, id });
    };
    const publish = eventPublisher(deps(), store);
    for (let seq = 1; seq <= 5; seq++) publish("t1", seq, "node.started", "running");
    publish("t2", 1, "task.queued", "queued");
    await Promise.all([publish.settled("t1"), publish.settled("t2")]);
    expect(stored.filter((s) => s.taskId === "t1").map((s) => s.seq)).toEqual([1, 2, 4, 5]);
    expect(stored.filter((s) => s.taskId === "t2").map((s) => s.seq)).toEqual([1]);
    // Another task's event does not wait for t1's: it is stored before t1's last.
    expect(stored.findIndex((s) => s.taskId === "t2")).toBeLessThan(stored.length - 1);
    expect(overlapped).toBe(false);
    expect(new Set(stored.map((s) => s.id)).size).toBe(stored.length);
  });

  it("cut: drops a task's events not sent yet, signals the one being stored, and a later event starts afresh", async () => {
    const stored: number[] = [];
    const signals: (AbortSignal | undefined)[] = [];
    let release: () => void = () => undefined;
    const store = async (_subject: string, data: Uint8Array, _id: string, signal?: AbortSignal) => {
      const event = decode(TaskEvent, data);
      if (!event.ok) throw new Error("not an event");
      signals.push(signal);
      if (event.value.seq === 1) await new Promise<void>((resolve) => (release = resolve));
      stored.push(event.value.seq);
    };
    const publish = eventPublisher(deps(), store);
    publish("t1", 1, "node.started", "running");
    publish("t1", 2, "model.turn", "running");
    publish("t1", 3, "node.finished", "running");
    await new Promise<void>((resolve) => setImmediate(resolve));
    let cutDone = false;
    const cut = publish.cut("t1").then(() => (cutDone = true));
    await new Promise<void>((resolve) => setImmediate(resolve));
    // The store under way is told (no retry) and waited for; the two behind it never go out.
    expect(signals[0]?.aborted).toBe(true);
    expect(cutDone).toBe(false);
    release();
    await cut;
    expect(stored).toEqual([1]);
    publish("t1", 9, "task.resumed", "running");
    await publish.settled("t1");
    expect(stored).toEqual([1, 9]);
    expect(signals[1]?.aborted).toBe(false);
  });

  it("publishes plainly without a store", async () => {
    const d = deps();
    const seen: number[] = [];
    d.bus.subscribe(d.subjects.taskEvents("t1"), (m) => {
      const e = decode(TaskEvent, m.data);
      if (e.ok) seen.push(e.value.seq);
    });
    const publish = eventPublisher(d);
    publish("t1", 1, "task.queued", "queued");
    await publish.settled("t1");
    await d.bus.flush();
    expect(seen).toEqual([1]);
  });
});
