/** Telling a first delivery from a redelivery a nats-server before 2.10.16 counted as one (test/e2e/stale-delivery.test.ts). */
import { describe, expect, it } from "vitest";
import { surelyFirst } from "../../machines/director/run.js";
import type { WorkItem } from "../../actors/bus.js";
import { deliveryOf } from "../../runtime/nats/queue.js";

const item = (deliveries: number, queuedAt?: number): WorkItem => ({
  id: "t",
  data: new Uint8Array(),
  deliveries,
  seq: 1,
  ...(queuedAt === undefined ? {} : { queuedAt }),
  ack: async () => undefined,
  nak: () => undefined,
  working: () => undefined,
});

describe("deliveryOf", () => {
  it("reads the delivery count, the stream sequence and the time stored from an ack subject", () => {
    expect(deliveryOf("$JS.ACK.S.c.1.7.9.1795791028146945849.0")).toEqual({ deliveries: 1, seq: 7, queuedAt: 1795791028146 });
    expect(deliveryOf("$JS.ACK.dom.hash.S.c.3.7.9.1795791028146945849.0.tok")).toEqual({ deliveries: 3, seq: 7, queuedAt: 1795791028146 });
    expect(deliveryOf("$JS.ACK.S.c.1.7.9.x.0")).toEqual({ deliveries: 1, seq: 7 });
    expect(deliveryOf("_INBOX.abc")).toBeUndefined();
  });
});

describe("surelyFirst", () => {
  it("takes a first delivery of an item queued less than an ack wait ago, or of unknown age, as its first", () => {
    expect(surelyFirst(item(1, 10_000), 5000, 14_999)).toBe(true);
    expect(surelyFirst(item(1), 5000, 1_000_000)).toBe(true);
  });
  it("does not take one queued an ack wait ago or longer (it may be a redelivery), nor a redelivery", () => {
    expect(surelyFirst(item(1, 10_000), 5000, 15_000)).toBe(false);
    expect(surelyFirst(item(2, 10_000), 5000, 10_001)).toBe(false);
  });
});
