/**
 * The human gates of an interactive checkmate loop, on the machine alone: the criteria review, the start gate
 * (go / cancel / edit) and the checkpoint after a FAIL verdict (continue / redirect / stop), each with its default
 * when no answer comes in time.
 */
import { createActor, fromPromise, toPromise } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import { describe, expect, it } from "vitest";
import {
  checkmateMachine,
  checkpointChoice,
  criteriaChoice,
  startChoice,
  type AskInput,
  type AskReply,
  type IntakeInput,
  type JudgeInput,
  type Prepared,
  type WorkerInput,
} from "../../../machines/evaluator/checkmate.js";
import { rootEnv } from "../../../machines/language/env.js";
import type { TaskResult } from "../../../protocol/index.js";

const ok = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: {} });
const verdict = (result: "PASS" | "FAIL", score: number, gapSummary = "") =>
  ok(JSON.stringify({ result, score, criteria: [], gapSummary }));
const NO_ANSWER: AskReply = { timedOut: "no answer within 1 s" };

interface Script {
  criteria?: string;
  /** The user's answers, by gate, in order; none left: no answer in time. */
  answers: Partial<Record<AskInput["gate"], string[]>>;
  judge: (input: JudgeInput) => TaskResult;
  intake?: (input: IntakeInput) => TaskResult;
}

async function run(script: Script, maxIterations = 3) {
  const asks: AskInput[] = [];
  const workers: WorkerInput[] = [];
  const intakes: IntakeInput[] = [];
  const progress: { event: string; message: string }[] = [];
  const machine = checkmateMachine.provide({
    actions: { progress: (_, p) => progress.push({ event: p.event, message: p.message }) },
    actors: {
      prepare: fromPromise(
        async (): Promise<Prepared> => ({
          task: "write a poem",
          interactive: true,
          gateTimeoutS: 5,
          ...(script.criteria ? { criteria: script.criteria } : {}),
        }),
      ),
      runIntake: fromPromise(async ({ input }: { input: IntakeInput }) => (intakes.push(input), script.intake?.(input) ?? ok("- rhymes"))),
      askUser: fromPromise(async ({ input }: { input: AskInput }): Promise<AskReply> => {
        asks.push(input);
        const answer = script.answers[input.gate]?.shift();
        return answer === undefined ? NO_ANSWER : { answer };
      }),
      runWorker: fromPromise(async ({ input }: { input: WorkerInput }) => (workers.push(input), ok(`attempt ${input.iteration}`))),
      runJudge: fromPromise(async ({ input }: { input: JudgeInput }) => script.judge(input)),
    },
  });
  const actor = createActor(machine, { input: { path: "0", env: rootEnv({}), maxIterations } });
  const done = toPromise(actor);
  actor.start().send(START);
  const output = await done;
  return { output, asks, workers, intakes, progress, state: actor.getSnapshot().value };
}

describe("checkmate human gates", () => {
  it("reads the answers: approval words, cancel, edit, redirect, stop; no answer is the default", () => {
    expect(criteriaChoice({ answer: "LGTM!" })).toBe("approve");
    expect(criteriaChoice({ answer: "" })).toBe("approve");
    expect(criteriaChoice({ answer: "add a rhyme scheme" })).toBe("revise");
    expect(criteriaChoice(NO_ANSWER)).toBe("approve");
    expect(startChoice({ answer: "go" })).toBe("go");
    expect(startChoice({ answer: "Cancel." })).toBe("cancel");
    expect(startChoice({ answer: "edit: - has a title" })).toBe("edit");
    expect(startChoice({ answer: "editorial" })).toBe("go");
    expect(startChoice(NO_ANSWER)).toBe("go");
    expect(checkpointChoice({ answer: "continue" })).toBe("continue");
    expect(checkpointChoice({ answer: "redirect: shorter lines" })).toBe("redirect");
    expect(checkpointChoice({ answer: "make it rhyme" })).toBe("redirect");
    expect(checkpointChoice({ answer: "stop" })).toBe("stop");
    expect(checkpointChoice(NO_ANSWER)).toBe("continue");
  });

  it("asks for approval of the intake's criteria, revises them with the user's feedback, then asks go before the first worker", async () => {
    const { output, asks, intakes, workers, progress } = await run({
      answers: { criteria: ["also ask for a title", "yes"], start: ["go"] },
      intake: (i) => ok(i.feedback === undefined ? "- rhymes" : "- rhymes\n- has a title"),
      judge: () => verdict("PASS", 90),
    });
    expect(asks.map((a) => a.gate)).toEqual(["criteria", "criteria", "start"]);
    expect(asks[0]?.request).toMatchObject({ timeout_s: 5, question: expect.stringContaining("- rhymes") });
    expect(intakes[1]).toMatchObject({ feedback: "also ask for a title", previousDraft: "- rhymes" });
    expect(workers[0]?.criteria).toBe("- rhymes\n- has a title");
    expect(output).toMatchObject({ status: "COMPLETE", notes: { criteria_approved: true } });
    expect(progress.filter((p) => p.event === "checkmate.criteria").map((p) => p.message)).toEqual(["criteria approved by the user"]);
    expect(output.notes["gates"]).toEqual([
      { gate: "criteria", iteration: 0, decision: "revise", answer: "also ask for a title" },
      { gate: "criteria", iteration: 0, decision: "approve", answer: "yes" },
      { gate: "start", iteration: 0, decision: "go", answer: "go" },
    ]);
  });

  it("cancels at the start gate: no worker runs", async () => {
    const { output, workers, state } = await run({ criteria: "- rhymes", answers: { start: ["cancel"] }, judge: () => verdict("PASS", 1) });
    expect(state).toBe("failed");
    expect(workers).toEqual([]);
    expect(output).toMatchObject({
      status: "FAILED",
      error: { reason: "execution_halted", message: "checkmate cancelled by the user before the first worker" },
      notes: { termination_reason: "user_cancelled" },
    });
  });

  it("goes on with the last draft when the user approves none within max_intake_rounds", async () => {
    const { output, asks, progress } = await run({ answers: { criteria: ["more", "more", "more"] }, judge: () => verdict("PASS", 1) });
    expect(asks.map((a) => a.gate)).toEqual(["criteria", "criteria", "criteria", "start"]);
    expect(output.notes).toMatchObject({ criteria_approved: false });
    expect(progress.find((p) => p.event === "checkmate.criteria")?.message).toBe(
      "criteria not approved after 3 rounds; going on with the last draft",
    );
  });

  it("replaces the criteria on edit", async () => {
    const { output, workers } = await run({
      criteria: "- rhymes",
      answers: { start: ["edit: - is a haiku"] },
      judge: () => verdict("PASS", 1),
    });
    expect(workers[0]?.criteria).toBe("- is a haiku");
    expect(output.notes).toMatchObject({ criteria: "- is a haiku", criteria_source: "user" });
  });

  it("takes the defaults without answers: go, then continue after each FAIL but the last", async () => {
    const { output, asks, progress } = await run({ criteria: "- rhymes", answers: {}, judge: () => verdict("FAIL", 10, "gap") });
    expect(asks.map((a) => a.gate)).toEqual(["start", "checkpoint", "checkpoint"]);
    expect(output.notes["termination_reason"]).toBe("max_iterations_reached");
    expect(progress.filter((p) => p.event === "checkmate.gate").map((p) => p.message)).toEqual([
      "checkmate: start gate: go (no answer in time: the default)",
      "checkmate: checkpoint gate: continue (no answer in time: the default)",
      "checkmate: checkpoint gate: continue (no answer in time: the default)",
    ]);
  });

  it("gives the next workers the user's redirect, and stops with the best attempt on stop", async () => {
    const { output, workers, asks, state } = await run(
      {
        criteria: "- rhymes",
        answers: { start: ["go"], checkpoint: ["redirect: shorter lines", "stop"] },
        judge: (j) => verdict("FAIL", j.iteration === 1 ? 60 : 20, "gap"),
      },
      5,
    );
    expect(asks[1]?.request.question).toContain("[checkmate: iteration 1/5] FAIL score 60.\nGaps: gap");
    expect(workers[1]?.directions).toEqual([{ iteration: 1, text: "shorter lines" }]);
    expect(workers).toHaveLength(2);
    expect(state).toBe("stopped");
    expect(output).toMatchObject({
      status: "FAILED",
      content: "attempt 1",
      notes: { termination_reason: "user_stopped", best_iteration: 1, directions: [{ iteration: 1, text: "shorter lines" }] },
      error: { reason: "execution_halted", message: "checkmate stopped by the user after iteration 2; best attempt: iteration 1" },
    });
  });
});
