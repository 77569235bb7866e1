import { describe, expect, it } from "vitest";
import { readsRecord, replayable, replayOf } from "../../../machines/handler/replay.js";
import type { SessionCheckpoint, TaskResult, TurnRecord } from "../../../protocol/index.js";

const checkpoint = (messages: SessionCheckpoint["messages"], turns: number): SessionCheckpoint => ({
  messages,
  turns,
  usage: { promptTokens: 10, completionTokens: 5 },
  context: { used: 20, limit: 1000, peak: 20 },
  reportedTokens: 10,
  warned: false,
  malformedToolCalls: 0,
  model: "m",
});
const toolCall = { id: "c1", type: "function" as const, function: { name: "read_file", arguments: "{}" } };

describe("Handler replay policy", () => {
  it.each([
    { fresh: undefined, before: false, reads: true },
    { fresh: false, before: false, reads: true },
    { fresh: true, before: false, reads: false },
    { fresh: true, before: true, reads: true },
  ])("a call with fresh $fresh and a run before it $before reads its record: $reads", ({ fresh, before, reads }) => {
    expect(readsRecord(fresh === undefined ? {} : { fresh }, before)).toBe(reads);
  });

  it("runs the session without a record", () => {
    expect(replayOf(undefined)).toEqual({ kind: "run" });
  });

  it("replays a finished session's result and session, with no model call", () => {
    const result: TaskResult = { content: "done", status: "COMPLETE", notes: { turns: 2 } };
    expect(replayOf({ v: 1, status: "done", result })).toEqual({
      kind: "replay",
      result,
      message: "replayed the recorded session: no model call",
      turns: 2,
    });
    const session = { ...checkpoint([], 1), toolCallId: "c1" };
    expect(replayOf({ v: 1, status: "done", result, session })).toMatchObject({ kind: "replay", session });
  });

  it.each([
    {
      name: "after a turn whose tools ran",
      messages: [
        { role: "assistant" as const, content: null, tool_calls: [toolCall] },
        { role: "tool" as const, tool_call_id: "c1", content: "x" },
      ],
      message: "continuing the recorded session after turn 3",
    },
    {
      name: "with the tool calls of a recorded answer",
      messages: [{ role: "assistant" as const, content: null, tool_calls: [toolCall] }],
      message: "continuing the recorded session with the tool calls of turn 3",
    },
    { name: "with no message", messages: [], message: "continuing the recorded session after turn 3" },
  ])("continues a running session $name", ({ messages, message }) => {
    const record: TurnRecord = { v: 1, status: "running", session: checkpoint(messages, 3) };
    expect(replayOf(record)).toEqual({ kind: "continue", record, message, turns: 3 });
  });

  it.each([
    { result: { content: "", status: "COMPLETE" as const, notes: {} }, recorded: true },
    {
      result: {
        content: "",
        status: "FAILED" as const,
        notes: {},
        error: { type: "TASK_FAILURE" as const, reason: "model_error" as const, message: "x", content: "" },
      },
      recorded: true,
    },
    {
      result: {
        content: "",
        status: "FAILED" as const,
        notes: {},
        error: { type: "TASK_FAILURE" as const, reason: "execution_halted" as const, message: "cancelled", content: "" },
      },
      recorded: false,
    },
  ])("records a $result.status result ($result.error.reason) as its answer: $recorded", ({ result, recorded }) => {
    expect(replayable(result)).toBe(recorded);
  });
});
