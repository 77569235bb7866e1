import { describe, expect, it } from "vitest";
import type { TaskItem } from "../../actors/bus.js";
import { submissionGates } from "../../actors/director/gates.js";
import { tid } from "../support/ids.js";

const item = (id: string, seq: number): TaskItem => ({
  id: tid(id),
  seq,
  data: new Uint8Array(0),
  deliveries: 1,
  ack: async () => undefined,
  nak: () => undefined,
  working: () => undefined,
});

describe("a Director's submission gates", () => {
  it("holds a delivery until its submission is answered, then drops it when that submission removed its item", async () => {
    const gates = submissionGates();
    const close = gates.submitting(tid("t1"));
    let settled: boolean | undefined;
    const waiting = gates.dropped(item("t1", 7)).then((dropped) => (settled = dropped));
    await Promise.resolve();
    expect(settled).toBeUndefined();
    close(7);
    expect(await waiting).toBe(true);
  });

  it("lets a delivery run once its submission is answered without removing it, or another item of the task", async () => {
    const gates = submissionGates();
    const close = gates.submitting(tid("t2"));
    const kept = gates.dropped(item("t2", 3));
    close(undefined);
    expect(await kept).toBe(false);
    const other = gates.submitting(tid("t3"));
    const later = gates.dropped(item("t3", 9));
    other(8);
    expect(await later).toBe(false);
  });

  it("lets a delivery with no submission in this process run at once", async () => {
    expect(await submissionGates().dropped(item("elsewhere", 1))).toBe(false);
  });
});
