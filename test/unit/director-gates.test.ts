import { describe, expect, it } from "vitest";
import type { WorkItem } from "../../actors/bus.js";
import { deliveryGates } from "../../actors/director-gates.js";

const item = (id: string, seq: number): WorkItem => ({
  id,
  seq,
  data: new Uint8Array(0),
  deliveries: 1,
  ack: async () => undefined,
  nak: () => undefined,
  working: () => undefined,
});

describe("a Director's delivery gates", () => {
  it("holds a delivery until its submission is answered, then drops it when that submission removed its item", async () => {
    const gates = deliveryGates();
    const close = gates.submitting("t1");
    let settled: boolean | undefined;
    const waiting = gates.dropped(item("t1", 7)).then((dropped) => (settled = dropped));
    await Promise.resolve();
    expect(settled).toBeUndefined();
    close(7);
    expect(await waiting).toBe(true);
    // Another item of the same task (a later queueing) is not the removed one.
    expect(await gates.dropped(item("t1", 8))).toBe(false);
  });

  it("lets a delivery run once its submission is answered without removing anything", async () => {
    const gates = deliveryGates();
    const close = gates.submitting("t2");
    const waiting = gates.dropped(item("t2", 3));
    close(undefined);
    expect(await waiting).toBe(false);
  });

  it("drops a delivery of an item removed by a cancel, and remembers the latest 1,000 removals", async () => {
    const gates = deliveryGates();
    gates.removed("c", 5);
    expect(await gates.dropped(item("c", 5))).toBe(true);
    for (let i = 0; i < 1000; i++) gates.removed(`x${i}`, i);
    expect(await gates.dropped(item("c", 5))).toBe(false);
    expect(await gates.dropped(item("x0", 0))).toBe(true);
    expect(await gates.dropped(item("x999", 999))).toBe(true);
  });
});
