import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import { find, rootEnv, type Env } from "../../../machines/language/env.js";
import { sequentialMachine, type SequentialInput } from "../../../machines/evaluator/sequential.js";
import type { TaskResult } from "../../../protocol/index.js";

const ok = (content: string, notes: Record<string, unknown> = {}): TaskResult => ({ content, status: "COMPLETE", notes });

function run(input: Partial<SequentialInput>, step: (path: string, env: Env) => TaskResult) {
  const progress: string[] = [];
  const machine = sequentialMachine.provide({
    actors: { runStep: fromPromise(async ({ input: i }) => step(i.path, i.env)) },
    actions: { progress: (_, p) => progress.push(p.message) },
  });
  const full: SequentialInput = {
    path: "0",
    stepCount: 3,
    env: rootEnv({ topic: "tides" }),
    accumulate: true,
    format: "notes_only",
    maxHistoryChars: 1000,
    ...input,
  };
  const actor = createActor(machine, { input: full }).start();
  actor.send(START);
  return { actor, progress };
}

describe("sequential machine", () => {
  it("runs steps in order, reports step n/N, and gives each step the earlier outputs", async () => {
    const seen: unknown[] = [];
    const { actor, progress } = run({}, (path, env) => {
      seen.push([path, find(env, "step_results").found ? find(env, "step_results") : null, find(env, "topic")]);
      return ok(`out ${path}`, { n: path });
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(progress).toEqual(["step 1/3", "step 2/3", "step 3/3"]);
    expect(seen[0]).toEqual(["0.steps.0", { found: true, value: [] }, { found: true, value: "tides" }]);
    expect(seen[2]).toEqual([
      "0.steps.2",
      {
        found: true,
        value: [
          { content: "out 0.steps.0", status: "COMPLETE", notes: { n: "0.steps.0" } },
          { content: "out 0.steps.1", status: "COMPLETE", notes: { n: "0.steps.1" } },
        ],
      },
      { found: true, value: "tides" },
    ]);
    expect(snap.output).toEqual({ content: "out 0.steps.2", status: "COMPLETE", notes: { n: "0.steps.2", steps: 3 } });
  });

  it("binds previous_result and, when accumulating, the history in its format", async () => {
    const histories: unknown[] = [];
    const { actor } = run({ stepCount: 2, format: "full_output" }, (_, env) => {
      histories.push([find(env, "previous_result"), find(env, "history")]);
      return ok("abc", { k: 1 });
    });
    await waitFor(actor, (s) => s.status === "done");
    expect(histories[1]).toEqual([
      { found: true, value: "abc" },
      { found: true, value: [{ step: 0, output: "abc", notes: { k: 1 } }] },
    ]);
  });

  it("binds no history when accumulate_data is false", async () => {
    const histories: boolean[] = [];
    const { actor } = run({ stepCount: 2, accumulate: false }, (_, env) => (histories.push(find(env, "history").found), ok("x")));
    await waitFor(actor, (s) => s.status === "done");
    expect(histories).toEqual([false, false]);
  });

  it("stops at a failing step with failedStep, totalSteps and partial results (notes only by default)", async () => {
    const calls: string[] = [];
    const { actor } = run({}, (path) => {
      calls.push(path);
      if (path === "0.steps.1")
        return { content: "", status: "FAILED", notes: {}, error: { type: "TASK_FAILURE", reason: "model_error", message: "boom" } };
      return ok("first", { a: 1 });
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(calls).toEqual(["0.steps.0", "0.steps.1"]);
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "model_error",
      message: "step 2/3 failed: boom",
      details: { failedStep: 1, totalSteps: 3, partialResults: [{ step: 0, notes: { a: 1 } }] },
    });
  });

  it("keeps output in partial results with full_output, bounded by maxHistoryChars", async () => {
    const { actor } = run({ format: "full_output", maxHistoryChars: 4 }, (path) =>
      path.endsWith("2") ? { content: "", status: "FAILED", notes: {} } : ok("abc"),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({
      reason: "subtask_failure",
      details: {
        failedStep: 2,
        partialResults: [
          { step: 0, output: "abc", notes: {} },
          { step: 1, output: "a", notes: {}, truncated: true },
        ],
      },
    });
  });

  it("bounds serialized notes by maxHistoryChars too, in notes_only mode", async () => {
    const notes = { summary: "x".repeat(30) };
    const size = JSON.stringify(notes).length;
    const { actor } = run({ maxHistoryChars: size + 5 }, (path) =>
      path.endsWith("2") ? { content: "", status: "FAILED", notes: {} } : ok("out", notes),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    const error = snap.output?.error;
    expect(error?.type === "TASK_FAILURE" ? error.details?.["partialResults"] : undefined).toEqual([
      { step: 0, notes },
      { step: 1, notes: {}, truncated: true },
    ]);
  });

  it("binds a step's <output_slot> and the latest last_evaluator_output for the later steps (C21)", async () => {
    const seen: unknown[] = [];
    const { actor } = run({ outputSlots: { 0: "last_director_output" } }, (path, env) => {
      seen.push([find(env, "last_director_output"), find(env, "last_evaluator_output")]);
      return path.endsWith("0") ? ok("draft", { last_evaluator_output: '{"success": false}' }) : ok("next");
    });
    await waitFor(actor, (s) => s.status === "done");
    expect(seen[0]).toEqual([{ found: false }, { found: false }]);
    expect(seen[2]).toEqual([
      { found: true, value: "draft" },
      { found: true, value: '{"success": false}' },
    ]);
  });

  it("turns a thrown step into unexpected_error and completes an empty sequence", async () => {
    const thrown = run({}, () => {
      throw new Error("gone");
    });
    expect((await waitFor(thrown.actor, (s) => s.status === "done")).output?.error).toMatchObject({
      reason: "unexpected_error",
      message: "step 1/3 failed: gone",
    });
    const empty = run({ stepCount: 0 }, () => ok("never"));
    expect((await waitFor(empty.actor, (s) => s.status === "done")).output).toEqual({
      content: "",
      status: "COMPLETE",
      notes: { steps: 0 },
    });
  });

  it("gives later steps each earlier result's parsed JSON, and `result` as the previous step's value", async () => {
    const seen: unknown[] = [];
    const { actor } = run({ stepCount: 2 }, (path, env) => {
      seen.push([find(env, "step_results[0].parsedContent[1]"), find(env, "result[0]"), find(env, "previous_result")]);
      return path.endsWith("0") ? ok('["a.py","b.py"]') : ok("done");
    });
    await waitFor(actor, (s) => s.status === "done");
    expect(seen[1]).toEqual([
      { found: true, value: "b.py" },
      { found: true, value: "a.py" },
      { found: true, value: '["a.py","b.py"]' },
    ]);
  });

  it("leaves a `result` the task binds itself alone", async () => {
    const seen: unknown[] = [];
    const { actor } = run({ stepCount: 2, env: rootEnv({ result: "mine" }) }, (_path, env) => {
      seen.push(find(env, "result"));
      return ok("[1]");
    });
    await waitFor(actor, (s) => s.status === "done");
    expect(seen).toEqual([
      { found: true, value: "mine" },
      { found: true, value: "mine" },
    ]);
  });
});
