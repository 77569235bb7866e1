/**
 * The Handler's side of task budgets: turns the remaining budget of an `ExecuteRequest` into the limits its
 * session machine checks before each model call (on the session's cumulative usage, so a resumed session's
 * earlier usage is added back), with the price of the model for a cost budget.
 */
import type { SessionBudget } from "../../machines/handler/budget.js";
import type { ExecuteRequest, Usage } from "../../protocol/index.js";
import type { ModelPrice } from "../../machines/handler/pricing.js";

/** The session machine's `budget` input for `request`, or nothing when the request carries no budget. */
export function sessionBudget(request: ExecuteRequest, price: ModelPrice | undefined): { budget?: SessionBudget } {
  const remaining = request.budget;
  if (!remaining || (remaining.tokens === undefined && remaining.cost === undefined)) return {};
  const before: Usage = request.resume?.session.usage ?? { promptTokens: 0, completionTokens: 0 };
  const budget: SessionBudget = {};
  if (remaining.tokens !== undefined) budget.tokens = remaining.tokens + before.promptTokens + before.completionTokens;
  if (remaining.cost !== undefined && price) {
    budget.cost = remaining.cost + (before.promptTokens * price.input + before.completionTokens * price.output) / 1_000_000;
    budget.price = { input: price.input, output: price.output };
  }
  return { budget };
}
