/**
 * The model client's pure parts: full-jitter backoff bounds (random source injected), which failures retry, the
 * server's retry-after headers, and the choice between waiting and giving up.
 */
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { backoffMs, classify, nextRetry, retryAfterMs, type RetryPolicy } from "../../runtime/model/openai.js";

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
    for (const code of [408, 409, 429, 500, 503]) expect(classify(status(code), OpenAI)).toEqual({ retryable: true, status: code });
    for (const code of [400, 401, 404, 422]) expect(classify(status(code), OpenAI)).toEqual({ retryable: false, status: code });
    expect(classify(new OpenAI.APIConnectionError({ message: "refused" }), OpenAI)).toEqual({ retryable: true });
    expect(classify(new OpenAI.APIUserAbortError(), OpenAI)).toEqual({ retryable: false });
    expect(classify(new Error("other"), OpenAI)).toEqual({ retryable: false });
  });
});

describe("retryAfterMs", () => {
  const now = Date.parse("2026-01-01T12:00:00Z");
  const headers = (entries: Record<string, string>) => new Headers(entries);

  it("reads retry-after in seconds, fractions included, as milliseconds", () => {
    expect(retryAfterMs(headers({ "retry-after": "1" }), now)).toBe(1000);
    expect(retryAfterMs(headers({ "retry-after": "0" }), now)).toBe(0);
    expect(retryAfterMs(headers({ "retry-after": "2.5" }), now)).toBe(2500);
    expect(retryAfterMs(headers({ "retry-after": " 30 " }), now)).toBe(30_000);
  });

  it("reads retry-after as an HTTP date, counted from now, a past date asking for no wait", () => {
    expect(retryAfterMs(headers({ "retry-after": "Thu, 01 Jan 2026 12:00:07 GMT" }), now)).toBe(7000);
    expect(retryAfterMs(headers({ "retry-after": "Thu, 01 Jan 2026 11:59:00 GMT" }), now)).toBe(0);
  });

  it("prefers retry-after-ms, rounding its fractions up", () => {
    expect(retryAfterMs(headers({ "retry-after-ms": "250", "retry-after": "9" }), now)).toBe(250);
    expect(retryAfterMs(headers({ "retry-after-ms": "0.2" }), now)).toBe(1);
    expect(retryAfterMs(headers({ "retry-after-ms": "soon", "retry-after": "3" }), now)).toBe(3000);
  });

  it("asks for nothing without a header or with one it cannot read", () => {
    expect(retryAfterMs(undefined, now)).toBeUndefined();
    expect(retryAfterMs(headers({}), now)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after": "" }), now)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after": "-1" }), now)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after": "12" }), now)).toBe(12_000);
    expect(retryAfterMs(headers({ "retry-after": "1e3" }), now)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after": "later" }), now)).toBeUndefined();
  });
});

describe("nextRetry", () => {
  const policy: RetryPolicy = { maxRetries: 5, baseMs: 500, maxMs: 30_000, budgetMs: 60_000 };
  const top = () => 0.999_999;

  it("waits what the server asks, marked as from retry-after, instead of the backoff", () => {
    expect(nextRetry(policy, 1, 0, 1000, top)).toEqual({ retry: true, delayMs: 1000, fromRetryAfter: true });
    expect(nextRetry(policy, 3, 2000, 0, top)).toEqual({ retry: true, delayMs: 0, fromRetryAfter: true });
  });

  it("backs off with full jitter when the server asks for nothing", () => {
    expect(nextRetry(policy, 1, 0, undefined, top)).toEqual({ retry: true, delayMs: 500, fromRetryAfter: false });
    expect(nextRetry(policy, 4, 0, undefined, () => 0.5)).toEqual({ retry: true, delayMs: 2000, fromRetryAfter: false });
  });

  it("caps the server's wait at the longest wait when it fits the budget", () => {
    expect(nextRetry(policy, 1, 0, 45_000, top)).toEqual({ retry: true, delayMs: 30_000, fromRetryAfter: true });
  });

  it("gives up at once when the server asks for more than is left of the budget, saying so", () => {
    const fresh = nextRetry(policy, 1, 0, 120_000, top);
    expect(fresh).toEqual({
      retry: false,
      why: "not retried: the server asked to wait 120 s (retry-after), more than the model retry budget of 60 s",
    });
    const later = nextRetry(policy, 3, 50_000, 20_000, top);
    expect(later).toEqual({
      retry: false,
      why: "not retried: the server asked to wait 20 s (retry-after), more than the 10 s left of the model retry budget of 60 s",
    });
  });

  it("allows maxRetries retries, then gives up", () => {
    for (let attempt = 1; attempt <= 5; attempt++) expect(nextRetry(policy, attempt, 0, 1000).retry).toBe(true);
    expect(nextRetry(policy, 6, 0, 1000)).toEqual({ retry: false, why: "5 retries used up" });
    expect(nextRetry({ ...policy, maxRetries: 1 }, 2, 0, undefined)).toEqual({ retry: false, why: "1 retry used up" });
    expect(nextRetry({ ...policy, maxRetries: 0 }, 1, 0, 0)).toEqual({ retry: false, why: "0 retries used up" });
  });

  it("cuts a backoff to what is left of the budget, and gives up once it is spent", () => {
    expect(nextRetry(policy, 4, 59_000, undefined, top)).toEqual({ retry: true, delayMs: 1000, fromRetryAfter: false });
    expect(nextRetry({ ...policy, maxRetries: 20 }, 9, 60_000, undefined, top)).toEqual({
      retry: false,
      why: "the model retry budget of 60 s is used up",
    });
  });

  it("keeps the waits of a whole call within the budget, whichever way they come", () => {
    const wide: RetryPolicy = { maxRetries: 20, baseMs: 1000, maxMs: 30_000, budgetMs: 60_000 };
    let waited = 0;
    let attempt = 1;
    for (
      let decision = nextRetry(wide, attempt, waited, undefined, top);
      decision.retry;
      decision = nextRetry(wide, ++attempt, waited, attempt % 2 ? 4000 : undefined, top)
    ) {
      waited += decision.delayMs;
    }
    expect(waited).toBeLessThanOrEqual(60_000);
    expect(attempt).toBeGreaterThan(5);
  });
});
