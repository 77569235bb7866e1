/** `--max-tokens`, `--max-cost` and `--stream` of `dirigent run | submit`: the task's budget and streaming. */
import type { TaskBudget } from "../../protocol/index.js";
import { UsageError } from "./common.js";

/** The flags as commander gives them. */
export interface BudgetFlags {
  maxTokens?: string;
  maxCost?: string;
  stream?: boolean;
}

/** The submission fields the flags set; a usage error names a bad value. */
export function budgetFields(flags: BudgetFlags): { budget?: TaskBudget; stream?: boolean } {
  const budget: TaskBudget = {};
  if (flags.maxTokens !== undefined) {
    const n = Number(flags.maxTokens);
    if (!/^\d+$/.test(flags.maxTokens.trim()) || !Number.isSafeInteger(n) || n <= 0)
      throw new UsageError(`--max-tokens '${flags.maxTokens}': must be a positive integer`);
    budget.max_tokens = n;
  }
  if (flags.maxCost !== undefined) {
    const n = Number(flags.maxCost);
    if (flags.maxCost.trim() === "" || !Number.isFinite(n) || n <= 0)
      throw new UsageError(`--max-cost '${flags.maxCost}': must be a positive number`);
    budget.max_cost = n;
  }
  return { ...(Object.keys(budget).length > 0 ? { budget } : {}), ...(flags.stream ? { stream: true } : {}) };
}
