import { describe, expect, it } from "vitest";
import { assign, createActor, fromPromise, waitFor } from "xstate";
import { budgetExceeded } from "../../../machines/handler/budget.js";
import {
  handlerSessionMachine,
  measured,
  type HandlerSessionInput,
  type ModelReply,
  type ToolCall,
} from "../../../machines/handler/session.js";

const base = {
  system: "sys",
  prompt: "do it",
  model: "m",
  maxTurns: 5,
  contextLimit: 10_000,
  warningThreshold: 0.8,
  maxMalformedToolCalls: 3,
};
const call = (id: string): ToolCall => ({ id, type: "function", function: { name: "read_file", arguments: "{}" } });
const reply = (content: string, toolCalls: ToolCall[] = []): ModelReply => ({
  content,
  toolCalls,
  usage: { promptTokens: 40, completionTokens: 10 },
  model: "m",
  finishReason: toolCalls.length ? "tool_calls" : "stop",
});

/** A session whose every request measures 20 tokens and whose every answer uses 50. */
function run(replies: ModelReply[], input: Partial<HandlerSessionInput>) {
  let calls = 0;
  const machine = handlerSessionMachine.provide({
    actors: {
      callModel: fromPromise(async () => {
        calls++;
        const next = replies.shift();
        if (!next) throw new Error("script exhausted");
        return next;
      }),
      runTools: fromPromise(async ({ input: i }) => ({
        messages: i.calls.map((c) => ({ role: "tool" as const, tool_call_id: c.id, content: "ok" })),
        malformed: 0,
      })),
    },
    actions: { measure: assign(({ context }) => measured(context, () => ({ tokens: 20, exact: true }))) },
  });
  const actor = createActor(machine, { input: { ...base, ...input } }).start();
  return { actor, calls: () => calls };
}

describe("task budget in the handler session", () => {
  it("refuses the model call that would exceed the token budget, keeping the partial content", async () => {
    // 1st call: 0 + 20 ≤ 100; 2nd: 50 + 20 ≤ 100; 3rd: 100 + 20 > 100.
    const { actor, calls } = run([reply("one", [call("a")]), reply("two", [call("b")]), reply("never")], { budget: { tokens: 100 } });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("exhausted");
    expect(calls()).toBe(2);
    expect(snap.output).toMatchObject({
      status: "FAILED",
      content: "two",
      error: { type: "RESOURCE_EXHAUSTION", resource: "budget", budget: "tokens", metrics: { used: 100, limit: 100 }, content: "two" },
    });
  });

  it("makes no call at all when nothing is left", async () => {
    const { actor, calls } = run([reply("never")], { budget: { tokens: 0 } });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(calls()).toBe(0);
    expect(snap.output?.error).toMatchObject({ resource: "budget", metrics: { used: 0, limit: 0 } });
  });

  it("checks a cost budget with the model's price, and ignores it without one", async () => {
    const price = { input: 1000, output: 2000 }; // per 1M tokens: one answer costs (40×1000 + 10×2000)/1e6 = 0.06
    const priced = run([reply("one", [call("a")]), reply("never")], { budget: { cost: 0.07, price } });
    const snap = await waitFor(priced.actor, (s) => s.status === "done");
    expect(priced.calls()).toBe(1);
    expect(snap.output?.error).toMatchObject({ resource: "budget", budget: "cost", metrics: { used: 0.06, limit: 0.07 } });
    const unpriced = run([reply("one", [call("a")]), reply("done")], { budget: { cost: 0.0001 } });
    expect((await waitFor(unpriced.actor, (s) => s.status === "done")).output?.status).toBe("COMPLETE");
  });

  it("counts a resumed session's earlier usage against its budget", () => {
    expect(budgetExceeded({ tokens: 120 }, { promptTokens: 80, completionTokens: 20 }, 20)).toBeUndefined();
    expect(budgetExceeded({ tokens: 120 }, { promptTokens: 80, completionTokens: 20 }, 21)).toMatchObject({
      resource: "budget",
      metrics: { used: 100, limit: 120 },
    });
    expect(budgetExceeded(undefined, { promptTokens: 1e9, completionTokens: 0 }, 1)).toBeUndefined();
  });
});
