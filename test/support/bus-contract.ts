/**
 * The behaviour every {@link Bus}, {@link TaskStore} and {@link WorkQueue} implementation shares,
 * as one suite run against the in-process and the NATS implementations (the work queue's part in queue-contract.ts).
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
import { workQueueContract } from "./queue-contract.js";
import { gate, Recorder, text } from "./recorder.js";
import { messageOf } from "../../protocol/errors.js";

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
        onError: (err, subj) => errors.push({ subject: subj, message: messageOf(err) }),
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
        const pending = fx.bus
          .request(subject("slow"), text.encode("1"), { timeoutMs: 10_000, signal: controller.signal })
          .catch((e: unknown) => e);
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

    describe("work queue", () => workQueueContract({ queue: () => fx.queue, consume, errors: () => errors, ackWaitMs }));
  });
}
