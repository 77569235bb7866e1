/** The arithmetic of the user-level bench (test/bench/user-level/stats.ts). */
import { describe, expect, it } from "vitest";
import { cpuPerTask, marginalStepMs, ratio, stepOverheadMs } from "./stats.js";

describe("user-level bench arithmetic", () => {
  it("shares a sequential task's time over the model's among its steps", () => {
    // 10 steps in 25 ms, the model answering in 2 ms: 0.5 ms per step.
    expect(stepOverheadMs(25, 10, 2)).toBeCloseTo(0.5);
    expect(stepOverheadMs(20, 10, 2)).toBe(0);
  });

  it("takes the cost of one step more from the difference to a one-step task", () => {
    // One step in 4 ms, ten in 26.5 ms: 2.5 ms per added step, 0.5 ms of it over a 2 ms model.
    expect(marginalStepMs(26.5, 4, 10, 2)).toBeCloseTo(0.5);
    expect(() => marginalStepMs(4, 4, 1, 2)).toThrow(/two steps or more/);
  });

  it("gives CPU per task only from two readings", () => {
    expect(cpuPerTask(1_000, 21_000, 100)).toBe(200);
    expect(cpuPerTask(undefined, 21_000, 100)).toBeUndefined();
    expect(cpuPerTask(1_000, undefined, 100)).toBeUndefined();
    expect(cpuPerTask(1_000, 2_000, 0)).toBeUndefined();
  });

  it("has no ratio to nothing", () => {
    expect(ratio(3, 2)).toBe(1.5);
    expect(ratio(3, undefined)).toBeUndefined();
    expect(ratio(3, 0)).toBeUndefined();
    expect(ratio(Number.NaN, 2)).toBeUndefined();
  });
});
