/**
 * The evaluation machine with its real composites: a composite's `node.started` (and a sequential's `step 1/N`, a
 * loop's `iteration 1/N`) come before anything its children do, even when a child acts the moment it starts (the
 * shell's runStep evaluates the step at once). XState starts the children a machine invokes in its first macrostep
 * before that step's own actions run; each machine waits for START so that never reorders the reports.
 */
import { describe, expect, it } from "vitest";
import { createActor, fromPromise, toPromise } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import { rootEnv } from "../../../machines/language/env.js";
import { evaluationMachine, type EvalNode } from "../../../machines/evaluator/evaluation.js";
import { sequentialMachine, type ProgressParams, type RunStepInput } from "../../../machines/evaluator/sequential.js";
import { reduceMachine } from "../../../machines/evaluator/reduce.js";
import { directorEvaluatorMachine } from "../../../machines/evaluator/loop.js";
import type { TaskResult } from "../../../protocol/index.js";
import { tid } from "../../support/ids.js";

const ok = (content: string, notes: Record<string, unknown> = {}): TaskResult => ({ content, status: "COMPLETE", notes });

/** Runs `node` at path 0 in an evaluation whose children log the moment they start; the log, in order. */
async function order(node: EvalNode): Promise<string[]> {
  const log: string[] = [];
  const progress = (_: unknown, p: ProgressParams) => log.push(`${p.event} ${String(p.data?.["nodePath"] ?? "")}`);
  // A child that acts as it starts: the log line is written synchronously, when XState starts the actor.
  const child = (name: string, result: (path: string) => TaskResult) =>
    fromPromise<TaskResult, RunStepInput>(({ input }) => {
      log.push(`${name} ${input.path}`);
      return Promise.resolve(result(input.path));
    });
  const step = child("child", (path) => (path.endsWith(".evaluator") ? ok("", { success: true, feedback: "good" }) : ok(path)));
  const machine = evaluationMachine.provide({
    actions: { progress, bindNow: () => undefined },
    actors: {
      sequential: sequentialMachine.provide({ actions: { progress }, actors: { runStep: step } }),
      directorEvaluator: directorEvaluatorMachine.provide({ actions: { progress }, actors: { runStep: step } }),
      reduce: reduceMachine.provide({
        actions: { progress },
        actors: {
          runStep: step,
          resolveItems: fromPromise(({ input }) => {
            log.push(`items ${input.path}`);
            return Promise.resolve({ items: [{ name: "a", value: 1 }] });
          }),
        },
      }),
    },
  });
  const actor = createActor(machine, { input: { taskId: tid("t"), path: "0", node, env: rootEnv(), entry: true } });
  const done = toPromise(actor);
  actor.start().send(START);
  expect((await done).status).toBe("COMPLETE");
  return log;
}

describe("the order of an evaluation's reports", () => {
  it("a sequential reports node.started, then each step.started before the step runs", async () => {
    expect(await order({ kind: "task", type: "sequential", stepCount: 2 })).toEqual([
      "node.started 0",
      "step.started 0.steps.0",
      "child 0.steps.0",
      "step.started 0.steps.1",
      "child 0.steps.1",
    ]);
  });

  it("a reduce reports node.started before it resolves its inputs and runs its tasks", async () => {
    expect(await order({ kind: "task", type: "reduce", initialTask: true })).toEqual([
      "node.started 0",
      "items 0",
      "child 0.initialValue.task",
      "step.started 0.innerTask",
      "child 0.innerTask",
      "child 0.reductionTask",
    ]);
  });

  it("a director-evaluator loop reports node.started, then iteration 1, before its director runs", async () => {
    const log = await order({ kind: "task", type: "director_evaluator_loop", loop: { director: true, evaluator: true, script: false } });
    expect(log.slice(0, 4)).toEqual(["node.started 0", "iteration.started 0", "child 0.director", "child 0.evaluator"]);
  });
});

describe("the machines wait for START", () => {
  it("an evaluation does nothing until it is sent START", () => {
    const actor = createActor(evaluationMachine, {
      input: { taskId: tid("t"), path: "0", node: { kind: "task", type: "nope" }, env: rootEnv(), entry: true },
    }).start();
    expect(actor.getSnapshot().value).toBe("idle");
    actor.send(START);
    expect(actor.getSnapshot().value).toBe("unsupported");
  });
});
