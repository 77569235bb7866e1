import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import {
  continuationMachine,
  LAST_EVALUATOR_OUTPUT,
  RESERVED,
  signatureOf,
  type SuspendedResult,
} from "../../../machines/evaluator/continuation.js";
import { find, rootEnv, type Env } from "../../../machines/language/env.js";
import type { SessionState, SubtaskRequest, TaskResult } from "../../../protocol/index.js";

const session: SessionState = {
  messages: [
    { role: "system", content: "s" },
    { role: "user", content: "u" },
  ],
  toolCallId: "call-1",
  turns: 1,
  usage: { promptTokens: 1, completionTokens: 1 },
  context: { used: 1, limit: 100, peak: 1 },
  reportedTokens: 0,
  warned: false,
  malformedToolCalls: 0,
  model: "m",
};
const ok = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: {} });
const asking = (notes: Record<string, unknown>, content = "so far"): SuspendedResult => ({
  content,
  status: "CONTINUATION",
  notes,
  session,
});
const child: SubtaskRequest = { type: "atomic", description: "child work" };

function run(
  result: SuspendedResult,
  options: {
    env?: Env;
    resume?: (answer: string, n: number) => SuspendedResult;
    subtask?: (env: Env) => TaskResult;
    maxEvaluations?: number;
  } = {},
) {
  const progress: string[] = [];
  const seen: { subtaskEnv?: Env; evaluationEnvs?: Env[]; answers: string[] } = { answers: [] };
  const machine = continuationMachine.provide({
    actions: { progress: (_, p) => progress.push(p.event) },
    actors: {
      runSubtask: fromPromise(
        async ({ input }) => ((seen.subtaskEnv = input.env), options.subtask ? options.subtask(input.env) : ok("child answer")),
      ),
      runEvaluation: fromPromise(
        async ({ input }) => (
          (seen.evaluationEnvs ??= []).push(input.env),
          { result: ok("{}"), answer: "evaluated", lastEvaluatorOutput: `verdict ${input.iteration}` }
        ),
      ),
      waitForInput: fromPromise(async () => "user answer"),
      resumeAtomic: fromPromise(
        async ({ input }) => (
          seen.answers.push(input.answer),
          options.resume ? options.resume(input.answer, seen.answers.length) : ok(`final after ${input.answer}`)
        ),
      ),
    },
  });
  const actor = createActor(machine, {
    input: { path: "0", env: options.env ?? rootEnv(), result, maxDepth: 5, maxEvaluations: options.maxEvaluations ?? 5 },
  }).start();
  actor.send(START);
  return { actor, progress, seen };
}

describe("continuation machine", () => {
  it("runs the subtask, resumes the session with its answer, and counts it", async () => {
    const { actor, progress, seen } = run(asking({ subtask_request: child }));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toMatchObject({ status: "COMPLETE", content: "final after child answer", notes: { subtasks: 1 } });
    expect(snap.output).not.toHaveProperty("session");
    expect(progress).toEqual(["continuation.subtask", "continuation.resumed"]);
    // The child carries the request's signature in its chain.
    expect(seen.subtaskEnv?.bindings[RESERVED.chain]).toEqual([signatureOf(child)]);
  });

  it("loops while the resumed session asks again", async () => {
    const { actor, seen } = run(asking({ subtask_request: child }), {
      resume: (answer, n) => (n === 1 ? asking({ subtask_request: { ...child, description: "second" } }) : ok(`done with ${answer}`)),
    });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output).toMatchObject({ content: "done with child answer", notes: { subtasks: 2 } });
    expect(seen.answers).toHaveLength(2);
  });

  it("refuses a subtask past the depth limit set in the environment", async () => {
    const env = rootEnv({ [RESERVED.chain]: ["a", "b"], [RESERVED.maxDepth]: 2 });
    const { actor } = run(asking({ subtask_request: child }), { env });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.value).toBe("failed");
    expect(snap.output?.error).toMatchObject({
      reason: "subtask_failure",
      message: "subtask depth limit of 2 reached",
      details: { kind: "depth_limit", limit: 2 },
    });
    expect(snap.output?.content).toBe("so far");
  });

  it("lets a request's max_depth set the limit below it", async () => {
    const { actor, seen } = run(asking({ subtask_request: { ...child, max_depth: 1 } }));
    await waitFor(actor, (s) => s.status === "done");
    // The child is at depth 1 and may go no deeper.
    expect(seen.subtaskEnv?.bindings[RESERVED.maxDepth]).toBe(1);
  });

  it("refuses a request already running on the path (a cycle)", async () => {
    const env = rootEnv({ [RESERVED.chain]: [signatureOf(child)] });
    const { actor } = run(asking({ subtask_request: child }), { env });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({ reason: "subtask_failure", details: { kind: "cycle" } });
  });

  it("fails the parent with subtask_failure and the request when the child fails", async () => {
    const failing: TaskResult = {
      content: "",
      status: "FAILED",
      notes: {},
      error: { type: "TASK_FAILURE", reason: "model_error", message: "boom" },
    };
    const { actor } = run(asking({ subtask_request: child }), { subtask: () => failing });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({
      reason: "subtask_failure",
      message: "subtask failed: boom",
      details: { request: child, subtaskError: { message: "boom" } },
    });
  });

  it("binds last_evaluator_output for the later continuations and returns it in the notes (C21)", async () => {
    const evaluation = { evaluation_request: { type: "llm", criteria: "good" } };
    const { actor, seen } = run(asking(evaluation), { resume: (_, n) => (n === 1 ? asking({ subtask_request: child }) : ok("done")) });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(seen.evaluationEnvs?.[0] && find(seen.evaluationEnvs[0], LAST_EVALUATOR_OUTPUT)).toEqual({ found: false });
    expect(seen.subtaskEnv && find(seen.subtaskEnv, LAST_EVALUATOR_OUTPUT)).toEqual({ found: true, value: "verdict 1" });
    expect(snap.output?.notes).toMatchObject({ evaluations: 1, subtasks: 1, last_evaluator_output: "verdict 1" });
  });

  it("bounds the evaluations of one session", async () => {
    const evaluation = { evaluation_request: { type: "llm", criteria: "good" } };
    const { actor, seen } = run(asking(evaluation), { maxEvaluations: 2, resume: () => asking(evaluation) });
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(seen.answers).toEqual(["evaluated", "evaluated"]);
    expect(snap.output?.error).toMatchObject({ reason: "execution_halted", message: "evaluation limit of 2 reached" });
  });

  it("waits for user input and resumes with the answer", async () => {
    const { actor, progress } = run(asking({ input_request: { question: "Which?" } }));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.content).toBe("final after user answer");
    expect(progress).toEqual(["continuation.input", "continuation.resumed"]);
  });

  it("fails a CONTINUATION that asks for nothing it knows", async () => {
    const { actor } = run(asking({ something_else: true }));
    const snap = await waitFor(actor, (s) => s.status === "done");
    expect(snap.output?.error).toMatchObject({ reason: "unexpected_error" });
  });

  it("gives the same signature to the same request, whatever its hints", () => {
    expect(signatureOf({ ...child, template_hints: ["x"] })).toBe(signatureOf(child));
    expect(signatureOf({ ...child, inputs: { a: 1 } })).not.toBe(signatureOf(child));
  });
});
