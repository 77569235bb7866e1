import { describe, expect, it } from "vitest";
import { sessionBudget } from "../../../machines/handler/budget.js";
import { buildSystemPrompt, contextLimit, sessionInput, type SessionDefaults } from "../../../machines/handler/session-input.js";
import { ExecuteRequest, type SessionState } from "../../../protocol/index.js";

const request = (fields: Record<string, unknown> = {}): ExecuteRequest =>
  ExecuteRequest.parse({ type: "handler.execute", taskId: "t1", nodePath: "0", prompt: "do it", ...fields });
const defaults: SessionDefaults = { defaultModel: "m", maxTurns: 10, baseSystemPrompt: "base" };
const suspended: SessionState = {
  messages: [
    { role: "user", content: "do it" },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "subtask", arguments: "{}" } }] },
  ],
  toolCallId: "c1",
  turns: 1,
  usage: { promptTokens: 100, completionTokens: 50 },
  context: { used: 100, limit: 1000, peak: 100 },
  reportedTokens: 100,
  warned: false,
  malformedToolCalls: 0,
  model: "m-2025",
};

describe("a Handler session's input", () => {
  it.each([
    { known: 10_000, defaults: {}, limit: 8_000 },
    { known: undefined, defaults: {}, limit: 102_400 },
    { known: undefined, defaults: { contextWindowTokens: 1000 }, limit: 800 },
    { known: 10_000, defaults: { contextWindowTokens: 1000 }, limit: 8_000 },
    { known: 10_001, defaults: { maxContextWindowFraction: 0.5 }, limit: 5_000 },
  ])("the context limit of a window of $known with $defaults is $limit", ({ known, defaults, limit }) => {
    expect(contextLimit(known, defaults)).toBe(limit);
  });

  it.each([
    { template: undefined, want: "base" },
    { template: "", want: "base" },
    { template: "be brief", want: "base\n\n===\n\nbe brief" },
  ])("joins the template's system prompt $template after the base", ({ template, want }) => {
    expect(buildSystemPrompt("base", template)).toBe(want);
  });

  it("takes the Handler's defaults for what the request leaves out", () => {
    expect(sessionInput(request(), {}, defaults, { contextWindow: undefined, attached: "" })).toEqual({
      system: "base",
      prompt: "do it",
      model: "m",
      maxTurns: 10,
      contextLimit: 102_400,
      warningThreshold: 0.8,
      maxMalformedToolCalls: 3,
    });
  });

  it("takes the request's model, system prompt, attached context and settings over the defaults", () => {
    const input = sessionInput(
      request({ model: "big", system: "sys" }),
      { maxTurns: 2, maxOutputTokens: 50 },
      { ...defaults, maxOutputTokens: 100, warningThreshold: 0.5, maxMalformedToolCalls: 1 },
      { contextWindow: 1000, attached: "\n<file>x</file>" },
    );
    expect(input).toEqual({
      system: "base\n\n===\n\nsys\n<file>x</file>",
      prompt: "do it",
      model: "big",
      maxTurns: 2,
      contextLimit: 800,
      warningThreshold: 0.5,
      maxMalformedToolCalls: 1,
      maxOutputTokens: 50,
    });
  });

  it("goes on from a recorded checkpoint before a resume's suspended session", () => {
    const { toolCallId: _id, ...checkpoint } = suspended;
    const resume = request({ resume: { session: suspended, answer: "42" } });
    expect(sessionInput(resume, {}, defaults, { contextWindow: 1000, attached: "", recorded: checkpoint }).restore).toEqual(checkpoint);
    expect(sessionInput(resume, {}, defaults, { contextWindow: 1000, attached: "" }).restore).toEqual({ ...suspended, answer: "42" });
    expect(sessionInput(request(), {}, defaults, { contextWindow: 1000, attached: "" })).not.toHaveProperty("restore");
  });

  it("prices a resumed session's budget at the model that answered it, else the requested one", () => {
    const prices = { "m-2025": { input: 1, output: 2 }, m: { input: 10, output: 20 } };
    const resume = request({ budget: { cost: 1 }, resume: { session: suspended, answer: "42" } });
    expect(sessionInput(resume, {}, { ...defaults, prices }, { contextWindow: 1000, attached: "" }).budget).toEqual({
      cost: 1 + (100 * 1 + 50 * 2) / 1_000_000,
      price: { input: 1, output: 2 },
    });
    expect(
      sessionInput(request({ budget: { cost: 1 } }), {}, { ...defaults, prices }, { contextWindow: 1000, attached: "" }).budget,
    ).toEqual({
      cost: 1,
      price: { input: 10, output: 20 },
    });
  });

  it.each([
    { budget: undefined, price: undefined, want: {} },
    { budget: {}, price: undefined, want: {} },
    { budget: { tokens: 500 }, price: undefined, want: { budget: { tokens: 500 } } },
    { budget: { cost: 2 }, price: undefined, want: { budget: {} } },
    {
      budget: { tokens: 500, cost: 2 },
      price: { input: 1, output: 1 },
      want: { budget: { tokens: 500, cost: 2, price: { input: 1, output: 1 } } },
    },
  ])("sessionBudget of $budget at $price", ({ budget, price, want }) => {
    expect(sessionBudget(request(budget ? { budget } : {}), price)).toEqual(want);
  });

  it("adds a resumed session's earlier usage back to its budget", () => {
    const resume = request({ budget: { tokens: 500 }, resume: { session: suspended, answer: "42" } });
    expect(sessionBudget(resume, undefined)).toEqual({ budget: { tokens: 650 } });
  });
});
