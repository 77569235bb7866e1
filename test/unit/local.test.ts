/** LocalResponders and the semaphore under them: a call when a slot is free, nothing (go over NATS) otherwise. */
import { describe, expect, it } from "vitest";
import { Semaphore } from "../../actors/limit.js";
import { LocalResponders } from "../../actors/local.js";

const gate = () => {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
};

describe("LocalResponders", () => {
  it("calls the responder while it has a slot free, and declines when none is, or nobody serves the subject", async () => {
    const local = new LocalResponders();
    const held = gate();
    const stop = local.register("s.work", new Semaphore(1), async (request) => {
      await held.promise;
      return { echoed: request };
    });
    const first = local.dispatch("s.work", { n: 1 });
    expect(first).toBeInstanceOf(Promise);
    expect(local.dispatch("s.work", { n: 2 })).toBeUndefined();
    expect(local.dispatch("s.other", { n: 3 })).toBeUndefined();
    held.open();
    await expect(first).resolves.toEqual({ echoed: { n: 1 } });
    await expect(local.dispatch("s.work", { n: 4 })).resolves.toEqual({ echoed: { n: 4 } });
    stop();
    expect(local.dispatch("s.work", { n: 5 })).toBeUndefined();
  });

  it("tries each responder of a subject in turn", async () => {
    const local = new LocalResponders();
    const held = gate();
    local.register("s.work", new Semaphore(1), async () => (await held.promise, "a"));
    local.register("s.work", new Semaphore(1), async () => "b");
    const a = local.dispatch("s.work", {});
    await expect(local.dispatch("s.work", {})).resolves.toBe("b");
    held.open();
    await expect(a).resolves.toBe("a");
  });

  it("hands progress to the sink that owns the task, and says when none does", () => {
    const local = new LocalResponders();
    const got: string[] = [];
    expect(local.deliverProgress({ type: "task.progress", taskId: "t-1" as never, event: "x", message: "m" })).toBe(false);
    const stop = local.onProgress((p) => (p.taskId === "t-1" ? (got.push(p.event), true) : false));
    expect(local.deliverProgress({ type: "task.progress", taskId: "t-1" as never, event: "x", message: "m" })).toBe(true);
    expect(local.deliverProgress({ type: "task.progress", taskId: "t-2" as never, event: "y", message: "m" })).toBe(false);
    stop();
    expect(local.deliverProgress({ type: "task.progress", taskId: "t-1" as never, event: "z", message: "m" })).toBe(false);
    expect(got).toEqual(["x"]);
  });
});

describe("Semaphore", () => {
  it("hands a freed slot to the first waiter, never to a newcomer", async () => {
    const slots = new Semaphore(1);
    const order: string[] = [];
    const held = gate();
    const first = slots.run(async () => (await held.promise, order.push("first")));
    const second = slots.run(async () => void order.push("second"));
    held.open();
    await first;
    // The slot went to `second`, which waits in line: a newcomer is refused until it is done.
    expect(slots.tryRun(async () => void order.push("newcomer"))).toBeUndefined();
    await second;
    await slots.tryRun(async () => void order.push("third"));
    expect(order).toEqual(["first", "second", "third"]);
    expect(slots.inUse).toBe(0);
  });

  it("frees the slot of a call that throws at once", async () => {
    const slots = new Semaphore(1);
    await expect(slots.tryRun(() => { throw new Error("boom"); })).rejects.toThrow("boom");
    expect(slots.inUse).toBe(0);
  });
});
