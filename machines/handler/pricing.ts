/**
 * What a Handler session's model calls cost (pure): prices by model id, looked up for the model that answered and
 * else for the one requested (servers answer with a dated id, `gpt-4o-mini-2024-07-18`, so the requested id is the
 * fallback key), and the `cost` notes of a call, a turn and a session's result.
 */
import { Usage, type TaskResult } from "../../protocol/index.js";

/** Per-1M-token prices of one model, in any currency unit. */
export interface ModelPrice {
  /** Price of 1M prompt tokens. */
  input: number;
  /** Price of 1M completion tokens. */
  output: number;
}

/** Per-1M-token prices by model id. */
export type Prices = Readonly<Record<string, ModelPrice>>;

/** The price of the first of `models` that `prices` lists, by own key only. */
export function priceOf(prices: Prices | undefined, ...models: string[]): ModelPrice | undefined {
  for (const model of models) if (prices && Object.hasOwn(prices, model)) return prices[model];
  return undefined;
}

/** The cost of `usage` at `price`, unrounded: the one cost formula. */
export const priced = (price: ModelPrice, usage: Usage): number =>
  (usage.promptTokens * price.input + usage.completionTokens * price.output) / 1_000_000;

/** A cost rounded to 1e-6, as costs are reported. */
export const roundCost = (cost: number): number => Math.round(cost * 1e6) / 1e6;

/** The cost of `usage` with `price`, rounded to 1e-6. */
export function costOf(usage: Usage, price: ModelPrice | undefined): number | undefined {
  return price ? roundCost(priced(price, usage)) : undefined;
}

/** The `cost` note of `usage` by the model that `answered` a call of `requested`; empty when neither has a price. */
export function costNote(prices: Prices | undefined, requested: string, answered: string, usage: Usage): { cost?: number } {
  const cost = costOf(usage, priceOf(prices, answered, requested));
  return cost === undefined ? {} : { cost };
}

/**
 * The costs of a turn answered by `answered` in a session of `requested`: the call's own (`callUsage`) and the
 * session's so far (`usage`).
 */
export function turnCosts(
  prices: Prices | undefined,
  requested: string,
  answered: string,
  callUsage: Usage,
  usage: Usage,
): { cost?: number; sessionCost?: number } {
  const { cost: sessionCost } = costNote(prices, requested, answered, usage);
  return { ...costNote(prices, requested, answered, callUsage), ...(sessionCost === undefined ? {} : { sessionCost }) };
}

/** `result` with the `cost` of its `usage` note, priced for the model of its `model` note that answered a call of `requested`. */
export function pricedResult<R extends TaskResult>(result: R, prices: Prices | undefined, requested: string): R {
  const usage = Usage.safeParse(result.notes["usage"]);
  if (!usage.success) return result;
  return { ...result, notes: { ...result.notes, ...costNote(prices, requested, String(result.notes["model"]), usage.data) } };
}
