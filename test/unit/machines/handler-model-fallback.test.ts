import { describe, expect, it } from "vitest";
import { modelsToTry, nextModel, unavailableStatus } from "../../../machines/handler/model-fallback.js";

describe("a session's model fallback", () => {
  it.each([
    { first: "a", fallbacks: [], models: ["a"] },
    { first: "a", fallbacks: ["b", "c"], models: ["a", "b", "c"] },
    { first: "a", fallbacks: ["b", "a", "c"], models: ["a", "b", "c"] },
  ])("$first with fallbacks $fallbacks tries $models", ({ first, fallbacks, models }) => {
    expect(modelsToTry(first, fallbacks)).toEqual(models);
  });

  it.each([
    [undefined, true],
    [403, true],
    [404, true],
    [408, true],
    [409, true],
    [429, true],
    [500, true],
    [503, true],
    [400, false],
    [401, false],
    [413, false],
    [422, false],
  ])("status %s says the model is unavailable: %s", (status, unavailable) => {
    expect(unavailableStatus(status)).toBe(unavailable);
  });

  it.each([
    { index: 0, unavailable: true, aborted: false, next: "b" },
    { index: 1, unavailable: true, aborted: false, next: undefined },
    { index: 0, unavailable: false, aborted: false, next: undefined },
    { index: 0, unavailable: true, aborted: true, next: undefined },
  ])("after model $index failed (unavailable $unavailable, aborted $aborted) tries $next", ({ index, unavailable, aborted, next }) => {
    expect(nextModel(["a", "b"], index, { unavailable, aborted })).toBe(next);
  });
});
