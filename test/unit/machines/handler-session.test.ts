import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { handlerSessionMachine, type CallModelInput, type ModelReply, type ToolCall } from "../../../machines/handler-session.js";

const base = { system: "sys", prompt: "do it", model: "m", maxTurns: 3 };
const usage = { promptTokens: 10, completionTokens: 5 };
const reply = (content: string, toolCalls: ToolCall[] = []): ModelReply => ({ content, toolCalls, usage, model: "m-actual", finishReason: toolCalls.length ? "tool_calls" : "stop" });
const call = (id: string): ToolCall => ({ id, type: "function", function: { name: "read_file", arguments: "{}" } });

function session(replies: Array<ModelReply | Error>, maxTurns = 3) {
  const seen: CallModelInput[] = [];
  const turns: number[] = [];
  const machine = handlerSessionMachine.provide({
    actors: {
      callModel: fromPromise(async ({ input }) => {
        seen.push(structuredClone(input));
        const next = replies.shift();
        if (!next) throw new Error("script exhausted");
        if (next instanceof Error) throw next;
        return next;
      }),
      runTools: fromPromise(async ({ input }) => input.calls.map((c) => ({ role: "tool" as const, tool_call_id: c.id, content: "file body" }))),
    },
    actions: { turnCompleted: (_, p) => turns.push(p.turn) },
  });
  const actor = createActor(machine, { input: { ...base, maxTurns } }).start();
  return { actor, seen, turns };
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
    });
    const actor = createActor(machine, { input: base }).start();
    actor.send({ type: "session.cancel" });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toMatchObject({ reason: "execution_halted", message: "cancelled" });
    expect(signal?.aborted).toBe(true);
  });
});
