/** Task events stored in the events stream (actors/director/event-publisher.ts): one task's in order, each under its own id. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { eventPublisher, type EventPublisher } from "../../actors/director/event-publisher.js";
import { FENCE_MS, type OrderedWrites } from "../../actors/director/vouching.js";
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
    const publish = eventPublisher(deps(), { store });
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
    const leftOut: number[] = [];
    const log = {
      ...silentLogger,
      info: (obj: object, msg?: string) => void (msg?.includes("left out") && leftOut.push((obj as { seq: number }).seq)),
    };
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
    const publish = eventPublisher({ ...deps(), log }, { store });
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
    // Each event left out says so (what a replay missing them is checked against); the one stored does not.
    expect(leftOut).toEqual([2, 3]);
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
  const unused: OrderedWrites = {
    holds: () => true,
    send: () => {
      throw new Error("not sent without acknowledgement here");
    },
    losses: () => 0,
  };

  it("else sends the result only once the last event is stored, and rejects as its store does", async () => {
    const { calls, store, settle } = manual();
    const publish = eventPublisher(deps(), { store, ordered: { ...unused, holds: () => false } });
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
});

describe("eventPublisher where the stream stores one connection's writes in the order sent", () => {
  afterEach(() => void vi.useRealTimers());

  /** The transport: writes sent without acknowledgement, acknowledged writes settled when told, and a loss count. */
  const transport = () => {
    const wire: string[] = [];
    const pending = new Map<string, { resolve: () => void; reject: (err: Error) => void }>();
    let lost = 0;
    const name = (subject: string, data: Uint8Array) => {
      const event = decode(TaskEvent, data);
      return event.ok ? `${event.value.taskId}:e${event.value.seq}` : subject;
    };
    const ids = new Map<string, string>();
    const ordered: OrderedWrites = {
      holds: () => true,
      send: (subject, data, id) => {
        wire.push(`send ${name(subject, data)}`);
        ids.set(name(subject, data), id);
      },
      losses: () => lost,
    };
    const store = (subject: string, data: Uint8Array, id: string) => {
      const n = name(subject, data);
      // A write stored again keeps the message id it was first sent under.
      if (ids.has(n) && ids.get(n) !== id) throw new Error(`${n} stored under another id`);
      wire.push(`store ${n}`);
      return new Promise<void>((resolve, reject) => pending.set(n, { resolve, reject }));
    };
    const settle = (n: string, err?: Error) => {
      const p = pending.get(n);
      if (p === undefined) throw new Error(`${n} was not stored`);
      pending.delete(n);
      if (err) p.reject(err);
      else p.resolve();
    };
    return { wire, ordered, store, settle, lose: () => void lost++ };
  };
  const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
  const result = (store: (subject: string, data: Uint8Array, id: string) => Promise<void>) => () =>
    store("result", new Uint8Array(), "result");

  it("sends the events without acknowledgement and the result right behind them; the result's acknowledgement vouches for them", async () => {
    const t = transport();
    const publish = eventPublisher(deps(), { store: t.store, ordered: t.ordered });
    for (let seq = 1; seq <= 3; seq++) publish(tid("t1"), seq, "node.started", "running");
    let done = false;
    const stored = publish.afterEvents(tid("t1"), result(t.store)).then(() => (done = true));
    expect(t.wire).toEqual(["send t1:e1", "send t1:e2", "send t1:e3", "store result"]);
    await tick();
    expect(done).toBe(false);
    t.settle("result");
    await stored;
    // Nothing stored again: no loss came between the events and the result's acknowledgement.
    expect(t.wire).toEqual(["send t1:e1", "send t1:e2", "send t1:e3", "store result"]);
  });

  it("after a loss, stores the events not vouched for again, under the same message ids, before anything newer", async () => {
    const t = transport();
    const publish = eventPublisher(deps(), { store: t.store, ordered: t.ordered });
    publish(tid("t1"), 1, "node.started", "running");
    publish(tid("t2"), 1, "node.started", "running");
    t.lose();
    publish(tid("t1"), 2, "task.completed", "completed");
    let done = false;
    const stored = publish.afterEvents(tid("t1"), result(t.store)).then(() => (done = true));
    // Each task's events in the order sent: t1's next event and its result follow, acknowledged, behind the one again.
    expect(t.wire).toEqual(["send t1:e1", "send t2:e1", "store t1:e1", "store t2:e1", "store t1:e2", "store result"]);
    t.settle("result");
    t.settle("t1:e2");
    await tick();
    expect(done).toBe(false);
    t.settle("t1:e1");
    await stored;
    // t2's next event goes behind its own stored again, not before it.
    publish(tid("t2"), 2, "model.turn", "running");
    expect(t.wire.at(-1)).toBe("store t2:e2");
  });

  it("stores again the events sent before a loss that only the acknowledgement of a later write shows", async () => {
    vi.useFakeTimers();
    const t = transport();
    const publish = eventPublisher(deps(), { store: t.store, ordered: t.ordered });
    publish(tid("t1"), 1, "node.started", "running");
    vi.advanceTimersByTime(FENCE_MS);
    publish(tid("t1"), 2, "model.turn", "running");
    t.lose();
    t.settle("t1:e2");
    await vi.waitFor(() => expect(t.wire).toEqual(["send t1:e1", "store t1:e2", "store t1:e1"]));
  });

  it("rejects as the result's store does, and stores the events with acknowledgements", async () => {
    const t = transport();
    const publish = eventPublisher(deps(), { store: t.store, ordered: t.ordered });
    publish(tid("t1"), 1, "task.completed", "completed");
    const stored = publish.afterEvents(tid("t1"), result(t.store));
    t.settle("result", new Error("result not stored"));
    await expect(stored).rejects.toThrow("result not stored");
    expect(t.wire).toEqual(["send t1:e1", "store result", "store t1:e1"]);
  });

  it("sends the first event FENCE_MS after the oldest one not vouched for with an acknowledgement, which vouches for all before it", async () => {
    vi.useFakeTimers();
    const t = transport();
    const publish = eventPublisher(deps(), { store: t.store, ordered: t.ordered });
    publish(tid("t1"), 1, "node.started", "running");
    publish(tid("t2"), 1, "node.started", "running");
    vi.advanceTimersByTime(FENCE_MS - 1);
    publish(tid("t1"), 2, "model.turn", "running");
    expect(t.wire).toEqual(["send t1:e1", "send t2:e1", "send t1:e2"]);
    vi.advanceTimersByTime(1);
    // Nothing is sent only to vouch: the next event goes with an acknowledgement.
    expect(t.wire).toHaveLength(3);
    publish(tid("t2"), 2, "model.turn", "running");
    expect(t.wire.at(-1)).toBe("store t2:e2");
    t.settle("t2:e2");
    await vi.advanceTimersByTimeAsync(0);
    // All vouched for: nothing stored again; the next event goes without acknowledgement, and so does one within FENCE_MS.
    publish(tid("t1"), 3, "model.turn", "running");
    vi.advanceTimersByTime(FENCE_MS - 1);
    publish(tid("t1"), 4, "model.turn", "running");
    expect(t.wire.slice(4)).toEqual(["send t1:e3", "send t1:e4"]);
  });

  it("stores again every event an acknowledged event that failed could not vouch for, but none of a task another Director owns now", async () => {
    vi.useFakeTimers();
    const t = transport();
    const publish = eventPublisher(deps(), { store: t.store, ordered: t.ordered });
    publish(tid("t1"), 1, "node.started", "running");
    publish(tid("t2"), 1, "node.started", "running");
    vi.advanceTimersByTime(FENCE_MS);
    publish(tid("t2"), 2, "model.turn", "running");
    expect(t.wire.at(-1)).toBe("store t2:e2");
    await publish.cut(tid("t1"));
    t.settle("t2:e2", new Error("no answer"));
    await vi.waitFor(() => expect(t.wire).toHaveLength(4));
    expect(t.wire).toEqual(["send t1:e1", "send t2:e1", "store t2:e2", "store t2:e1"]);
  });
});
