import { describe, expect, it } from "vitest";
import { costNote, costOf, priceOf, pricedResult, turnCosts, type Prices } from "../../../machines/handler/pricing.js";
import type { TaskResult } from "../../../protocol/index.js";

const prices: Prices = { "gpt-4o-mini": { input: 0.15, output: 0.6 }, big: { input: 10, output: 30 } };
const usage = { promptTokens: 1000, completionTokens: 500 };

describe("Handler pricing", () => {
  it.each([
    { models: ["gpt-4o-mini"], want: prices["gpt-4o-mini"] },
    { models: ["gpt-4o-mini-2024-07-18", "gpt-4o-mini"], want: prices["gpt-4o-mini"] },
    { models: ["big", "gpt-4o-mini"], want: prices["big"] },
    { models: ["unknown"], want: undefined },
    { models: ["toString"], want: undefined },
    { models: [], want: undefined },
  ])("priceOf $models", ({ models, want }) => {
    expect(priceOf(prices, ...models)).toEqual(want);
  });

  it("priceOf without prices is undefined", () => {
    expect(priceOf(undefined, "gpt-4o-mini")).toBeUndefined();
  });

  it.each([
    { price: { input: 0.15, output: 0.6 }, want: 0.00045 },
    { price: { input: 1, output: 1 }, want: 0.0015 },
    { price: { input: 1 / 3, output: 0 }, want: 0.000333 },
    { price: undefined, want: undefined },
  ])("costOf at $price is $want, rounded to 1e-6", ({ price, want }) => {
    expect(costOf(usage, price)).toBe(want);
  });

  it.each([
    { requested: "gpt-4o-mini", answered: "gpt-4o-mini-2024-07-18", want: { cost: 0.00045 } },
    { requested: "gpt-4o-mini", answered: "big", want: { cost: 0.025 } },
    { requested: "unknown", answered: "unknown-2025", want: {} },
  ])("costNote: $answered answering a call of $requested", ({ requested, answered, want }) => {
    expect(costNote(prices, requested, answered, usage)).toEqual(want);
  });

  it("turnCosts gives the call's cost and the session's", () => {
    const call = { promptTokens: 100, completionTokens: 0 };
    expect(turnCosts(prices, "big", "big-2025", call, usage)).toEqual({ cost: 0.001, sessionCost: 0.025 });
    expect(turnCosts(prices, "unknown", "unknown", call, usage)).toEqual({});
  });

  it("pricedResult adds the cost of the result's usage, and leaves a result without usage alone", () => {
    const result: TaskResult = { content: "x", status: "COMPLETE", notes: { usage, model: "gpt-4o-mini-2024-07-18", turns: 1 } };
    expect(pricedResult(result, prices, "gpt-4o-mini").notes).toEqual({ ...result.notes, cost: 0.00045 });
    expect(pricedResult(result, undefined, "gpt-4o-mini")).toEqual(result);
    const bare: TaskResult = { content: "x", status: "COMPLETE", notes: { turns: 1 } };
    expect(pricedResult(bare, prices, "gpt-4o-mini")).toBe(bare);
  });
});
