/**
 * A task's spend and budgets in the Evaluator. Every Handler call of the task (every node, the subtasks that run
 * as child evaluations, sessions resumed after a continuation) is charged what it used, from its reply's
 * `notes.usage` and `notes.cost`; a resumed session's reply reports the session's cumulative usage, so only the
 * part since the state it resumed from counts. Each call is sent what is left of the budgets around it: the
 * task's (`max_tokens`, `max_cost` of the submission) and those of template nodes above it (attributes
 * `max_tokens="…"`, `max_cost="…"` on a `<task>`, for its subtree), the smallest remainder winning. The budgets
 * of nodes travel in the reserved `$budgets` binding, so they follow function templates and subtasks.
 */
import { randomUUID } from "node:crypto";
import type { SuspendedResult } from "../../machines/evaluator/continuation.js";
import { flatten, type Env } from "../../machines/language/env.js";
import { Usage, type ExecuteRequest, type SessionState, type TaskBudget, type TaskResult } from "../../protocol/index.js";
import type { TaskNode } from "../../machines/language/ast.js";
import { roundCost } from "../../machines/handler/pricing.js";

/** The reserved binding that holds the budgets of the nodes around a point of the walk. */
export const BUDGET_BINDING = "$budgets";

/** One budget: the task's (id `task`), or a template node's over its subtree. */
export interface BudgetScope {
  id: string;
  /** Prompt plus completion tokens. */
  tokens?: number;
  /** Cost, in the unit of the price table. */
  cost?: number;
}

const isScope = (value: unknown): value is BudgetScope =>
  typeof value === "object" && value !== null && typeof Reflect.get(value, "id") === "string";

/** The budgets of the template nodes around `env`, outermost first. */
export function budgetScopes(env: Env): BudgetScope[] {
  const value = flatten(env)[BUDGET_BINDING];
  return Array.isArray(value) ? value.filter(isScope) : [];
}

/**
 * The binding a task node's `max_tokens` / `max_cost` attributes open for its subtree (each evaluation of the node
 * gets a budget of its own); nothing without them; an error for a value that is not a positive number.
 */
export function nodeBudgetBinding(node: TaskNode, env: Env): { bindings: Record<string, unknown> } | { error: string } {
  const read = (name: string, integer: boolean): number | undefined | string => {
    const text = node.attributes[name];
    if (text === undefined) return undefined;
    const value = Number(text.trim());
    const ok = text.trim() !== "" && Number.isFinite(value) && value > 0 && (!integer || Number.isInteger(value));
    return ok ? value : `${name}="${text}" is not a positive ${integer ? "integer" : "number"}`;
  };
  const tokens = read("max_tokens", true);
  const cost = read("max_cost", false);
  if (typeof tokens === "string") return { error: tokens };
  if (typeof cost === "string") return { error: cost };
  if (tokens === undefined && cost === undefined) return { bindings: {} };
  const scope: BudgetScope = { id: randomUUID(), ...(tokens === undefined ? {} : { tokens }), ...(cost === undefined ? {} : { cost }) };
  return { bindings: { [BUDGET_BINDING]: [...budgetScopes(env), scope] } };
}

/** What the task has spent, and what each budget has left. */
export interface TaskSpend {
  /** The `budget` field of an `ExecuteRequest` for a call under `scopes`: what is left; nothing without budgets. */
  remaining(scopes: readonly BudgetScope[]): Pick<ExecuteRequest, "budget">;
  /** The budgets of the call that suspended `session`, for its resume. */
  scopesOfSession(path: string, session: SessionState): readonly BudgetScope[];
  /**
   * Charges a Handler reply to the task and to `scopes` (a resumed session: only its use since `from`), and
   * restates a `budget` exhaustion in the task's terms (what the exhausted budget's owner used, and its limit).
   */
  charge(path: string, result: SuspendedResult, scopes: readonly BudgetScope[], from?: SessionState): SuspendedResult;
  /** `result` with `notes.task_usage` (and `notes.task_cost` when priced): the whole task's use, once it used any. */
  withTotals(result: TaskResult): TaskResult;
  /**
   * Reserves for one of `parts` branches that start from here its share of what is left of the budgets around
   * `scopes` (less what running branches hold): the branch's own budget, held against those budgets until
   * `release`. Nothing without budgets.
   */
  reserve(scopes: readonly BudgetScope[], parts: number): { scope: BudgetScope; release(): void } | undefined;
}

/** A suspended session of the node at `path`, as the call that resumes it names it. */
export const sessionKey = (path: string, session: SessionState) => `${path}|${session.toolCallId}|${session.messages.length}`;

/** What the task has used so far, reported after each Handler call under a budget (the `task.usage` event). */
export interface SpendReport {
  nodePath: string;
  /** The whole task's usage so far. */
  usage: Usage;
  /** The whole task's cost so far, when priced. */
  cost?: number;
  /** What is left of the budgets around the node (the least of each). */
  left: NonNullable<ExecuteRequest["budget"]>;
}

/** A task's spend, with the submitted budget `budget`; `report` hears of every charged call. */
export function createTaskSpend(budget: TaskBudget | undefined, report?: (spent: SpendReport) => void): TaskSpend {
  const root: BudgetScope = {
    id: "task",
    ...(budget?.max_tokens === undefined ? {} : { tokens: budget.max_tokens }),
    ...(budget?.max_cost === undefined ? {} : { cost: budget.max_cost }),
  };
  // The maps are made when first written: most tasks charge nothing while their first call is in flight, and an
  // empty Map is 0.2 KB held for each.
  let spent: Map<string, { tokens: number; cost: number }> | undefined;
  const total = { promptTokens: 0, completionTokens: 0, cost: 0, priced: false, calls: 0 };
  let suspended: Map<string, { scopes: readonly BudgetScope[]; cost: number }> | undefined;
  const all = (scopes: readonly BudgetScope[]) => [root, ...scopes];
  const spentOf = (scope: BudgetScope) => spent?.get(scope.id) ?? { tokens: 0, cost: 0 };
  /** Branch budgets held now: each against the budgets that were around it (`parents`). */
  let reservations: Map<string, { scope: BudgetScope; parents: ReadonlySet<string> }> | undefined;
  /** What running branches still hold of `scope`: their budgets less what they spent. */
  const heldOf = (scope: BudgetScope, unit: "tokens" | "cost") => {
    let held = 0;
    for (const r of reservations?.values() ?? [])
      if (r.parents.has(scope.id)) held += Math.max(0, (r.scope[unit] ?? 0) - spentOf(r.scope)[unit]);
    return held;
  };

  /**
   * The budget of `scopes` with the least left in `unit`. Inside a branch, the budgets around it are not counted:
   * its reservation already holds its part of them.
   */
  const tightest = (scopes: readonly BudgetScope[], unit: "tokens" | "cost") => {
    const covered = new Set(scopes.flatMap((s) => [...(reservations?.get(s.id)?.parents ?? [])]));
    let best: { scope: BudgetScope; left: number } | undefined;
    for (const scope of all(scopes)) {
      const limit = scope[unit];
      if (limit === undefined || covered.has(scope.id)) continue;
      const left = limit - spentOf(scope)[unit] - heldOf(scope, unit);
      if (!best || left < best.left) best = { scope, left };
    }
    return best;
  };

  const remaining = (scopes: readonly BudgetScope[]): Pick<ExecuteRequest, "budget"> => {
    const tokens = tightest(scopes, "tokens");
    const cost = tightest(scopes, "cost");
    if (!tokens && !cost) return {};
    return {
      budget: { ...(tokens ? { tokens: Math.max(0, tokens.left) } : {}), ...(cost ? { cost: Math.max(0, roundCost(cost.left)) } : {}) },
    };
  };

  return {
    remaining,
    scopesOfSession(path, session) {
      return suspended?.get(sessionKey(path, session))?.scopes ?? [];
    },
    charge(path, result, scopes, from) {
      const usage = Usage.safeParse(result.notes["usage"]);
      const cost = typeof result.notes["cost"] === "number" ? result.notes["cost"] : undefined;
      const before = from ? suspended?.get(sessionKey(path, from)) : undefined;
      if (from) suspended?.delete(sessionKey(path, from));
      if (usage.success) {
        const prompt = Math.max(0, usage.data.promptTokens - (from?.usage.promptTokens ?? 0));
        const completion = Math.max(0, usage.data.completionTokens - (from?.usage.completionTokens ?? 0));
        const costDelta = cost === undefined ? 0 : Math.max(0, cost - (before?.cost ?? 0));
        total.promptTokens += prompt;
        total.completionTokens += completion;
        total.cost += costDelta;
        total.priced ||= cost !== undefined;
        total.calls++;
        for (const scope of all(scopes)) {
          const s = spentOf(scope);
          (spent ??= new Map()).set(scope.id, { tokens: s.tokens + prompt + completion, cost: s.cost + costDelta });
        }
        // Reported for calls under a budget only: the event says what is left.
        const left = remaining(scopes).budget;
        if (left) {
          report?.({
            nodePath: path,
            usage: { promptTokens: total.promptTokens, completionTokens: total.completionTokens },
            ...(total.priced ? { cost: roundCost(total.cost) } : {}),
            left,
          });
        }
      }
      if (result.session) (suspended ??= new Map()).set(sessionKey(path, result.session), { scopes, cost: cost ?? 0 });
      const error = result.error;
      if (error?.type !== "RESOURCE_EXHAUSTION" || error.resource !== "budget") return result;
      const unit = error.budget ?? "tokens";
      const owner = tightest(scopes, unit);
      if (!owner) return result;
      const limit = owner.scope[unit] ?? 0;
      const used = roundCost(spentOf(owner.scope)[unit]);
      const whose =
        owner.scope.id === root.id ? "the task's" : reservations?.has(owner.scope.id) ? "a map branch's share of the" : "a template node's";
      const message = `${whose} ${unit === "tokens" ? "token" : "cost"} budget of ${limit} reached (${used} used)`;
      return { ...result, error: { ...error, message, metrics: { used, limit } } };
    },
    reserve(scopes, parts) {
      const tokens = tightest(scopes, "tokens");
      const cost = tightest(scopes, "cost");
      if (!tokens && !cost) return undefined;
      const share = (left: number) => Math.max(0, left) / Math.max(1, parts);
      const scope: BudgetScope = {
        id: randomUUID(),
        ...(tokens ? { tokens: Math.floor(share(tokens.left)) } : {}),
        ...(cost ? { cost: roundCost(share(cost.left)) } : {}),
      };
      (reservations ??= new Map()).set(scope.id, { scope, parents: new Set(all(scopes).map((s) => s.id)) });
      return { scope, release: () => reservations?.delete(scope.id) };
    },
    withTotals(result) {
      if (total.calls === 0) return result;
      const usage: Usage = { promptTokens: total.promptTokens, completionTokens: total.completionTokens };
      return { ...result, notes: { ...result.notes, task_usage: usage, ...(total.priced ? { task_cost: roundCost(total.cost) } : {}) } };
    },
  };
}

/** One line for a `task.usage` event: `task: 1200+800 tokens, cost 2; left 0 tokens`. */
export function usageLine(spent: SpendReport): string {
  const cost = spent.cost === undefined ? "" : `, cost ${spent.cost}`;
  const left = [
    spent.left.tokens === undefined ? "" : `${spent.left.tokens} tokens`,
    spent.left.cost === undefined ? "" : `cost ${spent.left.cost}`,
  ]
    .filter(Boolean)
    .join(", ");
  return `task: ${spent.usage.promptTokens}+${spent.usage.completionTokens} tokens${cost}${left ? `; left ${left}` : ""}`;
}
