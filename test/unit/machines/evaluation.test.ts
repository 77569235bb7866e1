import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { evaluationMachine, type EvalNode } from "../../../machines/evaluation.js";
import type { TaskResult } from "../../../protocol/index.js";

function run(node: EvalNode, runAtomic: () => Promise<TaskResult>) {
  const progress: string[] = [];
  const machine = evaluationMachine.provide({
    actors: { runAtomic: fromPromise(runAtomic) },
    actions: { progress: (_, p) => progress.push(p.event) },
  });
  return { actor: createActor(machine, { input: { taskId: "t", node, inputs: {} } }).start(), progress };
}

describe("evaluation machine", () => {
  it("runs an atomic task (type absent means atomic) and outputs its result", async () => {
    const { actor, progress } = run({ kind: "task", type: "atomic" }, async () => ({ content: "x", status: "COMPLETE", notes: {} }));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toEqual({ content: "x", status: "COMPLETE", notes: {} });
    expect(progress).toEqual(["node.started"]);
  });

  it.each(["sequential", "reduce", "script", "director_evaluator_loop"])("answers %s with a located not_supported failure", async (type) => {
    const { actor } = run({ kind: "task", type, loc: { line: 3, col: 5 } }, async () => {
      throw new Error("must not run");
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("unsupported");
    expect(snap.output?.error).toMatchObject({ reason: "not_supported" });
    expect(snap.output?.error?.message).toContain(`type="${type}"`);
    expect(snap.output?.error?.message).toContain("line 3, column 5");
  });

  it("answers a top-level <call> as not supported yet", async () => {
    const { actor } = run({ kind: "call" }, async () => ({ content: "", status: "COMPLETE", notes: {} }));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error?.message).toContain("<call>");
  });

  it("turns a thrown error into unexpected_error", async () => {
    const { actor } = run({ kind: "task" }, async () => {
      throw new Error("handler gone");
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({ reason: "unexpected_error", message: "handler gone" });
  });
});
