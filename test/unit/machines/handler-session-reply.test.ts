import { describe, expect, it } from "vitest";
import { sessionReply } from "../../../machines/handler/session-reply.js";
import type { SessionOutput } from "../../../machines/handler/session.js";
import { parseTaskId, type SessionState, type TaskId } from "../../../protocol/index.js";

const request = { taskId: parseTaskId("t1") as TaskId, nodePath: "0" };
const usage = { promptTokens: 1000, completionTokens: 500 };
const suspended: SessionState = {
  messages: [
    { role: "user", content: "do it" },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "subtask", arguments: "{}" } }] },
  ],
  toolCallId: "c1",
  turns: 1,
  usage,
  context: { used: 100, limit: 1000, peak: 100 },
  reportedTokens: 100,
  warned: false,
  malformedToolCalls: 0,
  model: "m",
};
const ran = { settings: {}, attachedNotes: {}, prices: undefined, model: "m" };

describe("a session's reply", () => {
  it("carries the result and no session for a session that finished", () => {
    const output: SessionOutput = { content: "done", status: "COMPLETE", notes: { usage, model: "m", turns: 1 } };
    expect(sessionReply(request, output, ran)).toEqual({ type: "handler.result", taskId: "t1", nodePath: "0", result: output });
  });

  it("prices the result and puts the attached context's notes under the session's own", () => {
    const output: SessionOutput = { content: "done", status: "COMPLETE", notes: { usage, model: "m-2025", turns: 1 } };
    const reply = sessionReply(request, output, {
      ...ran,
      attachedNotes: { context_files: ["a.txt"], turns: 99 },
      prices: { m: { input: 1, output: 2 } },
    });
    expect(reply.result.notes).toEqual({ context_files: ["a.txt"], usage, model: "m-2025", turns: 1, cost: 0.002 });
  });

  it.each([
    { settings: {}, want: suspended },
    { settings: { maxTurns: 3 }, want: { ...suspended, settings: { maxTurns: 3 } } },
  ])("a suspended session under settings $settings keeps them for its resume", ({ settings, want }) => {
    const output: SessionOutput = { content: "", status: "CONTINUATION", notes: {}, session: suspended };
    const reply = sessionReply(request, output, { ...ran, settings });
    expect(reply.session).toEqual(want);
    expect(reply.result).not.toHaveProperty("session");
  });
});
