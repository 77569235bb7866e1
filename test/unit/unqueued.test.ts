/**
 * The store-first intake's list of unqueued tasks (actors/director/unqueued.ts), on the in-process store and queue:
 * what a Director's look at the list queues, keeps for later and takes off, and what it does with an unreadable list.
 */
import { describe, expect, it } from "vitest";
import type { ActorDeps, Logger } from "../../actors/deps.js";
import { listUnqueued, requeueUnqueued, unlist, UNQUEUED_KEY } from "../../actors/director/unqueued.js";
import { decode, encodeJson, UnqueuedTasks, type TaskId, type TaskRecord } from "../../protocol/index.js";
import { MemoryTaskStore, MemoryWorkQueue } from "../../runtime/in-process/store.js";

const GRACE_MS = 1000;
const start = Date.parse("2026-01-01T00:00:00.000Z");

function setup() {
  const store = new MemoryTaskStore();
  const queue = new MemoryWorkQueue({ ackWaitMs: GRACE_MS });
  let now = start;
  const warned: string[] = [];
  const log: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (_, msg) => void warned.push(msg ?? ""),
    error: () => undefined,
  };
  const deps = { log, now: () => new Date(now) } as ActorDeps;
  const record = (taskId: string, state: TaskRecord["state"]) =>
    store.put(
      taskId,
      encodeJson({
        taskId,
        state,
        xml: "<task/>",
        inputs: {},
        submittedAt: new Date(start).toISOString(),
        updatedAt: new Date(start).toISOString(),
      }),
    );
  const listed = async () => {
    const value = await store.get(UNQUEUED_KEY);
    const list = value === undefined ? undefined : decode(UnqueuedTasks, value);
    return list?.ok ? list.value.tasks.map((t) => t.taskId) : [];
  };
  return {
    store,
    queue,
    deps,
    warned,
    record,
    listed,
    later: (ms: number) => void (now += ms),
    requeue: () => requeueUnqueued(deps, store, queue, GRACE_MS),
  };
}

const id = (name: string) => name as TaskId;

describe("the unqueued list", () => {
  it("queues a task listed for longer than the grace whose record is still queued and that has no intake item", async () => {
    const s = setup();
    await listUnqueued(s.store, id("stranded"), s.deps.now());
    await s.record("stranded", "queued");
    // A submission still under way queues its task itself.
    expect(await s.requeue()).toEqual([]);
    expect(await s.listed()).toEqual(["stranded"]);
    s.later(GRACE_MS);
    expect(await s.requeue()).toEqual(["stranded"]);
    const item = await s.queue.peek("stranded");
    expect(new TextDecoder().decode(item?.data)).toBe(JSON.stringify({ taskId: "stranded" }));
    expect(await s.listed()).toEqual([]);
    expect(s.warned).toEqual(["queued a stored task whose submission could not queue it"]);
  });

  it("takes off what needs no queueing: queued already, claimed, final; keeps a task never stored for ten graces", async () => {
    const s = setup();
    for (const name of ["in-queue", "running", "done", "never-stored"]) await listUnqueued(s.store, id(name), s.deps.now());
    await s.record("in-queue", "queued");
    await s.queue.enqueue("in-queue", encodeJson({ taskId: "in-queue" }));
    await s.record("running", "running");
    await s.record("done", "completed");
    s.later(GRACE_MS);
    expect(await s.requeue()).toEqual([]);
    expect(await s.listed()).toEqual(["never-stored"]);
    s.later(GRACE_MS * 9);
    expect(await s.requeue()).toEqual([]);
    expect(await s.listed()).toEqual([]);
    expect(s.warned).toEqual([]);
  });

  it("lists a task once, and takes off only the tasks named", async () => {
    const s = setup();
    await listUnqueued(s.store, id("a"), s.deps.now());
    await listUnqueued(s.store, id("b"), s.deps.now());
    await listUnqueued(s.store, id("a"), s.deps.now());
    expect(await s.listed()).toEqual(["b", "a"]);
    await unlist(s.store, ["a"]);
    expect(await s.listed()).toEqual(["b"]);
  });

  it("drops an unreadable list with a warning, and is listed again from scratch", async () => {
    const s = setup();
    await s.store.put(UNQUEUED_KEY, encodeJson({ v: 9 }));
    expect(await s.requeue()).toEqual([]);
    expect(s.warned).toEqual(["the list of unqueued tasks is unreadable; it is dropped"]);
    await listUnqueued(s.store, id("c"), s.deps.now());
    expect(await s.listed()).toEqual(["c"]);
  });
});
