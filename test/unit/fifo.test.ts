/**
 * The intake's in-process queue of pulled deliveries (runtime/nats/fifo.ts): first in, first out, and an item handed
 * out is no longer held by the queue. The soak (`npm run soak`) found the queue keeping up to 1,023 handed-out
 * deliveries reachable (an intake item carries the task's template and inputs, up to 1 MiB each).
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { Fifo } from "../../runtime/nats/fifo.js";

/** A full garbage collection (`--expose-gc` set at run time; the new context gets the `gc` function). */
function collectGarbage(): void {
  setFlagsFromString("--expose_gc");
  (runInNewContext("gc") as () => void)();
}

describe("Fifo", () => {
  it("hands items out in the order they came, across its compactions", () => {
    const fifo = new Fifo<number>();
    const out: number[] = [];
    for (let i = 0; i < 5000; i++) {
      fifo.push(i);
      if (i % 3 === 2) out.push(fifo.shift() as number, fifo.shift() as number);
    }
    expect(fifo.length).toBe(5000 - out.length);
    for (let item = fifo.shift(); item !== undefined; item = fifo.shift()) out.push(item);
    expect(out).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(fifo.length).toBe(0);
    expect(fifo.shift()).toBeUndefined();
  });

  it("keeps no item it has handed out", async () => {
    const fifo = new Fifo<{ payload: Uint8Array }>();
    const refs: WeakRef<object>[] = [];
    // Two items stay queued, ten are handed out and dropped by their taker.
    for (let i = 0; i < 12; i++) {
      const item = { payload: new Uint8Array(1024) };
      refs.push(new WeakRef(item));
      fifo.push(item);
    }
    for (let i = 0; i < 10; i++) fifo.shift();
    // A WeakRef's target stays alive until the end of the job that made it.
    await new Promise((resolve) => setImmediate(resolve));
    collectGarbage();
    expect(refs.map((r) => r.deref() !== undefined)).toEqual([...Array<boolean>(10).fill(false), true, true]);
    expect(fifo.length).toBe(2);
  });
});
