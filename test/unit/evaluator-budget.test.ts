import { describe, expect, it } from "vitest";
import { budgetScopes, createTaskSpend, nodeBudgetBinding } from "../../actors/evaluator/budget.js";
import { parseTemplate } from "../../machines/language/parse.js";
import { extend, rootEnv } from "../../machines/language/env.js";
import type { SessionState, TaskResult } from "../../protocol/index.js";
import type { TaskNode } from "../../machines/language/ast.js";

function task(xml: string): TaskNode {
  const parsed = parseTemplate(xml);
  if (!parsed.ok || parsed.document.entry?.kind !== "task") throw new Error("not a task");
  return parsed.document.entry;
}

const used = (promptTokens: number, completionTokens: number, extra: Partial<TaskResult> = {}): TaskResult => ({
  content: "",
  status: "COMPLETE",
  notes: { usage: { promptTokens, completionTokens } },
  ...extra,
});

const session = (promptTokens: number, completionTokens: number): SessionState => ({
  messages: [
    { role: "system", content: "s" },
    { role: "user", content: "u" },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "run_subtask", arguments: "{}" } }] },
  ],
  toolCallId: "c1",
  turns: 1,
  usage: { promptTokens, completionTokens },
  context: { used: 0, limit: 1000, peak: 0 },
  reportedTokens: 0,
  warned: false,
  malformedToolCalls: 0,
  model: "m",
});

describe("task spend", () => {
  it("sends what is left of the task's budget and totals the task's usage", () => {
    const spend = createTaskSpend({ max_tokens: 100 });
    expect(spend.remaining([])).toEqual({ budget: { tokens: 100 } });
    spend.charge("0.steps.0", used(30, 10), []);
    expect(spend.remaining([])).toEqual({ budget: { tokens: 60 } });
    spend.charge("0.steps.1", used(50, 30), []);
    expect(spend.remaining([])).toEqual({ budget: { tokens: 0 } });
    expect(spend.withTotals(used(1, 1)).notes).toMatchObject({ task_usage: { promptTokens: 80, completionTokens: 40 } });
    expect(createTaskSpend(undefined).remaining([])).toEqual({});
  });

  it("charges a resumed session only what it used since it suspended, cost included", () => {
    const spend = createTaskSpend({ max_tokens: 1000, max_cost: 1 });
    const suspended = session(100, 20);
    spend.charge(
      "0",
      {
        ...used(100, 20),
        notes: { usage: { promptTokens: 100, completionTokens: 20 }, cost: 0.1 },
        status: "CONTINUATION",
        session: suspended,
      },
      [],
    );
    spend.charge("0", { ...used(30, 5), notes: { usage: { promptTokens: 30, completionTokens: 5 }, cost: 0.02 } }, []); // the child
    spend.charge(
      "0",
      { ...used(250, 40), notes: { usage: { promptTokens: 250, completionTokens: 40 }, cost: 0.25 } },
      spend.scopesOfSession("0", suspended),
      suspended,
    );
    const totals = spend.withTotals(used(0, 0)).notes;
    expect(totals).toMatchObject({ task_usage: { promptTokens: 280, completionTokens: 45 }, task_cost: 0.27 });
    expect(spend.remaining([])).toEqual({ budget: { tokens: 1000 - 325, cost: 0.73 } });
  });

  it("restates a budget exhaustion in the task's terms", () => {
    const spend = createTaskSpend({ max_tokens: 50 });
    spend.charge("0", used(40, 20), []);
    const refused = spend.charge(
      "1",
      used(0, 0, {
        status: "FAILED",
        error: { type: "RESOURCE_EXHAUSTION", resource: "budget", budget: "tokens", message: "x", metrics: { used: 0, limit: 0 } },
      }),
      [],
    );
    expect(refused.error).toMatchObject({
      resource: "budget",
      metrics: { used: 60, limit: 50 },
      message: "the task's token budget of 50 reached (60 used)",
    });
  });

  it("gives a node's budget to its subtree; the smaller remainder wins", () => {
    const node = task(`<task max_tokens="30" max_cost="0.5"><description>d</description></task>`);
    const bound = nodeBudgetBinding(node, rootEnv({}));
    if (!("bindings" in bound)) throw new Error(bound.error);
    const scopes = budgetScopes(extend(rootEnv({}), bound.bindings));
    expect(scopes).toMatchObject([{ tokens: 30, cost: 0.5 }]);
    const spend = createTaskSpend({ max_tokens: 100 });
    expect(spend.remaining(scopes)).toEqual({ budget: { tokens: 30, cost: 0.5 } });
    spend.charge("0", used(20, 5), scopes);
    expect(spend.remaining(scopes)).toEqual({ budget: { tokens: 5, cost: 0.5 } });
    expect(spend.remaining([])).toEqual({ budget: { tokens: 75 } });
    expect(nodeBudgetBinding(task(`<task max_tokens="lots"><description>d</description></task>`), rootEnv({}))).toEqual({
      error: 'max_tokens="lots" is not a positive integer',
    });
  });
});

describe("map branches' shares of a budget", () => {
  it("gives each branch its share of what is left, held against the task until the branch ends", () => {
    const spend = createTaskSpend({ max_tokens: 1000 });
    const first = spend.reserve([], 4);
    expect(first?.scope.tokens).toBe(250);
    const second = spend.reserve([], 3);
    expect(second?.scope.tokens).toBe(250);
    if (!first || !second) throw new Error("no reservation");
    // A call inside the first branch is sent the branch's share, not the task's remainder.
    expect(spend.remaining([first.scope])).toEqual({ budget: { tokens: 250 } });
    spend.charge("0.steps.0", used(60, 40), [first.scope]);
    expect(spend.remaining([first.scope])).toEqual({ budget: { tokens: 150 } });
    // Outside the branches: what neither spent nor holds (1000 - 100 spent - 150 and 250 held).
    expect(spend.remaining([])).toEqual({ budget: { tokens: 500 } });
    first.release();
    expect(spend.remaining([])).toEqual({ budget: { tokens: 650 } });
    // A later branch shares what the finished one left unspent.
    expect(spend.reserve([], 2)?.scope.tokens).toBe(325);
  });

  it("names a branch's share when it runs out, and reserves nothing without budgets", () => {
    const spend = createTaskSpend({ max_tokens: 100 });
    const held = spend.reserve([], 2);
    if (!held) throw new Error("no reservation");
    const out = spend.charge(
      "0.steps.0",
      used(40, 20, { status: "FAILED", error: { type: "RESOURCE_EXHAUSTION", resource: "budget", budget: "tokens", message: "spent" } }),
      [held.scope],
    );
    expect(out.error?.message).toBe("a map branch's share of the token budget of 50 reached (60 used)");
    expect(createTaskSpend(undefined).reserve([], 3)).toBeUndefined();
  });
});
