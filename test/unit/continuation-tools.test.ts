/** The continuation tools of a Handler session: the spawn kind offers three tools, each read into the note it travels under. */
import { describe, expect, it } from "vitest";
import { CONTINUATION_TOOL_NAMES, continuationTools, readContinuation } from "../../actors/handler/continuation.js";

const call = (name: string, args: unknown) => ({
  id: "c1",
  type: "function" as const,
  function: { name, arguments: JSON.stringify(args) },
});

describe("continuation tools", () => {
  it("offers spawn_subtask, await_subtasks and cancel_subtask for the kind spawn, and reserves their names", () => {
    expect(continuationTools(["subtask", "spawn"]).map((t) => t.function.name)).toEqual([
      "run_subtask",
      "spawn_subtask",
      "await_subtasks",
      "cancel_subtask",
    ]);
    expect(CONTINUATION_TOOL_NAMES).toEqual(expect.arrayContaining(["spawn_subtask", "await_subtasks", "cancel_subtask"]));
  });

  it("reads each spawn tool's call into its note, and only when the kind is offered", () => {
    const spawn = call("spawn_subtask", { type: "atomic", description: "d" });
    expect(readContinuation(spawn, ["spawn"])).toEqual({
      continuation: { toolCallId: "c1", kind: "spawn", note: "spawn_request", request: { type: "atomic", description: "d" } },
    });
    expect(readContinuation(call("await_subtasks", { handles: ["s1"], timeout_ms: 5 }), ["spawn"])).toMatchObject({
      continuation: { note: "await_request", request: { handles: ["s1"], timeout_ms: 5 } },
    });
    expect(readContinuation(call("cancel_subtask", { handle: "s2" }), ["spawn"])).toMatchObject({
      continuation: { note: "cancel_request", request: { handle: "s2" } },
    });
    expect(readContinuation(spawn, ["subtask", "input"])).toBeUndefined();
  });

  it("answers a malformed handle or timeout as a problem the model can act on", () => {
    expect(readContinuation(call("cancel_subtask", { handle: "first" }), ["spawn"])).toEqual({
      problem: "error: invalid arguments for 'cancel_subtask': handle: a handle is s1, s2, …",
    });
    expect(readContinuation(call("await_subtasks", { timeout_ms: -1 }), ["spawn"])).toMatchObject({
      problem: expect.stringContaining("timeout_ms"),
    });
  });
});
