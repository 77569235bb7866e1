/**
 * Tool calls and their records (actors/handler/tool-calls.ts): a finished call is answered from its record, a call
 * left in flight runs again only when its tool is idempotent, any other gets an error saying its outcome is unknown.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { runToolCalls, type ToolRunEnv } from "../../../actors/handler/tool-calls.js";
import { toolKey } from "../../../actors/handler/records.js";
import { silentLogger } from "../../../actors/deps.js";
import { encodeJson, RECORD_VERSION } from "../../../protocol/index.js";
import { MemoryTaskStore } from "../../../runtime/in-process/store.js";
import { composeTools } from "../../../runtime/tools/source.js";
import { defineTool, typeScriptSource } from "../../../runtime/tools/typescript.js";
import type { Toolset } from "../../../actors/handler/toolset.js";
import type { ToolCall } from "../../../machines/handler/session.js";

const signal = new AbortController().signal;
const call = (id: string, name: string): ToolCall => ({ id, type: "function", function: { name, arguments: "{}" } });

function setup() {
  const ran: string[] = [];
  const tool = (name: string, idempotent: boolean) =>
    defineTool({ name, description: name, parameters: z.object({}), idempotent, run: () => (ran.push(name), `${name} ran`) });
  const composed = composeTools([typeScriptSource([tool("lookup", true), tool("send_mail", false)])]);
  const toolset: Toolset = { ...composed, script: async () => ({ error: "none" }), sandbox: { mode: "bwrap", unavailable: "none" } };
  const store = new MemoryTaskStore();
  const events: Array<Record<string, unknown>> = [];
  const env = (restoredTurn?: number): ToolRunEnv => ({
    toolset,
    kinds: [],
    log: silentLogger,
    progress: (_e, _m, data) => events.push(data),
    records: { store, key: "task.tsession", ...(restoredTurn === undefined ? {} : { restoredTurn }) },
  });
  return { ran, store, events, env };
}

describe("tool call records", () => {
  it("records every call; a re-run of the turn replays them without calling the tools again", async () => {
    const { ran, events, env } = setup();
    const calls = [call("c1", "lookup"), call("c2", "send_mail")];
    const first = await runToolCalls({ calls, turn: 1 }, signal, env());
    expect(ran).toEqual(["lookup", "send_mail"]);
    const again = await runToolCalls({ calls, turn: 1 }, signal, env(1));
    expect(again.messages).toEqual(first.messages);
    expect(ran).toEqual(["lookup", "send_mail"]);
    expect(events.map((e) => [e["tool"], e["source"], e["replayed"] ?? false])).toEqual([
      ["lookup", "ts", false],
      ["send_mail", "ts", false],
      ["lookup", "ts", true],
      ["send_mail", "ts", true],
    ]);
  });

  it("a call left in flight (only its started marker) runs again when idempotent; otherwise its outcome is unknown", async () => {
    const { ran, store, events, env } = setup();
    // What a Handler that crashed while both ran leaves: send_mail's marker (lookup, idempotent, writes none).
    await store.put(
      toolKey("task.tsession", 1, 1, "c2"),
      encodeJson({ v: RECORD_VERSION, status: "started", tool: "send_mail", content: "", malformed: false }),
    );
    const resumed = await runToolCalls({ calls: [call("c1", "lookup"), call("c2", "send_mail")], turn: 1 }, signal, env(1));
    expect(ran).toEqual(["lookup"]);
    expect(resumed.messages[1]?.content).toMatch(
      /^error: the outcome of this call of 'send_mail' is unknown: .* not declared idempotent, so it was not run again/,
    );
    expect(events[1]).toMatchObject({ tool: "send_mail", source: "ts", unknownOutcome: true, durationMs: 0 });
  });
});
