import { describe, expect, it } from "vitest";
import { assign, createActor, fromPromise, waitFor } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import { rootEnv, type Env } from "../../../machines/language/env.js";
import { directorEvaluatorMachine } from "../../../machines/evaluator/loop.js";
import { continuationMachine, type SuspendedResult } from "../../../machines/evaluator/continuation.js";
import { boundNow, evaluationMachine, type BindOutcome, type EvalNode } from "../../../machines/evaluator/evaluation.js";
import { splitCommand } from "../../../machines/language/script-argv.js";
import { sequentialMachine } from "../../../machines/evaluator/sequential.js";
import type { TaskResult } from "../../../protocol/index.js";
import { tid } from "../../support/ids.js";

const ok = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: {} });

/** Starts an evaluation actor as the shell does: started, then sent START. */
function begin<A extends { start(): unknown; send(event: typeof START): void }>(actor: A): A {
  actor.start();
  actor.send(START);
  return actor;
}

/** Runs `node`; `bind` binds its inputs, at once (`bindNow`) or, for a node with `inputTasks`, by the `bindInputs` actor. */
function run(node: EvalNode, runAtomic: (input: { path: string; env: Env }) => Promise<TaskResult>, bind?: () => BindOutcome) {
  const progress: string[] = [];
  /** How the inputs were bound: `now` or `actor`, once per binding. */
  const bindings: string[] = [];
  const machine = evaluationMachine.provide({
    actors: {
      runAtomic: fromPromise(({ input }) => runAtomic(input)),
      bindInputs: fromPromise(async ({ input }) => (bindings.push("actor"), bind ? bind() : { env: input.env })),
      runCall: fromPromise(async () => ok("called")),
      runCond: fromPromise(async () => ok("chosen")),
    },
    actions: {
      progress: (_, p) => progress.push(`${p.event}: ${p.message}`),
      bindNow: assign(({ context }) => (bindings.push("now"), boundNow(() => (bind ? bind() : { env: context.env })))),
    },
  });
  return {
    actor: begin(createActor(machine, { input: { taskId: tid("t"), path: "0", node, env: rootEnv(), entry: true } })),
    progress,
    bindings,
  };
}

describe("evaluation machine", () => {
  it("runs an atomic task (type absent means atomic) and outputs its result", async () => {
    const { actor, progress, bindings } = run({ kind: "task", type: "atomic" }, async () => ok("x"));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toEqual(ok("x"));
    expect(progress).toEqual(["node.started: atomic task started"]);
    // No input is a nested task: bound at once, without an actor.
    expect(bindings).toEqual(["now"]);
  });

  it("binds the inputs of a task with a nested task among them through the bindInputs actor", async () => {
    const seen: unknown[] = [];
    const { actor, bindings } = run(
      { kind: "task", inputTasks: true },
      async ({ env }) => (seen.push(env.bindings), ok("z")),
      () => ({ env: rootEnv({ summary: "nested" }) }),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toEqual(ok("z"));
    expect(bindings).toEqual(["actor"]);
    expect(seen).toEqual([{ summary: "nested" }]);
  });

  it("fails with the error of a binding that throws, and never runs the task", async () => {
    const { actor } = run(
      { kind: "task" },
      async () => {
        throw new Error("must not run");
      },
      () => {
        throw new Error("no such variable table");
      },
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toMatchObject({ reason: "unexpected_error", message: "no such variable table" });
  });

  it("fails clearly when the shell provides no bindNow", async () => {
    const machine = evaluationMachine.provide({ actors: { runAtomic: fromPromise(async () => ok("never")) } });
    const actor = begin(
      createActor(machine, { input: { taskId: tid("t"), path: "0", node: { kind: "task" }, env: rootEnv(), entry: true } }),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error?.message).toBe("not provided: evaluation.bindNow");
  });

  it("runs the atomic task in the environment its inputs were bound into", async () => {
    const seen: unknown[] = [];
    const bound = { env: rootEnv({ topic: "sea" }) };
    const { actor } = run(
      { kind: "task" },
      async ({ env }) => (seen.push(env.bindings), ok("y")),
      () => bound,
    );
    await waitFor(actor, (s) => s.status === "done");
    expect(seen).toEqual([{ topic: "sea" }]);
  });

  it("fails with the binding's failure and never runs the task", async () => {
    const failure: TaskResult = {
      content: "",
      status: "FAILED",
      notes: {},
      error: { type: "TASK_FAILURE", reason: "input_validation_failure", message: "missing required input: 'x'" },
    };
    const { actor } = run(
      { kind: "task" },
      async () => {
        throw new Error("must not run");
      },
      () => ({ result: failure }),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toEqual(failure);
  });

  it("runs a sequential task's steps in its child machine", async () => {
    const paths: string[] = [];
    const withSteps = evaluationMachine.provide({
      actors: {
        sequential: sequentialMachine.provide({
          actors: { runStep: fromPromise(async ({ input }) => (paths.push(input.path), ok(input.path))) },
        }),
      },
      actions: { bindNow: () => undefined },
    });
    const actor = begin(
      createActor(withSteps, {
        input: { taskId: tid("t"), path: "0", node: { kind: "task", type: "sequential", stepCount: 2 }, env: rootEnv(), entry: true },
      }),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(paths).toEqual(["0.steps.0", "0.steps.1"]);
    expect(snap.output).toMatchObject({ status: "COMPLETE", content: "0.steps.1", notes: { steps: 2 } });
  });

  it("runs a call through runCall", async () => {
    const { actor, progress } = run({ kind: "call", name: "greet" }, async () => ok(""));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.content).toBe("called");
    expect(progress).toEqual(["call.started: call greet"]);
  });

  it("runs a library reference <task ref> through runRef after binding its inputs", async () => {
    const machine = evaluationMachine.provide({
      actors: {
        runRef: fromPromise(async ({ input }) => ok(`ref with ${String(input.env.bindings["file"])}`)),
      },
      actions: { bindNow: assign({ env: () => rootEnv({ file: "a.csv" }) }) },
    });
    const actor = begin(
      createActor(machine, {
        input: { taskId: tid("t"), path: "0", node: { kind: "task", type: "atomic", ref: "load_csv" }, env: rootEnv(), entry: true },
      }),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toMatchObject({ status: "COMPLETE", content: "ref with a.csv" });
  });

  it("answers an unknown task type with a located not_supported failure", async () => {
    const { actor } = run({ kind: "task", type: "parallel", loc: { line: 3, col: 5 } }, async () => ok("must not run"));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("unsupported");
    expect(snap.output?.error).toMatchObject({ reason: "not_supported" });
    expect(snap.output?.error?.message).toContain('type="parallel"');
    expect(snap.output?.error?.message).toContain("line 3, column 5");
  });

  it("runs a <cond> through runCond", async () => {
    const { actor } = run({ kind: "cond" }, async () => ok(""));
    expect((await waitFor(actor, (s) => s.status === "done")).output?.content).toBe("chosen");
  });

  it("hands a director_evaluator_loop without its evaluator to the loop machine, which refuses it", async () => {
    const node = {
      kind: "task",
      type: "director_evaluator_loop",
      loc: { line: 3, col: 5 },
      loop: { director: true, evaluator: false, script: false },
    };
    const { actor } = run(node, async () => {
      throw new Error("must not run");
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({
      reason: "input_validation_failure",
      message: "director_evaluator_loop requires an <evaluator>",
    });
  });

  it("runs a CONTINUATION through the continuation machine and ends with the resumed result", async () => {
    const machine = evaluationMachine.provide({
      actors: {
        runAtomic: fromPromise<SuspendedResult, { path: string; env: Env }>(async () => ({
          content: "asking",
          status: "CONTINUATION" as const,
          notes: { subtask_request: { type: "atomic", description: "child" } },
          session: {
            messages: [
              { role: "system" as const, content: "s" },
              { role: "user" as const, content: "u" },
            ],
            toolCallId: "c1",
            turns: 1,
            usage: { promptTokens: 1, completionTokens: 1 },
            context: { used: 1, limit: 10, peak: 1 },
            reportedTokens: 0,
            warned: false,
            malformedToolCalls: 0,
            model: "m",
          },
        })),
        continuation: continuationMachine.provide({
          actors: {
            runSubtask: fromPromise(async () => ok("child answer")),
            resumeAtomic: fromPromise(async ({ input }) => ok(`resumed with ${input.answer}`)),
          },
        }),
      },
      actions: { bindNow: () => undefined },
    });
    const actor = begin(
      createActor(machine, {
        input: { taskId: tid("t"), path: "0", node: { kind: "task", type: "atomic" }, env: rootEnv(), entry: true },
      }),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toMatchObject({ status: "COMPLETE", content: "resumed with child answer", notes: { subtasks: 1 } });
  });

  it("runs a script task through runScript after binding its inputs", async () => {
    const seen: unknown[] = [];
    const machine = evaluationMachine.provide({
      actors: {
        runScript: fromPromise(async ({ input }) => (seen.push(input.env.bindings), ok("stdout"))),
      },
      actions: { bindNow: assign({ env: () => rootEnv({ name: "x" }) }) },
    });
    const actor = begin(
      createActor(machine, {
        input: { taskId: tid("t"), path: "0", node: { kind: "task", type: "script" }, env: rootEnv(), entry: true },
      }),
    );
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("done");
    expect(snap.output?.content).toBe("stdout");
    expect(seen).toEqual([{ name: "x" }]);
  });

  it("runs a director_evaluator_loop in the directorEvaluator child machine", async () => {
    const paths: string[] = [];
    const progress: string[] = [];
    const machine = evaluationMachine.provide({
      actors: {
        directorEvaluator: directorEvaluatorMachine.provide({
          actors: {
            runStep: fromPromise(
              async ({ input }) => (
                paths.push(input.path),
                input.path.endsWith("director") ? ok("draft") : { ...ok(""), notes: { success: true } }
              ),
            ),
          },
        }),
      },
      actions: { progress: (_, p) => progress.push(`${p.event}: ${p.message}`), bindNow: () => undefined },
    });
    const node = {
      kind: "task",
      type: "director_evaluator_loop",
      loop: { director: true, evaluator: true, script: false, maxIterations: 2 },
    };
    const actor = begin(createActor(machine, { input: { taskId: tid("t"), path: "0", node, env: rootEnv(), entry: true } }));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toMatchObject({ status: "COMPLETE", content: "draft" });
    expect(paths).toEqual(["0.director", "0.evaluator"]);
    expect(progress).toContain("node.started: director-evaluator loop started");
  });

  it("answers an element it does not model as not supported", async () => {
    const { actor } = run({ kind: "function", loc: { line: 2, col: 1 } }, async () => ok(""));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error?.message).toContain("<function> at line 2, column 1 is not supported");
  });

  it("turns a thrown error into unexpected_error", async () => {
    const { actor } = run({ kind: "task" }, async () => {
      throw new Error("handler gone");
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({ reason: "unexpected_error", message: "handler gone" });
  });

  it("ends failed with execution_halted when cancelled", async () => {
    const { actor } = run({ kind: "task" }, () => new Promise<TaskResult>(() => undefined));
    actor.send({ type: "evaluation.cancel" });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({ reason: "execution_halted" });
  });
});

describe("script command splitting", () => {
  it("splits on whitespace with quotes and escapes, shell syntax staying literal", () => {
    expect(splitCommand(`python3 -c "print('a b')" 'x y' a\\ b ; rm -rf $(x) "q\\"q"`)).toEqual({
      ok: true,
      argv: ["python3", "-c", "print('a b')", "x y", "a b", ";", "rm", "-rf", "$(x)", 'q"q'],
    });
    expect(splitCommand(`run "{{script_input}}"`)).toEqual({ ok: true, argv: ["run", "{{script_input}}"] });
  });

  it("refuses an unterminated quote and an empty command", () => {
    expect(splitCommand(`echo "open`)).toMatchObject({ ok: false, error: expect.stringContaining("unterminated") });
    expect(splitCommand("   ")).toMatchObject({ ok: false });
  });
});
