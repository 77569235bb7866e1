/** The arithmetic of the soak's figures (test/bench/soak/report.ts), without a run. */
import { describe, expect, it } from "vitest";
import { memoryPoints, repeats, tally, type MemorySample } from "./report.js";

describe("soak figures", () => {
  it("counts tasks completed, failed, lost and with more than one result", () => {
    const results = new Map([
      ["a", ["COMPLETE"]],
      ["b", ["FAILED TASK_FAILURE: boom"]],
      ["c", ["COMPLETE", "COMPLETE"]],
      ["stray", ["COMPLETE"]],
    ]);
    expect(tally(new Set(["a", "b", "c", "d"]), 2, results)).toEqual({
      accepted: 4,
      refused: 2,
      completed: 2,
      failed: 1,
      lost: 1,
      repeatedResults: 1,
    });
  });

  it("counts each call of a step after its first, put down to the latest kill before it", () => {
    const calls = [
      { at: 10, step: "soak-1-s1" },
      { at: 12, step: "soak-1-s1" },
      { at: 30, step: "soak-2-s1" },
      { at: 55, step: "soak-2-s1" },
      { at: 70, step: "soak-2-s1" },
      { at: 71, step: "soak-3-s1" },
    ];
    const kills = [
      { at: 60, role: "handler" as const },
      { at: 50, role: "director" as const },
    ];
    expect(repeats(calls, kills)).toEqual({
      calls: 6,
      repeated: 3,
      byRole: { none: 1, director: 1, handler: 1, evaluator: 0, memory: 0 },
    });
  });

  it("takes memory as means over the thirds after the warm-up, so a garbage collection's saw-tooth evens out", () => {
    // 100 MB at the start; after a warm-up of 10 s a saw-tooth between 150 and 200 MB with a period of 4 s.
    const samples: MemorySample[] = Array.from({ length: 101 }, (_, i) => ({
      at: i * 1000,
      rss: i === 0 ? 100e6 : i < 10 ? 120e6 : 150e6 + ((i % 4) * 50e6) / 3,
    }));
    const flat = memoryPoints(samples, (s) => s.rss, 10_000, 100_000);
    expect(flat?.start).toBe(100e6);
    expect(flat?.thirds.map((t) => [t.min, t.max])).toEqual([
      [150e6, 200e6],
      [150e6, 200e6],
      [150e6, 200e6],
    ]);
    expect(flat?.drift).toBeLessThan(0.05);

    // The same, growing by 1 MB a second: the drift shows it.
    const growing = samples.map((s) => ({ ...s, rss: s.rss + s.at * 1000 }));
    expect(memoryPoints(growing, (s) => s.rss, 10_000, 100_000)?.drift).toBeGreaterThan(0.25);

    // A third without samples (the heap, when the metrics did not answer) gives no figure.
    expect(memoryPoints(samples, (s) => s.heapUsed, 10_000, 100_000)).toBeUndefined();
  });
});
