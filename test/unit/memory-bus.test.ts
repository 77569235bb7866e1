import { describe, expect, it } from "vitest";
import { MemoryBus, MemoryTaskStore, MemoryWorkQueue, subjectMatches } from "../../runtime/in-process/bus.js";
import { TransportError } from "../../actors/bus.js";
import { busContract } from "../support/bus-contract.js";
import { Recorder, text } from "../support/recorder.js";

busContract(
  "MemoryBus",
  async ({ onError, ackWaitMs }) => {
    const bus = new MemoryBus({ onError });
    return {
      bus,
      store: new MemoryTaskStore(),
      queue: new MemoryWorkQueue({ onError, ackWaitMs }),
      close: () => bus.close(),
    };
  },
  { ackWaitMs: 50 },
);

describe("subjectMatches", () => {
  it.each([
    ["a.b", "a.b", true],
    ["a.b", "a.b.c", false],
    ["a.*", "a.b", true],
    ["a.*", "a", false],
    ["a.*", "a.b.c", false],
    ["a.*.c", "a.b.c", true],
    ["a.>", "a.b", true],
    ["a.>", "a.b.c", true],
    ["a.>", "a", false],
    [">", "a", true],
    ["*.b.>", "x.b.y.z", true],
  ])("'%s' vs '%s' → %s", (pattern, subject, expected) => {
    expect(subjectMatches(pattern, subject)).toBe(expected);
  });
});

describe("MemoryBus specifics", () => {
  it("never runs a handler inside publish", async () => {
    const bus = new MemoryBus({ onError: () => undefined });
    const order = new Recorder<string>();
    bus.subscribe("x.y", () => order.push("handler"));
    bus.publish("x.y", text.encode("1"));
    order.push("after publish");
    await order.count(2);
    expect(order.values).toEqual(["after publish", "handler"]);
  });

  it("refuses use after close", async () => {
    const bus = new MemoryBus({ onError: () => undefined });
    await bus.close();
    expect(() => bus.publish("x.y", text.encode("1"))).toThrow(TransportError);
    await expect(bus.request("x.y", text.encode("1"), { timeoutMs: 100 })).rejects.toBeInstanceOf(TransportError);
  });

  it("is not durable and refuses ids that are not subject tokens", async () => {
    const queue = new MemoryWorkQueue();
    expect(queue.durable).toBe(false);
    expect(new MemoryTaskStore().durable).toBe(false);
    await expect(queue.enqueue("a.b", text.encode("x"))).rejects.toThrow(/illegal task id/);
  });
});
