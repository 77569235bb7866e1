import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import { flatten, rootEnv, type Env } from "../../../machines/language/env.js";
import { reduceMachine, type ReduceInput, type ReduceItem } from "../../../machines/evaluator/reduce.js";
import type { TaskResult } from "../../../protocol/index.js";

const ok = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: {} });
const ITEMS: ReduceItem[] = [
  { name: "a", value: "1" },
  { name: "b", value: "2" },
  { name: "c", value: "3" },
];

const missing: TaskResult = {
  content: "",
  status: "FAILED",
  notes: {},
  error: { type: "TASK_FAILURE", reason: "input_validation_failure", message: "missing required input: 'x'" },
};

function run(input: Partial<ReduceInput>, step: (path: string, env: Env) => TaskResult, items: ReduceItem[] | "fail" = ITEMS) {
  const progress: string[] = [];
  const machine = reduceMachine.provide({
    actors: {
      runStep: fromPromise(async ({ input: i }) => step(i.path, i.env)),
      resolveItems: fromPromise(async () => (items === "fail" ? { result: missing } : { items })),
    },
    actions: { progress: (_, p) => progress.push(p.message) },
  });
  const full: ReduceInput = { path: "0", env: rootEnv(), initialValue: "0", initialTask: false, ...input };
  const actor = createActor(machine, { input: full }).start();
  actor.send(START);
  return { actor, progress };
}

/** inner doubles the input; reduction adds it to the accumulator. */
function arithmetic(path: string, env: Env): TaskResult {
  const b = flatten(env);
  if (path === "0.innerTask") return ok(String(Number(b["current_input"]) * 2));
  if (path === "0.reductionTask") return ok(String(Number(b["accumulator"]) + Number(b["current_result"])));
  return ok("10");
}

describe("reduce machine", () => {
  it("folds every input in order through inner and reduction tasks", async () => {
    const { actor, progress } = run({}, arithmetic);
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toEqual({ content: "12", status: "COMPLETE", notes: { inputs: 3 } });
    expect(progress).toEqual(["input 1/3", "input 2/3", "input 3/3"]);
  });

  it("binds current_result, accumulator and original_input for the reduction task", async () => {
    const seen: Record<string, unknown>[] = [];
    const { actor } = run({}, (path, env) => {
      if (path === "0.reductionTask") seen.push(flatten(env));
      return arithmetic(path, env);
    });
    await waitFor(actor, (s) => s.status === "done");
    expect(seen[1]).toMatchObject({ current_result: "4", accumulator: "2", original_input: "2", input_name: "b", input_index: 1 });
  });

  it("starts from the output of the initial value's task", async () => {
    const { actor } = run({ initialTask: true }, arithmetic);
    expect((await waitFor(actor, (s) => s.status === "done")).output?.content).toBe("22");
  });

  it("fails at an input with failedInputIndex, processedInputs, currentAccumulator and partial results", async () => {
    const { actor } = run({}, (path, env) => {
      if (path === "0.innerTask" && flatten(env)["current_input"] === "3")
        return { content: "", status: "FAILED", notes: {}, error: { type: "TASK_FAILURE", reason: "model_error", message: "down" } };
      return arithmetic(path, env);
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toMatchObject({
      reason: "model_error",
      message: "reduce failed in inner_task of input 3/3: down",
      details: {
        failedInputIndex: 2,
        totalInputs: 3,
        processedInputs: 2,
        currentAccumulator: "6",
        partialResults: [
          { index: 0, result: "2", accumulator: "2" },
          { index: 1, result: "4", accumulator: "6" },
        ],
      },
    });
  });

  it("returns the initial value when there are no inputs", async () => {
    const { actor } = run({ initialValue: "seed" }, arithmetic, []);
    expect((await waitFor(actor, (s) => s.status === "done")).output?.content).toBe("seed");
  });

  it("fails with the failing input's reason when an input cannot be resolved", async () => {
    const { actor } = run({}, arithmetic, "fail");
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({ reason: "input_validation_failure", details: { phase: "inputs", processedInputs: 0 } });
  });
});
