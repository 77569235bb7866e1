/**
 * The behaviour every {@link Bus}, {@link TaskStore} and {@link WorkQueue} implementation shares,
 * as one suite run against the in-process and the NATS implementations.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  NoRespondersError,
  RequestAbortedError,
  RequestTimeoutError,
  TransportError,
  type Bus,
  type BusMessage,
  type BusSubscription,
  type TaskStore,
  type WorkItem,
  type WorkQueue,
} from "../../actors/bus.js";
import { createSubjects, type Subjects } from "../../protocol/subjects.js";
import { randomRoot } from "./nats-server.js";
import { gate, Recorder, text } from "./recorder.js";

/** An error reported through an implementation's `onError`. */
export interface ReportedError {
  readonly subject: string;
  readonly message: string;
}

/** What a factory gets: a fresh root per test, and where to report handler errors. */
export interface BusFixtureInput {
  readonly subjects: Subjects;
  /** Ack wait to configure the work queue with. */
  readonly ackWaitMs: number;
  readonly onError: (err: unknown, subject: string) => void;
}

/** The implementations under test, wired to one transport. */
export interface BusFixture {
  readonly bus: Bus;
  readonly store: TaskStore;
  readonly queue: WorkQueue & { size(): Promise<number> };
  /** Releases everything the factory opened. */
  close(): Promise<void>;
}

/** Options of {@link busContract}. */
export interface BusContractOptions {
  /** Ack wait given to the work queue; the redelivery test waits about this long. Default 1000 ms. */
  ackWaitMs?: number;
}

/**
 * Registers the contract suite under `name`; `factory` runs before each test with a fresh root.
 * @example busContract("MemoryBus", async ({ onError }) => ({ bus: new MemoryBus({ onError }), ... }))
 */
export function busContract(
  name: string,
  factory: (input: BusFixtureInput) => Promise<BusFixture>,
  { ackWaitMs = 1000 }: BusContractOptions = {},
): void {
  describe(`${name} (bus contract)`, () => {
    let fx: BusFixture;
    let subjects: Subjects;
    let errors: Recorder<ReportedError>;
    let consumers: BusSubscription[];
    const subject = (suffix: string) => `${subjects.root}.test.${suffix}`;
    /** Consumes from the fixture's queue; the consumer is stopped after the test, before the transport closes. */
    const consume = (handler: (item: WorkItem) => Promise<void>, concurrency: number): BusSubscription => {
      const sub = fx.queue.consume(handler, { concurrency });
      consumers.push(sub);
      return sub;
    };

    beforeEach(async () => {
      subjects = createSubjects(randomRoot());
      errors = new Recorder();
      consumers = [];
      fx = await factory({
        subjects,
        ackWaitMs,
        onError: (err, subj) => errors.push({ subject: subj, message: err instanceof Error ? err.message : String(err) }),
      });
    });
    afterEach(async () => {
      await Promise.all(consumers.map((c) => c.unsubscribe()));
      await fx.close();
      // Tests that provoke errors take them out; anything left was not expected.
      expect(errors.values).toEqual([]);
    });

    describe("publish/subscribe", () => {
      it("delivers body, subject and headers", async () => {
        const got = new Recorder<BusMessage>();
        fx.bus.subscribe(subject("a"), (m) => got.push(m));
        await fx.bus.flush();
        fx.bus.publish(subject("a"), text.encode("hello"), { "x-trace": "t1" });
        const [msg] = await got.count(1);
        expect(msg?.subject).toBe(subject("a"));
        expect(text.decode(msg?.data ?? new Uint8Array())).toBe("hello");
        expect(msg?.headers?.get("x-trace")).toBe("t1");
        expect(msg?.expectsReply).toBe(false);
        expect(msg?.respond(text.encode("nobody asked"))).toBe(false);
      });

      it("matches '*' to one token and '>' to one or more", async () => {
        const star = new Recorder<string>();
        const tail = new Recorder<string>();
        const last = new Recorder<string>();
        fx.bus.subscribe(subject("w.*"), (m) => star.push(m.subject));
        fx.bus.subscribe(subject("w.>"), (m) => tail.push(m.subject));
        fx.bus.subscribe(subject("end"), (m) => last.push(m.subject));
        await fx.bus.flush();
        for (const s of ["w", "w.a", "w.a.b", "end"]) fx.bus.publish(subject(s), text.encode(s));
        await last.count(1);
        await tail.count(2);
        expect(tail.values).toEqual([subject("w.a"), subject("w.a.b")]);
        expect(star.values).toEqual([subject("w.a")]);
      });

      it("gives each message to one member of a queue group, and to every plain subscriber", async () => {
        const group = new Recorder<{ member: number; body: string }>();
        const plain = new Recorder<string>();
        for (const member of [0, 1]) {
          fx.bus.subscribe(subject("q"), (m) => group.push({ member, body: text.decode(m.data) }), { queue: "workers" });
        }
        fx.bus.subscribe(subject("q"), (m) => plain.push(text.decode(m.data)));
        await fx.bus.flush();
        const sent = Array.from({ length: 40 }, (_, i) => `m${i}`);
        for (const body of sent) fx.bus.publish(subject("q"), text.encode(body));
        await plain.count(sent.length);
        await group.count(sent.length);
        // A duplicate would arrive right behind the others; the plain subscriber's last message bounds it.
        fx.bus.publish(subject("q"), text.encode("end"));
        await plain.count(sent.length + 1);
        await group.count(sent.length + 1);
        const bodies = group.values.map((v) => v.body).filter((b) => b !== "end");
        expect(bodies.sort()).toEqual([...sent].sort());
        expect(new Set(group.values.map((v) => v.member)).size).toBe(2);
      });

      it("keeps a subscription alive when its handler throws or rejects", async () => {
        const got = new Recorder<string>();
        fx.bus.subscribe(subject("e"), async (m) => {
          const body = text.decode(m.data);
          got.push(body);
          if (body === "throw") throw new Error("boom");
          if (body === "reject") await Promise.reject(new Error("async boom"));
        });
        await fx.bus.flush();
        for (const body of ["throw", "reject", "fine"]) fx.bus.publish(subject("e"), text.encode(body));
        await got.count(3);
        await errors.count(2, "two reported errors");
        expect(errors.values.splice(0)).toEqual([
          { subject: subject("e"), message: "boom" },
          { subject: subject("e"), message: "async boom" },
        ]);
      });

      it("unsubscribe waits for handlers in progress and stops delivery", async () => {
        const events = new Recorder<string>();
        const hold = gate();
        const sub = fx.bus.subscribe(subject("u"), async () => {
          events.push("handling");
          await hold.promise;
          events.push("handled");
        });
        await fx.bus.flush();
        fx.bus.publish(subject("u"), text.encode("1"));
        await events.count(1);
        const unsubscribed = sub.unsubscribe().then(() => events.push("unsubscribed"));
        hold.open();
        await unsubscribed;
        expect(events.values).toEqual(["handling", "handled", "unsubscribed"]);

        const probe = new Recorder<string>();
        fx.bus.subscribe(subject("u"), (m) => probe.push(text.decode(m.data)));
        await fx.bus.flush();
        fx.bus.publish(subject("u"), text.encode("2"));
        await probe.count(1);
        expect(events.values).toHaveLength(3);
      });
    });

    describe("request/reply", () => {
      it("returns the answer", async () => {
        fx.bus.subscribe(subject("echo"), (m) => {
          expect(m.expectsReply).toBe(true);
          m.respond(text.encode(`echo:${text.decode(m.data)}`));
        });
        await fx.bus.flush();
        const answer = await fx.bus.request(subject("echo"), text.encode("hi"), { timeoutMs: 2000 });
        expect(text.decode(answer)).toBe("echo:hi");
      });

      it("throws NoRespondersError when nobody listens", async () => {
        const err: unknown = await fx.bus.request(subject("nobody"), text.encode("?"), { timeoutMs: 2000 }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(NoRespondersError);
        expect(err).toBeInstanceOf(TransportError);
        expect((err as NoRespondersError).subject).toBe(subject("nobody"));
      });

      it("throws RequestTimeoutError when no answer comes in time", async () => {
        fx.bus.subscribe(subject("silent"), () => undefined);
        await fx.bus.flush();
        const started = Date.now();
        const err: unknown = await fx.bus.request(subject("silent"), text.encode("?"), { timeoutMs: 150 }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RequestTimeoutError);
        expect((err as RequestTimeoutError).subject).toBe(subject("silent"));
        expect(Date.now() - started).toBeGreaterThanOrEqual(140);
      });

      it("throws RequestAbortedError when the signal aborts, before or during the wait", async () => {
        const received = new Recorder<string>();
        fx.bus.subscribe(subject("slow"), (m) => received.push(text.decode(m.data)));
        await fx.bus.flush();
        const controller = new AbortController();
        const pending = fx.bus.request(subject("slow"), text.encode("1"), { timeoutMs: 10_000, signal: controller.signal }).catch((e: unknown) => e);
        await received.count(1);
        controller.abort(new Error("user cancelled"));
        const err = await pending;
        expect(err).toBeInstanceOf(RequestAbortedError);
        expect((err as RequestAbortedError).subject).toBe(subject("slow"));

        const early: unknown = await fx.bus
          .request(subject("slow"), text.encode("2"), { timeoutMs: 10_000, signal: AbortSignal.abort() })
          .catch((e: unknown) => e);
        expect(early).toBeInstanceOf(RequestAbortedError);
      });
    });

    describe("task store", () => {
      it("creates once, then reports exists; get and put", async () => {
        expect(await fx.store.get("task-1")).toBeUndefined();
        expect(await fx.store.create("task-1", text.encode("v1"))).toBe("created");
        expect(await fx.store.create("task-1", text.encode("v2"))).toBe("exists");
        expect(text.decode((await fx.store.get("task-1")) ?? new Uint8Array())).toBe("v1");
        await fx.store.put("task-1", text.encode("v3"));
        expect(text.decode((await fx.store.get("task-1")) ?? new Uint8Array())).toBe("v3");
        await fx.store.put("task-2", text.encode("w"));
        expect(await fx.store.create("task-2", text.encode("x"))).toBe("exists");
      });
      it("compare-and-set: update writes only at the expected revision", async () => {
        expect(await fx.store.getWithRevision("cas-1")).toBeUndefined();
        await fx.store.create("cas-1", text.encode("v1"));
        const first = await fx.store.getWithRevision("cas-1");
        expect(first && text.decode(first.value)).toBe("v1");
        const revision = first?.revision ?? -1;
        const next = await fx.store.update("cas-1", text.encode("v2"), revision);
        expect(next).toBeGreaterThan(revision);
        expect(await fx.store.update("cas-1", text.encode("stale"), revision)).toBeUndefined();
        const now = await fx.store.getWithRevision("cas-1");
        expect(now && { value: text.decode(now.value), revision: now.revision }).toEqual({ value: "v2", revision: next });
        const racers = await Promise.all(["a", "b", "c"].map((v) => fx.store.update("cas-1", text.encode(v), next ?? -1)));
        expect(racers.filter((r) => r !== undefined)).toHaveLength(1);
      });
    });

    describe("work queue", () => {
      it("drops a second item with the same id", async () => {
        const first = await fx.queue.enqueue("job-1", text.encode("first"));
        expect(first).toEqual({ duplicate: false, seq: expect.any(Number) });
        // The duplicate names the item that was queued.
        expect(await fx.queue.enqueue("job-1", text.encode("second"))).toEqual({ duplicate: true, seq: first.seq });
        const got = new Recorder<WorkItem>();
        consume(async (item) => {
          await item.ack();
          got.push(item);
        }, 2);
        const [item] = await got.count(1);
        expect(item?.id).toBe("job-1");
        expect(text.decode(item?.data ?? new Uint8Array())).toBe("first");
        expect(item?.deliveries).toBe(1);
        await fx.queue.enqueue("job-2", text.encode("after"));
        await got.count(2);
        expect(got.values.map((i) => i.id)).toEqual(["job-1", "job-2"]);
      });

      it("looks an item up by id until it is acked, tells its sequence on delivery, and discards it by sequence", async () => {
        const a = await fx.queue.enqueue("peek-1", text.encode("one"));
        const b = await fx.queue.enqueue("peek-2", text.encode("two"));
        expect(b.seq).toBeGreaterThan(a.seq);
        const found = await fx.queue.peek("peek-1");
        expect(found && { data: text.decode(found.data), seq: found.seq }).toEqual({ data: "one", seq: a.seq });
        expect(await fx.queue.peek("peek-none")).toBeUndefined();
        await fx.queue.discard("peek-2", b.seq);
        expect(await fx.queue.peek("peek-2")).toBeUndefined();
        // Discarding what is gone already is fine.
        await fx.queue.discard("peek-2", b.seq);
        const got = new Recorder<WorkItem>();
        consume(async (item) => {
          await item.ack();
          got.push(item);
        }, 2);
        const [item] = await got.count(1);
        expect(item).toMatchObject({ id: "peek-1", seq: a.seq, deliveries: 1 });
        expect(await fx.queue.peek("peek-1")).toBeUndefined();
        await fx.queue.enqueue("peek-3", text.encode("three"));
        await got.count(2);
        // The discarded item never came.
        expect(got.values.map((i) => i.id)).toEqual(["peek-1", "peek-3"]);
      });

      it("runs at most `concurrency` handlers at once", async () => {
        const ids = Array.from({ length: 9 }, (_, i) => `c${i}`);
        for (const id of ids) await fx.queue.enqueue(id, text.encode(id));
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
        expect(await fx.queue.size()).toBe(0);
      });

      it("redelivers a naked item with deliveries = 2", async () => {
        await fx.queue.enqueue("nak-1", text.encode("x"));
        const got = new Recorder<number>();
        consume(async (item) => {
          if (item.deliveries === 1) item.nak();
          else await item.ack();
          got.push(item.deliveries);
        }, 1);
        expect(await got.count(2)).toEqual([1, 2]);
      });

      it("redelivers an item that was neither acked nor naked after the ack wait", async () => {
        await fx.queue.enqueue("lost-1", text.encode("x"));
        const got = new Recorder<number>();
        consume(async (item) => {
          if (item.deliveries > 1) await item.ack();
          got.push(item.deliveries);
        }, 1);
        expect(await got.count(2, "a redelivery", ackWaitMs * 5 + 2000)).toEqual([1, 2]);
      });

      it("does not redeliver an item whose handler keeps signalling working()", async () => {
        await fx.queue.enqueue("busy-1", text.encode("x"));
        const got = new Recorder<number>();
        const beats = new Recorder<number>();
        consume(async (item) => {
          got.push(item.deliveries);
          const timer = setInterval(() => {
            item.working();
            beats.push(Date.now());
          }, Math.floor(ackWaitMs / 4));
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
        await fx.queue.enqueue("bad-1", text.encode("x"));
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
        expect(errors.values.splice(0).map((e) => e.message)).toEqual(["handler failed"]);
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
        for (const id of ids) await fx.queue.enqueue(id, text.encode(id));
        await got.count(ids.length);
        expect([...got.values].sort()).toEqual([...ids].sort());
        expect(await fx.queue.size()).toBe(0);
        await Promise.all([a.unsubscribe(), b.unsubscribe()]);
      });

      it("unsubscribe waits for handlers in progress and stops deliveries", async () => {
        await fx.queue.enqueue("u-1", text.encode("x"));
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
        await fx.queue.enqueue("u-2", text.encode("y"));
        expect(events.values).toEqual(["handling u-1", "acked u-1", "unsubscribed"]);
        expect(await fx.queue.size()).toBe(1);
      });
    });
  });
}
