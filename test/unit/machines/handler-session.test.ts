import { describe, expect, it } from "vitest";
import { assign, createActor, fromPromise, waitFor } from "xstate";
import {
  handlerSessionMachine,
  measured,
  type CallModelInput,
  type HandlerSessionInput,
  type ModelReply,
  type TokenCount,
  type ToolCall,
} from "../../../machines/handler/session.js";

const base = {
  system: "sys",
  prompt: "do it",
  model: "m",
  maxTurns: 3,
  contextLimit: 1000,
  warningThreshold: 0.8,
  maxMalformedToolCalls: 3,
};
const usage = { promptTokens: 10, completionTokens: 5 };
const reply = (content: string, toolCalls: ToolCall[] = []): ModelReply => ({
  content,
  toolCalls,
  usage,
  model: "m-actual",
  finishReason: toolCalls.length ? "tool_calls" : "stop",
});
const call = (id: string): ToolCall => ({ id, type: "function", function: { name: "read_file", arguments: "{}" } });

interface Options {
  maxTurns?: number;
  /** Token counts returned by countTokens, one per call; 10 (exact) when exhausted. */
  counts?: TokenCount[];
  /** Malformed counts returned by runTools, one per call; 0 when exhausted. */
  malformed?: number[];
  input?: Partial<HandlerSessionInput>;
}

function session(replies: Array<ModelReply | Error>, options: Options | number = {}) {
  const opts: Options = typeof options === "number" ? { maxTurns: options } : options;
  const seen: CallModelInput[] = [];
  const turns: number[] = [];
  const warnings: Array<{ used: number; limit: number }> = [];
  /** The effects in the order they ran: `model`, `record <turns> <role of the last message>`, `tools <turn>`. */
  const steps: string[] = [];
  /** The session's microsteps, each as the state it entered, `(always)` after an eventless one. */
  const microsteps: string[] = [];
  const machine = handlerSessionMachine.provide({
    actors: {
      callModel: fromPromise(async ({ input }) => {
        steps.push("model");
        seen.push(structuredClone(input));
        const next = replies.shift();
        if (!next) throw new Error("script exhausted");
        if (next instanceof Error) throw next;
        return next;
      }),
      runTools: fromPromise(async ({ input }) => {
        steps.push(`tools ${input.turn}`);
        return {
          messages: input.calls.map((c) => ({ role: "tool" as const, tool_call_id: c.id, content: "file body" })),
          malformed: opts.malformed?.shift() ?? 0,
        };
      }),
      recordTurn: fromPromise(async ({ input }) => {
        steps.push(`record ${input.turns} ${input.messages.at(-1)?.role ?? "none"}`);
      }),
    },
    actions: {
      turnCompleted: (_, p) => turns.push(p.turn),
      contextWarning: (_, p) => warnings.push({ used: p.used, limit: p.limit }),
      measure: assign(({ context }) => measured(context, () => opts.counts?.shift() ?? { tokens: 10, exact: true })),
    },
  });
  const actor = createActor(machine, {
    input: { ...base, maxTurns: opts.maxTurns ?? base.maxTurns, ...opts.input },
    inspect: (event) => {
      // Only the session machine takes microsteps; its promise actors do not.
      if (event.type !== "@xstate.microstep" || !("value" in event.snapshot)) return;
      const eventless = event._transitions.some((t) => t.eventType === "");
      microsteps.push(`${String(event.snapshot.value)}${eventless ? " (always)" : ""}`);
    },
  });
  actor.start();
  return { actor, seen, turns, warnings, steps, microsteps };
}

describe("handler session machine", () => {
  it("finishes after one answer without tools", async () => {
    const { actor, seen, turns } = session([reply("done")]);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("done");
    expect(snap.output).toMatchObject({ status: "COMPLETE", content: "done", notes: { turns: 1, usage, model: "m-actual" } });
    expect(seen[0]?.messages).toEqual([
      { role: "system", content: "sys" },
      { role: "user", content: "do it" },
    ]);
    expect(turns).toEqual([1]);
  });

  it("runs tools and sends their results back in the next call", async () => {
    const { actor, seen } = session([reply("", [call("c1")]), reply("final")]);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.content).toBe("final");
    expect(snap.output?.notes["usage"]).toEqual({ promptTokens: 20, completionTokens: 10 });
    const second = seen[1]?.messages ?? [];
    expect(second.at(-2)).toMatchObject({ role: "assistant", tool_calls: [{ id: "c1" }] });
    expect(second.at(-1)).toEqual({ role: "tool", tool_call_id: "c1", content: "file body" });
  });

  it("records the model's answer before its tools run, and the turn again once they ran", async () => {
    const { actor, steps } = session([reply("", [call("c1")]), reply("final")]);
    await waitFor(actor, (s) => s.status === "done");
    // A final answer is not recorded here: the shell records the session's reply.
    expect(steps).toEqual(["model", "record 1 assistant", "tools 1", "record 1 tool", "model"]);
  });

  it("takes three eventless steps a turn: two checks before the model call, one decision after it", async () => {
    const { actor, microsteps } = session([reply("", [call("c1")]), reply("final")]);
    await waitFor(actor, (s) => s.status === "done");
    expect(microsteps).toEqual([
      "checkingContext (always)",
      "awaitingModel (always)",
      "deciding",
      "recordingAnswer (always)",
      "runningTool",
      "recording",
      "checkingLimits",
      "checkingContext (always)",
      "awaitingModel (always)",
      "deciding",
      "done (always)",
    ]);
  });

  it("restored from a record taken after the answer, runs its tool calls without asking the model for that turn", async () => {
    const restore = {
      messages: [
        { role: "system" as const, content: "sys" },
        { role: "user" as const, content: "do it" },
        { role: "assistant" as const, content: "looking", tool_calls: [call("c1"), call("c2")] },
      ],
      turns: 1,
      usage,
      context: { used: 10, limit: 1000, peak: 10 },
      reportedTokens: 15,
      warned: false,
      malformedToolCalls: 0,
      model: "m-actual",
    };
    const { actor, seen, steps } = session([reply("final")], { input: { restore } });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(steps).toEqual(["tools 1", "record 1 tool", "model"]);
    expect(seen[0]?.messages.slice(-2)).toEqual([
      { role: "tool", tool_call_id: "c1", content: "file body" },
      { role: "tool", tool_call_id: "c2", content: "file body" },
    ]);
    expect(snap.output).toMatchObject({
      status: "COMPLETE",
      content: "final",
      notes: { turns: 2, usage: { promptTokens: 20, completionTokens: 10 } },
    });
    // Restored after its tools ran, a session asks the model first.
    const after = session([reply("final")], {
      input: { restore: { ...restore, messages: [...restore.messages, ...seen[0]!.messages.slice(-2)] } },
    });
    await waitFor(after.actor, (s) => s.status === "done");
    expect(after.steps).toEqual(["model"]);
  });

  it("ends in exhausted with RESOURCE_EXHAUSTION when the turn limit is reached", async () => {
    const { actor, seen } = session([reply("a", [call("1")]), reply("b", [call("2")]), reply("c", [call("3")]), reply("never")], 2);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("exhausted");
    expect(seen).toHaveLength(2);
    expect(snap.output).toMatchObject({
      status: "FAILED",
      content: "b",
      error: { type: "RESOURCE_EXHAUSTION", resource: "turns", metrics: { used: 2, limit: 2 }, content: "b" },
    });
  });

  it("fails with model_error when the model call fails", async () => {
    const { actor } = session([new Error("429 rate limited")]);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toMatchObject({ type: "TASK_FAILURE", reason: "model_error", message: "429 rate limited" });
  });

  it("cancel aborts the model call in flight", async () => {
    let signal: AbortSignal | undefined;
    const machine = handlerSessionMachine.provide({
      actors: {
        callModel: fromPromise(({ signal: s }) => {
          signal = s;
          return new Promise<ModelReply>(() => undefined);
        }),
      },
      actions: { measure: assign(({ context }) => measured(context, () => ({ tokens: 1, exact: true }))) },
    });
    const actor = createActor(machine, { input: base }).start();
    await waitFor(actor, (s) => s.matches("awaitingModel"));
    actor.send({ type: "session.cancel" });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toMatchObject({ reason: "execution_halted", message: "cancelled" });
    expect(signal?.aborted).toBe(true);
  });

  it("fails without calling the model when the tokens cannot be counted, and counts each request once", async () => {
    let counted = 0;
    let called = 0;
    const machine = handlerSessionMachine.provide({
      actors: { callModel: fromPromise(async () => (called++, reply("never"))) },
      actions: {
        measure: assign(({ context }) =>
          measured(context, () => {
            counted++;
            throw new Error("tokenizer broke");
          }),
        ),
      },
    });
    const snap = await waitFor(createActor(machine, { input: base }).start(), (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "unexpected_error",
      message: "cannot count tokens: tokenizer broke",
    });
    expect({ counted, called }).toEqual({ counted: 1, called: 0 });
  });

  it("fails clearly when no token counter is provided", async () => {
    const machine = handlerSessionMachine.provide({ actors: { callModel: fromPromise(async () => reply("never")) } });
    const snap = await waitFor(createActor(machine, { input: base }).start(), (s) => s.status === "done");
    expect(snap.output?.error?.message).toBe("cannot count tokens: not provided: handler.measure");
  });

  it("ends in exhausted with RESOURCE_EXHAUSTION context before a call over the limit, with the partial content", async () => {
    const { actor, seen, warnings } = session([reply("partial", [call("1")]), reply("never")], {
      counts: [
        { tokens: 500, exact: true },
        { tokens: 1200, exact: true },
      ],
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("exhausted");
    expect(seen).toHaveLength(1);
    expect(warnings).toEqual([]);
    expect(snap.output).toMatchObject({
      status: "FAILED",
      content: "partial",
      error: { type: "RESOURCE_EXHAUSTION", resource: "context", metrics: { used: 1200, limit: 1000 }, content: "partial" },
      notes: { context: { used: 1200, limit: 1000, peak: 1200 } },
    });
  });

  it("warns once when the context passes the warning threshold", async () => {
    const { actor, warnings } = session([reply("a", [call("1")]), reply("b", [call("2")]), reply("done")], {
      counts: [
        { tokens: 100, exact: true },
        { tokens: 850, exact: true },
        { tokens: 900, exact: true },
      ],
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.status).toBe("COMPLETE");
    expect(warnings).toEqual([{ used: 850, limit: 1000 }]);
  });

  it("for a model the tokenizer does not know, takes the server's reported usage as a floor", async () => {
    const big = { ...reply("a", [call("1")]), usage: { promptTokens: 990, completionTokens: 20 } };
    const { actor, seen } = session([big, reply("never")], {
      counts: [
        { tokens: 50, exact: false },
        { tokens: 60, exact: false },
      ],
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(seen).toHaveLength(1);
    expect(snap.output?.error).toMatchObject({ type: "RESOURCE_EXHAUSTION", resource: "context", metrics: { used: 1010, limit: 1000 } });
  });

  it("ends with RESOURCE_EXHAUSTION output when the model stops at its length limit", async () => {
    const cut = { ...reply("cut off mid-sen"), finishReason: "length", usage: { promptTokens: 30, completionTokens: 64 } };
    const { actor } = session([reply("", [call("1")]), cut]);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("exhausted");
    // The last call's completion tokens, not the session's (5 + 64).
    expect(snap.output?.error).toMatchObject({
      type: "RESOURCE_EXHAUSTION",
      resource: "output",
      metrics: { used: 64, limit: 64 },
      content: "cut off mid-sen",
    });
    // With an output limit of the Handler's own, that is the limit reported.
    const limited = session([cut], { input: { maxOutputTokens: 80 } });
    const limitedSnap = await waitFor(limited.actor, (s) => s.status === "done");
    expect(limitedSnap.output?.error).toMatchObject({ resource: "output", metrics: { used: 64, limit: 80 } });
  });

  it("fails with model_error, never COMPLETE, when the server's content filter blocked the output", async () => {
    const blocked = { ...reply("partial"), finishReason: "content_filter" };
    const { actor, steps } = session([reply("", [call("1")]), blocked]);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output).toMatchObject({
      status: "FAILED",
      content: "partial",
      error: {
        type: "TASK_FAILURE",
        reason: "model_error",
        message: "the model's output was blocked by the server's content filter (finish_reason 'content_filter')",
        content: "partial",
      },
    });
    // Usage of the blocked call still counts.
    expect(snap.output?.notes["usage"]).toEqual({ promptTokens: 20, completionTokens: 10 });
    expect(steps).toEqual(["model", "record 1 assistant", "tools 1", "record 1 tool", "model"]);
  });

  it("fails with model_error naming the refusal when the model refused, even with tool calls", async () => {
    const refusal = { ...reply(""), refusal: "I can't help with that." };
    const { actor } = session([refusal]);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toEqual({
      type: "TASK_FAILURE",
      reason: "model_error",
      message: "the model refused: I can't help with that.",
      content: "",
    });
    const withTools = session([{ ...reply("", [call("1")]), refusal: "No." }]);
    const toolsSnap = await waitFor(withTools.actor, (s) => s.status === "done");
    expect(toolsSnap.output?.error).toMatchObject({ message: "the model refused: No." });
    expect(withTools.steps).toEqual(["model"]);
    // An empty refusal field is no refusal.
    const empty = session([{ ...reply("fine"), refusal: "" }]);
    expect((await waitFor(empty.actor, (s) => s.status === "done")).output?.status).toBe("COMPLETE");
  });

  it("answers malformed tool calls up to the limit, then fails with model_error", async () => {
    const replies = [reply("", [call("1")]), reply("", [call("2")]), reply("", [call("3")]), reply("ok")];
    const tolerated = session([...replies], { malformed: [1, 1, 1], maxTurns: 5 });
    expect((await waitFor(tolerated.actor, (s) => s.status === "done")).output?.status).toBe("COMPLETE");
    const failing = session([reply("", [call("1")]), reply("", [call("2")]), reply("never")], {
      malformed: [2, 2],
      input: { maxMalformedToolCalls: 3 },
    });
    const snap = await waitFor(failing.actor, (s) => s.status === "done");
    expect(failing.seen).toHaveLength(2);
    expect(snap.output?.error).toMatchObject({ type: "TASK_FAILURE", reason: "model_error", details: { malformedToolCalls: 4 } });
  });
});
