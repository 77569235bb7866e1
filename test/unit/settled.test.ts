/** actors/settled.ts: a call's cleanup runs once, as soon as the call settles, or at once when it throws. */
import { describe, expect, it } from "vitest";
import { settled } from "../../actors/settled.js";

describe("settled", () => {
  it("cleans up before the caller sees the value, and once", async () => {
    const order: string[] = [];
    const value = await settled(
      () => Promise.resolve(7),
      () => order.push("cleanup"),
    ).then((v) => (order.push("caller"), v));
    expect(value).toBe(7);
    expect(order).toEqual(["cleanup", "caller"]);
  });

  it("cleans up before the caller sees the error, and passes it on", async () => {
    const order: string[] = [];
    const failed = settled(
      () => Promise.reject(new Error("no")),
      () => order.push("cleanup"),
    ).catch((err: Error) => (order.push("caller"), err.message));
    expect(await failed).toBe("no");
    expect(order).toEqual(["cleanup", "caller"]);
  });

  it("cleans up at once when the call throws before returning a promise", async () => {
    let cleaned = 0;
    const failed = settled(
      () => {
        throw new Error("at once");
      },
      () => cleaned++,
    );
    expect(cleaned).toBe(1);
    await expect(failed).rejects.toThrow("at once");
    expect(cleaned).toBe(1);
  });

  it("answers from the value before cleaning up, and cleans up when the answer throws", async () => {
    const order: string[] = [];
    const answered = await settled(
      () => Promise.resolve(2),
      () => order.push("cleanup"),
      (v) => (order.push("answer"), v * 10),
    );
    expect(answered).toBe(20);
    expect(order).toEqual(["answer", "cleanup"]);
    let cleaned = 0;
    const refused = settled(
      () => Promise.resolve(2),
      () => cleaned++,
      () => {
        throw new Error("superseded");
      },
    );
    await expect(refused).rejects.toThrow("superseded");
    expect(cleaned).toBe(1);
  });
});
