/**
 * Node records without a server: a node's usage and cost are its own model calls' when its session suspended for a
 * CONTINUATION and resumed (the resumed call answers the session's running total); a subtask's root is named by its
 * place and, when its description is a placeholder, by what that was bound to; `dirigent show`'s tree leaves a fork's
 * replayed nodes out of its total and says whose they were.
 */
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { nodeName, nodeRecorder } from "../../actors/evaluator/node-records.js";
import { rootEnv } from "../../machines/language/env.js";
import { parseTemplate } from "../../machines/language/parse.js";
import type { NodeListReply, SessionState, TaskResult } from "../../protocol/index.js";
import { formatTree } from "../../runtime/cli/output.js";
import { tid } from "../support/ids.js";

function atomic(description: string) {
  const parsed = parseTemplate(`<task><description>${description}</description></task>`);
  if (!parsed.ok || !parsed.document.entry) throw new Error("the template does not parse");
  return parsed.document.entry;
}

const answer = (content: string, usage: [number, number], cost: number): TaskResult => ({
  content,
  status: "COMPLETE",
  notes: { usage: { promptTokens: usage[0], completionTokens: usage[1] }, cost, model: "m" },
});

describe("node records", () => {
  it("count a suspended and resumed session's use once", async () => {
    const progress: Record<string, unknown>[] = [];
    const records = nodeRecorder({
      taskId: tid("t-1"),
      log: silentLogger,
      now: () => new Date(0),
      mask: (text) => text,
      progress: (_event, _message, data) => void progress.push(data),
    });
    const session = { toolCallId: "call-1", messages: [], usage: { promptTokens: 301, completionTokens: 31 } } as unknown as SessionState;
    await records.record("0", atomic("Plan a trip"), async () => {
      records.session("0", "k1", { ...answer("", [301, 31], 0.5), status: "CONTINUATION", session });
      // The resumed call answers the session's running total: 301 + 302 prompt tokens, cost 0.5 + 0.25.
      records.session("0", "k2", answer("Plan", [603, 63], 0.75), session);
      return { result: answer("Plan", [603, 63], 0.75) };
    });
    expect(progress[0]).toMatchObject({ usage: { promptTokens: 603, completionTokens: 63 }, cost: 0.75 });
  });

  it("name a subtask's root by its place", () => {
    expect(nodeName(atomic("CHILD name three cities"), "0.steps.0/subtask2:0")).toBe("subtask 2 · child name three cities");
    expect(nodeName(atomic("{{description}}"), "0/spawn1:0")).toBe("spawned subtask 1 · atomic");
    // A description of placeholders only (a subtask's generic template) is named by what they were bound to.
    const env = rootEnv({ description: "CHILD name three cities, then stop", n: 3 });
    expect(nodeName(atomic("{{description}}"), "0/subtask1:0", env)).toBe("subtask 1 · child name three cities, then stop");
    expect(nodeName(atomic("{{n}}"), "0/subtask1:0", env)).toBe("subtask 1 · atomic");
    expect(nodeName(atomic("Summarise {{description}}"), "0.steps.1", env)).toBe("step 2 · summarise");
    expect(nodeName(atomic("Inner step"), "0/subtask1:0.steps.0")).toBe("step 1 · inner step");
  });
});

describe("dirigent show's tree", () => {
  /** A completed atomic node's summary, named by its path; `replayedFrom`: answered from that task's record. */
  const node = (path: string, tokens: number, cost?: number, replayedFrom?: string) => ({
    path,
    occurrence: 1,
    name: path,
    kind: "atomic",
    state: "completed" as const,
    startedAt: "2026-11-27T00:00:00.000Z",
    endedAt: "2026-11-27T00:00:01.000Z",
    durationMs: replayedFrom ? 0 : 1000,
    usage: { promptTokens: tokens, completionTokens: 0 },
    ...(cost === undefined ? {} : { cost }),
    ...(replayedFrom ? { replayedFrom } : {}),
  });

  it("leaves a fork's replayed nodes out of its total, and says whose they were", () => {
    const reply = {
      taskId: "t-fork",
      nodes: [node("0.steps.0", 300, 0.003, "t-original"), node("0.steps.1", 50, 0.0005)],
    } as NodeListReply;
    const text = formatTree(reply);
    expect(text.split("\n")[0]).toBe(
      "task t-fork: 2 nodes, 50 tokens $0.0005 (1 replayed, 300 tokens $0.0030 paid by the task they came from, not counted)",
    );
    expect(text).toContain("0.steps.0  0.steps.0  [atomic] completed, replayed from t-original  300 tokens $0.0030 (paid there)");
    expect(text).toContain("0.steps.1  0.steps.1  [atomic] completed in 1.0 s  50 tokens $0.0005");
  });

  it("says 1 node, not 1 nodes", () => {
    const reply = { taskId: "t-one", nodes: [node("0", 61)] } as NodeListReply;
    expect(formatTree(reply).split("\n")[0]).toBe("task t-one: 1 node, 61 tokens");
  });
});
