/** Task events stored in the events stream (actors/director/message-fit.ts): one task's in order, each under its own id. */
import { describe, expect, it } from "vitest";
import { eventPublisher, type EventPublisher } from "../../actors/director/message-fit.js";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { createSubjects, decode, TaskEvent } from "../../protocol/index.js";
import { MemoryBus } from "../../runtime/in-process/bus.js";
import { tid } from "../support/ids.js";

/** Resolves once every event of `taskId` published so far is stored (or given up on): nothing follows them. */
const settled = (publish: EventPublisher, taskId: string) => publish.afterEvents(tid(taskId), async () => undefined);

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
    for (let seq = 1; seq <= 5; seq++) publish(tid("t1"), seq, "node.started", "running");
    publish(tid("t2"), 1, "task.queued", "queued");
    await Promise.all([settled(publish, "t1"), settled(publish, "t2")]);
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
    publish(tid("t1"), 1, "node.started", "running");
    publish(tid("t1"), 2, "model.turn", "running");
    publish(tid("t1"), 3, "node.finished", "running");
    await new Promise<void>((resolve) => setImmediate(resolve));
    let cutDone = false;
    const cut = publish.cut(tid("t1")).then(() => (cutDone = true));
    await new Promise<void>((resolve) => setImmediate(resolve));
    // The store under way is told (no retry) and waited for; the two behind it never go out.
    expect(signals[0]?.aborted).toBe(true);
    expect(cutDone).toBe(false);
    release();
    await cut;
    expect(stored).toEqual([1]);
    publish(tid("t1"), 9, "task.resumed", "running");
    await settled(publish, "t1");
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
    publish(tid("t1"), 1, "task.queued", "queued");
    await settled(publish, "t1");
    await d.bus.flush();
    expect(seen).toEqual([1]);
  });
});

describe("eventPublisher: what follows the events (the result)", () => {
  /** A store that records the order of calls and settles each write when told. */
  const manual = () => {
    const calls: string[] = [];
    const pending = new Map<string, { resolve: () => void; reject: (err: Error) => void }>();
    const store = (subject: string, data: Uint8Array) => {
      const event = decode(TaskEvent, data);
      const name = event.ok ? `e${event.value.seq}` : subject;
      calls.push(name);
      return new Promise<void>((resolve, reject) => pending.set(name, { resolve, reject }));
    };
    const settle = (name: string, err?: Error) => {
      const p = pending.get(name);
      if (p === undefined) throw new Error(`${name} was not sent`);
      if (err) p.reject(err);
      else p.resolve();
    };
    return { calls, store, settle };
  };
  const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

  it("where the stream keeps the order sent, sends every event and the result at once and resolves once all are stored", async () => {
    const { calls, store, settle } = manual();
    const publish = eventPublisher(deps(), store, undefined, () => true);
    for (let seq = 1; seq <= 3; seq++) publish(tid("t1"), seq, "node.started", "running");
    let done = false;
    const result = publish.afterEvents(tid("t1"), () => store("result", new Uint8Array())).then(() => (done = true));
    // All sent before any acknowledgement, the result last.
    expect(calls).toEqual(["e1", "e2", "e3", "result"]);
    settle("result");
    settle("e3");
    settle("e1");
    await tick();
    expect(done).toBe(false);
    // An event that is not stored is logged; the result still resolves once it has ended.
    settle("e2", new Error("no leader"));
    await result;
    expect(done).toBe(true);
  });

  it("else sends the result only once the last event is stored, and rejects as its store does", async () => {
    const { calls, store, settle } = manual();
    const publish = eventPublisher(deps(), store, undefined, () => false);
    publish(tid("t1"), 1, "node.started", "running");
    publish(tid("t1"), 2, "task.completed", "completed");
    const result = publish.afterEvents(tid("t1"), () => store("result", new Uint8Array()));
    await tick();
    expect(calls).toEqual(["e1"]);
    settle("e1");
    await tick();
    expect(calls).toEqual(["e1", "e2"]);
    settle("e2");
    await tick();
    expect(calls).toEqual(["e1", "e2", "result"]);
    settle("result", new Error("result not stored"));
    await expect(result).rejects.toThrow("result not stored");
  });

  it("rejects as the result's store does where the order is kept too, after the events", async () => {
    const { store, settle } = manual();
    const publish = eventPublisher(deps(), store, undefined, () => true);
    publish(tid("t1"), 1, "task.completed", "completed");
    let rejected = false;
    const result = publish
      .afterEvents(tid("t1"), () => store("result", new Uint8Array()))
      .catch((err: Error) => ((rejected = true), err.message));
    settle("result", new Error("result not stored"));
    await tick();
    expect(rejected).toBe(false);
    settle("e1");
    expect(await result).toBe("result not stored");
  });
});
