/**
 * The task budget as a Handler session sees it (pure): what the session may still spend, checked before each
 * model call with the tokens about to be sent. Over it, the session ends with `RESOURCE_EXHAUSTION` `budget`,
 * carrying the partial content. A task's remaining budget becomes the session's limits on its cumulative usage (a
 * resumed session's earlier usage added back), with the price of the model for a cost budget.
 */
import type { ExecuteRequest, TaskError, Usage } from "../../protocol/index.js";
import { priced, roundCost, type ModelPrice } from "./pricing.js";

/**
 * Limits on the session's cumulative usage (a resumed session's earlier usage included): `tokens` on prompt plus
 * completion tokens, `cost` on their price (checked only with a `price`).
 */
export interface SessionBudget {
  tokens?: number;
  cost?: number;
  /** Per-1M-token prices of the session's model. */
  price?: ModelPrice;
}

/**
 * The budget the next model call would break: spent so far plus `nextPrompt` (the tokens about to be sent)
 * over a limit. Undefined when the call fits, or without a budget.
 */
export function budgetExceeded(budget: SessionBudget | undefined, usage: Usage, nextPrompt: number, content = ""): TaskError | undefined {
  if (!budget) return undefined;
  const spent = usage.promptTokens + usage.completionTokens;
  if (budget.tokens !== undefined && spent + nextPrompt > budget.tokens) {
    return {
      type: "RESOURCE_EXHAUSTION",
      resource: "budget",
      budget: "tokens",
      message: `token budget of ${budget.tokens} reached (${spent} used, the next call sends ${nextPrompt})`,
      metrics: { used: spent, limit: budget.tokens },
      content,
    };
  }
  if (budget.cost !== undefined && budget.price) {
    const cost = priced(budget.price, usage);
    if (cost + priced(budget.price, { promptTokens: nextPrompt, completionTokens: 0 }) > budget.cost) {
      return {
        type: "RESOURCE_EXHAUSTION",
        resource: "budget",
        budget: "cost",
        message: `cost budget of ${budget.cost} reached (${roundCost(cost)} spent, the next call sends ${nextPrompt} tokens)`,
        metrics: { used: roundCost(cost), limit: budget.cost },
        content,
      };
    }
  }
  return undefined;
}

/** The session machine's `budget` input for `request`, or nothing when the request carries no budget. */
export function sessionBudget(request: ExecuteRequest, price: ModelPrice | undefined): { budget?: SessionBudget } {
  const remaining = request.budget;
  if (!remaining || (remaining.tokens === undefined && remaining.cost === undefined)) return {};
  const before: Usage = request.resume?.session.usage ?? { promptTokens: 0, completionTokens: 0 };
  const budget: SessionBudget = {};
  if (remaining.tokens !== undefined) budget.tokens = remaining.tokens + before.promptTokens + before.completionTokens;
  if (remaining.cost !== undefined && price) {
    budget.cost = remaining.cost + priced(price, before);
    budget.price = { input: price.input, output: price.output };
  }
  return { budget };
}
