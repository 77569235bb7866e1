/**
 * The work queue's part of the bus contract (bus-contract.ts): de-duplication, sequences, peek and discard,
 * concurrency, redelivery.
 */
import { expect, it } from "vitest";
import type { BusSubscription, WorkItem, WorkQueue } from "../../actors/bus.js";
import type { ReportedError } from "./bus-contract.js";
import { pollUntil } from "./process-group.js";
import { gate, Recorder, text } from "./recorder.js";

/** What the work-queue tests use of the contract's fixture, read at test time. */
export interface QueueContractContext {
  queue(): WorkQueue & { size(): Promise<number> };
  /** Consumes from the queue; the consumer is stopped after the test. */
  consume(handler: (item: WorkItem) => Promise<void>, concurrency: number): BusSubscription;
  errors(): Recorder<ReportedError>;
  ackWaitMs: number;
}

/** Registers the work-queue tests in the current `describe`. */
export function workQueueContract(ctx: QueueContractContext): void {
  const { consume, ackWaitMs } = ctx;
  /** Consumes two at a time, acking each item; records them as acked. */
  const ackAll = () => {
    const got = new Recorder<WorkItem>();
    consume(async (item) => {
      await item.ack();
      got.push(item);
    }, 2);
    return got;
  };
  it("drops a second item with the same id", async () => {
    const first = await ctx.queue().enqueue("job-1", text.encode("first"));
    expect(first).toEqual({ duplicate: false, seq: expect.any(Number) });
    // The duplicate names the item that was queued.
    expect(await ctx.queue().enqueue("job-1", text.encode("second"))).toEqual({ duplicate: true, seq: first.seq });
    const got = ackAll();
    const [item] = await got.count(1);
    expect(item?.id).toBe("job-1");
    expect(text.decode(item?.data ?? new Uint8Array())).toBe("first");
    expect(item?.deliveries).toBe(1);
    await ctx.queue().enqueue("job-2", text.encode("after"));
    await got.count(2);
    expect(got.values.map((i) => i.id)).toEqual(["job-1", "job-2"]);
  });

  it("looks an item up by id until it is acked, tells its sequence on delivery, and discards it by sequence", async () => {
    const a = await ctx.queue().enqueue("peek-1", text.encode("one"));
    const b = await ctx.queue().enqueue("peek-2", text.encode("two"));
    expect(b.seq).toBeGreaterThan(a.seq);
    const found = await ctx.queue().peek("peek-1");
    expect(found && { data: text.decode(found.data), seq: found.seq }).toEqual({ data: "one", seq: a.seq });
    expect(await ctx.queue().peek("peek-none")).toBeUndefined();
    await ctx.queue().discard("peek-2", b.seq);
    expect(await ctx.queue().peek("peek-2")).toBeUndefined();
    // Discarding what is gone already is fine.
    await ctx.queue().discard("peek-2", b.seq);
    const got = ackAll();
    const [item] = await got.count(1);
    expect(item).toMatchObject({ id: "peek-1", seq: a.seq, deliveries: 1 });
    // An ack is not confirmed: the server drops the item once it has acted on it (nats-server does that apart from
    // the connection's message order), so look until it is gone.
    await pollUntil(async () => ((await ctx.queue().peek("peek-1")) === undefined ? true : undefined), "peek-1 gone after its ack");
    await ctx.queue().enqueue("peek-3", text.encode("three"));
    await got.count(2);
    // The discarded item never came.
    expect(got.values.map((i) => i.id)).toEqual(["peek-1", "peek-3"]);
  });

  it("does not hand out an item discarded after it reached this process, before its handler started", async () => {
    await ctx.queue().enqueue("gone-1", text.encode("one"));
    const second = await ctx.queue().enqueue("gone-2", text.encode("two"));
    const got = new Recorder<string>();
    consume(async (item) => {
      // The first handler removes the second item, delivered with it (or about to be): it is not to be handed out.
      if (item.id === "gone-1") void ctx.queue().discard("gone-2", second.seq);
      await item.ack();
      got.push(item.id);
    }, 2);
    await got.count(1);
    await ctx.queue().enqueue("gone-3", text.encode("three"));
    await got.count(2);
    expect(got.values).toEqual(["gone-1", "gone-3"]);
  });

  it("runs at most `concurrency` handlers at once", async () => {
    const ids = Array.from({ length: 9 }, (_, i) => `c${i}`);
    for (const id of ids) await ctx.queue().enqueue(id, text.encode(id));
    let running = 0;
    const peaks = new Recorder<number>();
    const holds = new Map<string, () => void>();
    const done = new Recorder<string>();
    consume(async (item) => {
      running += 1;
      peaks.push(running);
      const hold = gate();
      holds.set(item.id, hold.open);
      await hold.promise;
      running -= 1;
      await item.ack();
      done.push(item.id);
    }, 3);
    // Release one handler each time three are held, so new ones keep arriving while three run.
    while (done.values.length < ids.length) {
      await peaks.until(() => running === 3 || done.values.length + running === ids.length, "handlers to fill the slots");
      const [first] = holds;
      if (first === undefined) break;
      holds.delete(first[0]);
      const before = done.values.length;
      first[1]();
      await done.count(before + 1);
    }
    expect(Math.max(...peaks.values)).toBe(3);
    expect([...done.values].sort()).toEqual(ids);
    expect(await ctx.queue().size()).toBe(0);
  });

  it("redelivers a naked item with deliveries = 2", async () => {
    await ctx.queue().enqueue("nak-1", text.encode("x"));
    const got = new Recorder<number>();
    consume(async (item) => {
      if (item.deliveries === 1) item.nak();
      else await item.ack();
      got.push(item.deliveries);
    }, 1);
    expect(await got.count(2)).toEqual([1, 2]);
  });

  it("redelivers an item that was neither acked nor naked after the ack wait", async () => {
    await ctx.queue().enqueue("lost-1", text.encode("x"));
    const got = new Recorder<number>();
    consume(async (item) => {
      if (item.deliveries > 1) await item.ack();
      got.push(item.deliveries);
    }, 1);
    expect(await got.count(2, "a redelivery", ackWaitMs * 5 + 2000)).toEqual([1, 2]);
  });

  it("does not redeliver an item whose handler keeps signalling working()", async () => {
    await ctx.queue().enqueue("busy-1", text.encode("x"));
    const got = new Recorder<number>();
    const beats = new Recorder<number>();
    consume(async (item) => {
      got.push(item.deliveries);
      const timer = setInterval(
        () => {
          item.working();
          beats.push(Date.now());
        },
        Math.floor(ackWaitMs / 4),
      );
      // Held for about three ack waits, measured in heartbeats rather than slept.
      await beats.count(12, "heartbeats", ackWaitMs * 10);
      clearInterval(timer);
      await item.ack();
      got.push(0);
    }, 2);
    await got.until((v) => v.includes(0), "the ack", ackWaitMs * 10);
    expect(got.values).toEqual([1, 0]);
  });

  it("naks and reports an item whose handler throws", async () => {
    await ctx.queue().enqueue("bad-1", text.encode("x"));
    const got = new Recorder<number>();
    consume(async (item) => {
      if (item.deliveries === 1) {
        got.push(item.deliveries);
        throw new Error("handler failed");
      }
      await item.ack();
      got.push(item.deliveries);
    }, 1);
    expect(await got.count(2)).toEqual([1, 2]);
    expect(
      ctx
        .errors()
        .values.splice(0)
        .map((e) => e.message),
    ).toEqual(["handler failed"]);
  });

  it("removes an acked item for good, and shares items between consumers", async () => {
    const got = new Recorder<string>();
    const handler = async (item: WorkItem) => {
      await item.ack();
      got.push(item.id);
    };
    const a = consume(handler, 2);
    const b = consume(handler, 2);
    const ids = Array.from({ length: 12 }, (_, i) => `s${i}`);
    for (const id of ids) await ctx.queue().enqueue(id, text.encode(id));
    await got.count(ids.length);
    expect([...got.values].sort()).toEqual([...ids].sort());
    expect(await ctx.queue().size()).toBe(0);
    await Promise.all([a.unsubscribe(), b.unsubscribe()]);
  });

  it("unsubscribe waits for handlers in progress and stops deliveries", async () => {
    await ctx.queue().enqueue("u-1", text.encode("x"));
    const events = new Recorder<string>();
    const hold = gate();
    const sub = consume(async (item) => {
      events.push(`handling ${item.id}`);
      await hold.promise;
      await item.ack();
      events.push(`acked ${item.id}`);
    }, 1);
    await events.count(1);
    const stopped = sub.unsubscribe().then(() => events.push("unsubscribed"));
    hold.open();
    await stopped;
    await ctx.queue().enqueue("u-2", text.encode("y"));
    expect(events.values).toEqual(["handling u-1", "acked u-1", "unsubscribed"]);
    expect(await ctx.queue().size()).toBe(1);
  });
}
