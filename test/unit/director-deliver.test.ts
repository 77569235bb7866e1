import { describe, expect, it } from "vitest";
import type { WorkItem } from "../../actors/bus.js";
import type { Logger } from "../../actors/deps.js";
import { deliver } from "../../actors/director/run.js";
import type { RunEnv } from "../../actors/director/run-env.js";

describe("a Director's intake delivery", () => {
  it("drops an item queued under an illegal task id, with a warning, before it reaches a run", async () => {
    const warned: string[] = [];
    const log: Logger = {
      debug: () => undefined,
      info: () => undefined,
      warn: (_, msg) => void warned.push(msg ?? ""),
      error: () => undefined,
    };
    // Only the log is reached: the item is refused before anything else of the Director is.
    const env = { deps: { log }, owned: new Map() } as unknown as RunEnv;
    const settled: string[] = [];
    const item: WorkItem = {
      id: "not a task id",
      data: new Uint8Array(0),
      deliveries: 1,
      seq: 1,
      ack: async () => void settled.push("ack"),
      nak: () => void settled.push("nak"),
      working: () => undefined,
    };
    await deliver(
      env,
      item,
      () => false,
      async () => false,
    );
    expect(settled).toEqual(["ack"]);
    expect(warned).toEqual(["intake item under an illegal task id; dropped"]);
  });
});
