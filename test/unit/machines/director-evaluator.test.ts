import { describe, expect, it } from "vitest";
import { createActor, fromPromise, toPromise } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import { find, rootEnv, type Env } from "../../../machines/language/env.js";
import { directorEvaluatorMachine, readEvaluation, type DirectorEvaluatorInput } from "../../../machines/evaluator/loop.js";
import type { TaskResult } from "../../../protocol/index.js";

const ok = (content: string, notes: Record<string, unknown> = {}): TaskResult => ({ content, status: "COMPLETE", notes });
const bad = (message: string): TaskResult => ({
  content: "",
  status: "FAILED",
  notes: {},
  error: { type: "TASK_FAILURE", reason: "model_error", message },
});
const verdict = (success: boolean, feedback: string, extra: Record<string, unknown> = {}) => ok("", { success, feedback, ...extra });
const get = (env: Env, name: string): unknown => {
  const found = find(env, name);
  return found.found ? found.value : undefined;
};

type Step = (env: Env, iteration: number) => Promise<TaskResult> | TaskResult;

interface Script {
  director: Step;
  evaluator: Step;
  script?: Step;
}

async function run(steps: Script, input: Partial<DirectorEvaluatorInput> = {}) {
  const progress: string[] = [];
  const seen: { path: string; env: Env }[] = [];
  const step = (path: string, env: Env): Promise<TaskResult> | TaskResult => {
    seen.push({ path, env });
    const iteration = Number(get(env, "current_iteration"));
    if (path.endsWith(".director")) return steps.director(env, iteration);
    if (path.endsWith(".evaluator")) return steps.evaluator(env, iteration);
    if (path.endsWith(".scriptExecution") && steps.script) return steps.script(env, iteration);
    throw new Error(`unexpected path ${path}`);
  };
  const machine = directorEvaluatorMachine.provide({
    actors: {
      runStep: fromPromise(async ({ input }) => step(input.path, input.env)),
      runScript: fromPromise(async ({ input }) => step(input.path, input.env)),
    },
    actions: { progress: (_, p) => progress.push(`${p.event}: ${p.message}`) },
  });
  const actor = createActor(machine, {
    input: {
      path: "0",
      env: rootEnv({ user_query: "q" }),
      hasDirector: true,
      hasEvaluator: true,
      hasScript: steps.script !== undefined,
      ...input,
    },
  });
  const done = toPromise(actor);
  actor.start().send(START);
  const output = await done;
  return { output, progress, seen, state: actor.getSnapshot().value };
}

describe("director–evaluator machine", () => {
  it("stops with COMPLETE when the evaluator reports success", async () => {
    const { output, state, progress } = await run({ director: () => ok("answer"), evaluator: () => verdict(true, "good") });
    expect(state).toBe("done");
    expect(output.status).toBe("COMPLETE");
    expect(output.content).toBe("answer");
    expect(output.notes).toMatchObject({
      iterations_completed: 1,
      termination_reason: "evaluation_success",
      final_evaluation: { success: true, feedback: "good" },
    });
    expect(progress[0]).toBe("iteration.started: iteration 1/5");
  });

  it("ends exhausted after max iterations, FAILED with the best-scored attempt and the final evaluation", async () => {
    const scores = [0.2, 0.9, 0.4];
    const { output, state, progress } = await run(
      { director: (_, i) => ok(`attempt ${i}`), evaluator: (_, i) => verdict(false, `try again ${i}`, { score: scores[i - 1] }) },
      { maxIterations: 3 },
    );
    expect(state).toBe("exhausted");
    expect(output.status).toBe("FAILED");
    expect(output.content).toBe("attempt 2");
    expect(output.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "execution_halted",
      message: expect.stringContaining("max iterations (3)"),
    });
    expect(output.notes).toMatchObject({
      termination_reason: "max_iterations_reached",
      iterations_completed: 3,
      best_iteration: 2,
      final_evaluation: { feedback: "try again 3" },
    });
    expect(progress.filter((p) => p.startsWith("iteration.started"))).toEqual([
      "iteration.started: iteration 1/3",
      "iteration.started: iteration 2/3",
      "iteration.started: iteration 3/3",
    ]);
  });

  it("carries the last attempt when the evaluator gives no score, and defaults to 5 iterations", async () => {
    const { output, state } = await run({ director: (_, i) => ok(`attempt ${i}`), evaluator: () => verdict(false, "no") });
    expect(state).toBe("exhausted");
    expect(output.content).toBe("attempt 5");
    expect(output.notes["iterations_completed"]).toBe(5);
  });

  it("terminates early when the termination condition holds (iteration and evaluation.success alias)", async () => {
    const { output, state } = await run(
      { director: (_, i) => ok(`attempt ${i}`), evaluator: () => verdict(false, "meh") },
      { condition: "evaluation.success === true || iteration >= 2" },
    );
    expect(state).toBe("done");
    expect(output.status).toBe("COMPLETE");
    expect(output.content).toBe("attempt 2");
    expect(output.notes["termination_reason"]).toBe("termination_condition");
  });

  it("treats a condition that cannot be evaluated as false and reports a warning", async () => {
    const { state, progress } = await run(
      { director: () => ok("a"), evaluator: () => verdict(false, "no") },
      { condition: "iteration >>> 2", maxIterations: 2 },
    );
    expect(state).toBe("exhausted");
    expect(progress.some((p) => p.startsWith("loop.condition_error"))).toBe(true);
  });

  it("passes the director's result to the script and the script's output (both spellings) to the evaluator", async () => {
    const { state, seen } = await run({
      director: () => ok("print('hi')"),
      script: () => ok("hi", { scriptOutput: { stdout: "hi\n", stderr: "warn", exitCode: 3 } }),
      evaluator: () => verdict(true, "ok"),
    });
    expect(state).toBe("done");
    const script = seen.find((s) => s.path === "0.scriptExecution");
    expect(script && get(script.env, "director_result")).toBe("print('hi')");
    const evaluator = seen.find((s) => s.path === "0.evaluator");
    if (!evaluator) throw new Error("evaluator did not run");
    expect(
      ["script_output", "script_stdout", "script_errors", "script_stderr", "script_exit_code", "director_result"].map((n) =>
        get(evaluator.env, n),
      ),
    ).toEqual(["hi\n", "hi\n", "warn", "warn", 3, "print('hi')"]);
  });

  it("binds the script's content with exit code -1 when it gives no scriptOutput", async () => {
    const { seen } = await run({ director: () => ok("d"), script: () => ok("raw"), evaluator: () => verdict(true, "") });
    const evaluator = seen.find((s) => s.path === "0.evaluator");
    expect(
      evaluator && [get(evaluator.env, "script_stdout"), get(evaluator.env, "script_stderr"), get(evaluator.env, "script_exit_code")],
    ).toEqual(["raw", "Script output format error", -1]);
  });

  it("gives the evaluator's feedback to the next director, with 1-based current_iteration", async () => {
    const { output, seen } = await run({
      director: (_, i) => ok(`attempt ${i}`),
      evaluator: (_, i) => verdict(i === 2, i === 1 ? "add detail" : "fine"),
    });
    expect(output.content).toBe("attempt 2");
    const directors = seen.filter((s) => s.path === "0.director");
    expect(
      directors.map((d) => [get(d.env, "current_iteration"), get(d.env, "evaluation_feedback"), get(d.env, "evaluation_success")]),
    ).toEqual([
      [1, "", false],
      [2, "add detail", false],
    ]);
    expect(get(directors[1]?.env ?? rootEnv(), "last_evaluation")).toMatchObject({ success: false, feedback: "add detail" });
  });

  it.each([
    ["director", { director: () => bad("boom"), evaluator: () => verdict(true, "") }, 0],
    ["script", { director: () => ok("d"), script: () => bad("boom"), evaluator: () => verdict(true, "") }, 0],
    ["evaluator", { director: () => ok("d"), evaluator: () => bad("boom") }, 0],
  ] as const)("fails with subtask_failure when the %s fails, keeping the history", async (phase, steps, completed) => {
    const { output, state } = await run(steps);
    expect(state).toBe("failed");
    expect(output.status).toBe("FAILED");
    expect(output.content).toBe("Director-Evaluator loop failed during iteration 1.");
    expect(output.error).toMatchObject({ reason: "subtask_failure", details: { iteration: 1, phase, cause: { message: "boom" } } });
    expect(output.notes["iterations_completed"]).toBe(completed);
    expect(output.notes["iteration_history"]).toHaveLength(1);
  });

  it("keeps earlier iterations in the history when a later one fails", async () => {
    const { output } = await run({ director: (_, i) => (i === 2 ? bad("late") : ok("d")), evaluator: () => verdict(false, "no") });
    expect(output.content).toBe("Director-Evaluator loop failed during iteration 2.");
    expect(output.notes["iterations_completed"]).toBe(1);
    expect(output.notes["iteration_history"]).toHaveLength(2);
  });

  it.each([
    ["director", { hasDirector: false }],
    ["evaluator", { hasEvaluator: false }],
  ] as const)("fails with input_validation_failure before iterating when the %s is missing", async (_name, input) => {
    let ran = 0;
    const { output, progress } = await run({ director: () => (ran++, ok("d")), evaluator: () => (ran++, verdict(true, "")) }, input);
    expect(output.error?.type === "TASK_FAILURE" && output.error.reason).toBe("input_validation_failure");
    expect(ran).toBe(0);
    expect(progress).toEqual([]);
  });

  it("runs a loop without script: director then evaluator, no script bindings", async () => {
    const { seen } = await run({ director: () => ok("d"), evaluator: () => verdict(true, "") });
    expect(seen.map((s) => s.path)).toEqual(["0.director", "0.evaluator"]);
    expect(get(seen[1]?.env ?? rootEnv(), "script_output")).toBeUndefined();
  });

  it("treats an evaluator without success as a failed evaluation with the default feedback", async () => {
    const { output, seen } = await run({ director: () => ok("d"), evaluator: () => ok("not json") }, { maxIterations: 2 });
    expect(output.notes["final_evaluation"]).toMatchObject({ success: false, feedback: "Evaluation failed or structure invalid." });
    expect(get(seen.filter((s) => s.path === "0.director")[1]?.env ?? rootEnv(), "evaluation_feedback")).toBe(
      "Evaluation failed or structure invalid.",
    );
  });

  it("parses the evaluator's content as JSON {success, feedback} when its notes lack success", () => {
    expect(readEvaluation(ok('{"success": true, "feedback": "nice", "score": 7}'))).toMatchObject({
      success: true,
      feedback: "nice",
      score: 7,
    });
    expect(readEvaluation(ok("x", { successScore: 0.5 }))).toMatchObject({ success: false, score: 0.5 });
  });

  it("turns an unexpected exception of a step into a loop failure", async () => {
    const { output, state } = await run({ director: () => ok("d"), evaluator: () => Promise.reject(new Error("kaput")) });
    expect(state).toBe("failed");
    expect(output.error).toMatchObject({
      reason: "subtask_failure",
      details: { phase: "evaluator", cause: { reason: "unexpected_error", message: "kaput" } },
    });
  });
});
