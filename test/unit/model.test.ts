/** The model client's pure parts: full-jitter backoff bounds (random source injected) and which failures retry. */
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { backoffMs, classify } from "../../actors/model.js";

describe("backoffMs", () => {
  it("waits between 0 and base × 2^(attempt-1), the random source choosing where", () => {
    expect(backoffMs(1, 500, 30_000, () => 0)).toBe(0);
    expect(backoffMs(1, 500, 30_000, () => 0.5)).toBe(250);
    expect(backoffMs(1, 500, 30_000, () => 0.999_999)).toBe(500);
    expect(backoffMs(3, 500, 30_000, () => 0.999_999)).toBe(2000);
    expect(backoffMs(3, 500, 30_000, () => 0.25)).toBe(500);
  });

  it("never waits longer than the cap, however many attempts", () => {
    expect(backoffMs(10, 500, 30_000, () => 0.999_999)).toBe(30_000);
    expect(backoffMs(60, 500, 30_000, () => 0.5)).toBe(15_000);
  });

  it("stays within [0, min(max, base × 2^(attempt-1))] for random values across [0, 1)", () => {
    for (let attempt = 1; attempt <= 12; attempt++) {
      const ceiling = Math.min(8_000, 100 * 2 ** (attempt - 1));
      for (let i = 0; i < 100; i++) {
        const r = i / 100;
        const wait = backoffMs(attempt, 100, 8_000, () => r);
        expect(wait).toBeGreaterThanOrEqual(0);
        expect(wait).toBeLessThanOrEqual(ceiling);
        expect(Number.isInteger(wait)).toBe(true);
      }
    }
  });
});

describe("classify", () => {
  const status = (code: number) => OpenAI.APIError.generate(code, { error: { message: "x" } }, "x", new Headers());

  it("retries 408, 409, 429 and 5xx, and connection errors, not other statuses or an abort", () => {
    for (const code of [408, 409, 429, 500, 503]) expect(classify(status(code))).toEqual({ retryable: true, status: code });
    for (const code of [400, 401, 404, 422]) expect(classify(status(code))).toEqual({ retryable: false, status: code });
    expect(classify(new OpenAI.APIConnectionError({ message: "refused" }))).toEqual({ retryable: true });
    expect(classify(new OpenAI.APIUserAbortError())).toEqual({ retryable: false });
    expect(classify(new Error("other"))).toEqual({ retryable: false });
  });
});
