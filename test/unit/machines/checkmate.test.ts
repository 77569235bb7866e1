import { describe, expect, it } from "vitest";
import { createActor, fromPromise, toPromise } from "xstate";
import { START } from "../../../machines/invoke-events.js";
import {
  bestAttempt,
  checkmateMachine,
  clarificationQuestions,
  clarificationsSpent,
  criteriaApproved,
  judgeInput,
  roleFailure,
  withClarification,
  withJudgeError,
  withVerdict,
  workerInput,
  type CheckmateContext,
  type CheckmateInput,
  type CriteriaJudgeInput,
  type IntakeInput,
  type JudgeInput,
  type AskInput,
  type Prepared,
  type WorkerInput,
} from "../../../machines/evaluator/checkmate.js";
import { rootEnv } from "../../../machines/language/env.js";
import type { TaskResult } from "../../../protocol/index.js";

const ok = (content: string): TaskResult => ({ content, status: "COMPLETE", notes: {} });
const bad = (message: string, reason: "model_error" | "execution_halted" = "model_error"): TaskResult => ({
  content: "",
  status: "FAILED",
  notes: {},
  error: { type: "TASK_FAILURE", reason, message },
});
const verdict = (result: "PASS" | "FAIL", score: number, gapSummary = "") =>
  ok(JSON.stringify({ result, score, criteria: [], gapSummary }));

interface Script {
  criteria?: string;
  intake?: (input: IntakeInput) => TaskResult;
  criteriaJudge?: (input: CriteriaJudgeInput) => TaskResult;
  worker: (input: WorkerInput) => TaskResult;
  judge: (input: JudgeInput) => TaskResult;
  answer?: string;
}

async function run(script: Script, input: Partial<CheckmateInput> = {}) {
  const progress: { event: string; message: string }[] = [];
  const workers: WorkerInput[] = [];
  const intakes: IntakeInput[] = [];
  const asks: AskInput[] = [];
  const machine = checkmateMachine.provide({
    actions: { progress: (_, p) => progress.push({ event: p.event, message: p.message }) },
    actors: {
      prepare: fromPromise(
        async (): Promise<Prepared> => ({ task: "write a poem", ...(script.criteria ? { criteria: script.criteria } : {}) }),
      ),
      runIntake: fromPromise(async ({ input: i }: { input: IntakeInput }) => (intakes.push(i), script.intake?.(i) ?? bad("no intake"))),
      runCriteriaJudge: fromPromise(
        async ({ input: i }: { input: CriteriaJudgeInput }) => script.criteriaJudge?.(i) ?? bad("no criteria judge"),
      ),
      askUser: fromPromise(async ({ input: i }: { input: AskInput }) => {
        asks.push(i);
        return script.answer === undefined ? { timedOut: "no answer within 1 s" } : { answer: script.answer };
      }),
      runWorker: fromPromise(async ({ input: i }: { input: WorkerInput }) => (workers.push(i), script.worker(i))),
      runJudge: fromPromise(async ({ input: i }: { input: JudgeInput }) => script.judge(i)),
    },
  });
  const actor = createActor(machine, { input: { path: "0", env: rootEnv({}), ...input } });
  const done = toPromise(actor);
  actor.start().send(START);
  const output = await done;
  return { output, progress, workers, intakes, asks, state: actor.getSnapshot().value };
}

describe("checkmate machine", () => {
  it("passes on iteration 1 with given criteria, skipping the intake", async () => {
    const { output, state, progress, intakes } = await run({
      criteria: "- rhymes",
      worker: () => ok("a poem"),
      judge: () => verdict("PASS", 90),
    });
    expect(state).toBe("passed");
    expect(output).toMatchObject({
      status: "COMPLETE",
      content: "a poem",
      notes: { termination_reason: "judge_pass", criteria_source: "given", iterations_completed: 1 },
    });
    expect(intakes).toEqual([]);
    expect(progress.filter((p) => p.event === "checkmate.iteration").map((p) => p.message)).toEqual(["[checkmate: iteration 1/5]"]);
  });

  it("feeds the previous attempt and every gap forward", async () => {
    const { output, workers } = await run({
      criteria: "c",
      worker: (i) => ok(`attempt ${i.iteration}`),
      judge: (i) => (i.iteration < 3 ? verdict("FAIL", 10 * i.iteration, `gap ${i.iteration}`) : verdict("PASS", 99)),
    });
    expect(output).toMatchObject({ status: "COMPLETE", content: "attempt 3" });
    expect(workers[0]).not.toHaveProperty("previous");
    expect(workers[2]).toMatchObject({
      previous: "attempt 2",
      gaps: [
        { iteration: 1, gapSummary: "gap 1" },
        { iteration: 2, gapSummary: "gap 2" },
      ],
    });
  });

  it("ends exhausted with the best attempt by typed score (ties: the later one)", async () => {
    const scores = [40, 80, 80, 20];
    const { output, state } = await run(
      { criteria: "c", worker: (i) => ok(`attempt ${i.iteration}`), judge: (i) => verdict("FAIL", scores[i.iteration - 1] ?? 0, "more") },
      { maxIterations: 4 },
    );
    expect(state).toBe("exhausted");
    expect(output).toMatchObject({
      status: "FAILED",
      content: "attempt 3",
      notes: { best_iteration: 3, final_verdict: { score: 20 } },
      error: { reason: "execution_halted" },
    });
  });

  it("never picks an unparsed verdict as the best attempt", async () => {
    const { output } = await run(
      {
        criteria: "c",
        worker: (i) => ok(`attempt ${i.iteration}`),
        judge: (i) => (i.iteration === 1 ? verdict("FAIL", 5) : ok("garbage")),
      },
      { maxIterations: 2 },
    );
    expect(output).toMatchObject({ content: "attempt 1", notes: { best_iteration: 1 } });
  });

  it("records a worker failure as a failed iteration without a judge call", async () => {
    let judged = 0;
    const { output, progress } = await run({
      criteria: "c",
      worker: (i) => (i.iteration === 1 ? bad("boom") : ok("fine")),
      judge: () => (judged++, verdict("PASS", 70)),
    });
    expect(judged).toBe(1);
    expect(output.notes["iteration_history"]).toMatchObject([
      { iteration: 1, workerError: { message: "boom" } },
      { iteration: 2, output: "fine" },
    ]);
    expect(progress.find((p) => p.event === "checkmate.worker_error")?.message).toBe("[checkmate: iteration 1/5] worker failed: boom");
  });

  it("fails the loop when the worker was halted (a spent budget, a cancellation)", async () => {
    const { output, state } = await run({
      criteria: "c",
      worker: () => bad("cancelled", "execution_halted"),
      judge: () => verdict("PASS", 1),
    });
    expect(state).toBe("failed");
    expect(output.error).toMatchObject({ reason: "execution_halted" });
  });

  it("asks the user on [NEEDS_CLARIFICATION] and gives the answer to the next intake", async () => {
    const { output, intakes, asks } = await run({
      answer: "in French",
      intake: (i) =>
        ok(i.clarifications.length === 0 ? "[NEEDS_CLARIFICATION]\n1. Which language?" : "## Must Pass (blocking)\n- [ ] French"),
      worker: () => ok("un poème"),
      judge: () => verdict("PASS", 80),
    });
    expect(output).toMatchObject({
      status: "COMPLETE",
      notes: { criteria_source: "intake", criteria: "## Must Pass (blocking)\n- [ ] French" },
    });
    expect(intakes[1]?.clarifications).toEqual([{ questions: "1. Which language?", answer: "in French" }]);
    expect(asks).toEqual([{ path: "0", gate: "clarification", request: { question: "1. Which language?" } }]);
  });

  it("fails with execution_timeout when no answer comes", async () => {
    const { output } = await run({
      intake: () => ok("[NEEDS_CLARIFICATION] why?"),
      worker: () => ok("x"),
      judge: () => verdict("PASS", 1),
    });
    expect(output.error).toMatchObject({ reason: "execution_timeout", message: "no answer within 1 s" });
  });

  it("bounds the criteria judge in rounds, then goes on with the last draft", async () => {
    let rounds = 0;
    const { output, progress, intakes } = await run(
      {
        intake: (i) => ok(`draft ${i.round}`),
        criteriaJudge: () => (rounds++, ok("**Result:** NEEDS_WORK\n## Issues\nvague")),
        worker: () => ok("x"),
        judge: () => verdict("PASS", 1),
      },
      { criteriaJudge: true, maxIntakeRounds: 2 },
    );
    expect(rounds).toBe(2);
    expect(intakes[1]).toMatchObject({ feedback: "**Result:** NEEDS_WORK\n## Issues\nvague", previousDraft: "draft 1" });
    expect(output.notes).toMatchObject({ criteria: "draft 2", criteria_approved: false });
    expect(progress.some((p) => p.event === "checkmate.criteria" && p.message.includes("not approved"))).toBe(true);
  });
});

describe("checkmate helpers", () => {
  it("reads clarification questions and criteria approvals", () => {
    expect(clarificationQuestions("[NEEDS_CLARIFICATION]\n1. Who?")).toBe("1. Who?");
    expect(clarificationQuestions("# Acceptance Criteria")).toBeUndefined();
    expect(criteriaApproved("**Result:** APPROVED")).toBe(true);
    expect(criteriaApproved("**Result:** NEEDS_WORK (not APPROVED)")).toBe(false);
  });

  it("picks the last attempt with an output when no verdict parsed", () => {
    expect(
      bestAttempt([
        { iteration: 1, output: "a" },
        { iteration: 2, workerError: { type: "TASK_FAILURE", reason: "model_error", message: "x" } },
      ])?.iteration,
    ).toBe(1);
    expect(bestAttempt([])).toBeUndefined();
  });
});

describe("checkmate's pure steps (checkmate.ts, checkmate-gates.ts): what the named actions write", () => {
  const context = (extra: Partial<CheckmateContext> = {}): CheckmateContext => ({
    path: "0",
    env: rootEnv({}),
    maxIterations: 3,
    maxIntakeRounds: 3,
    maxClarifications: 2,
    task: "write a poem",
    criteria: "- rhymes",
    intakeCalls: 0,
    intakeRounds: 0,
    clarifications: [],
    iteration: 2,
    attempts: [{ iteration: 1, output: "first" }],
    gaps: [],
    interactive: false,
    gates: [],
    directions: [],
    ...extra,
  });

  it("feeds the worker the last output and every gap, and the judge the last attempt", () => {
    const c = context({
      attempts: [
        { iteration: 1, output: "first" },
        { iteration: 2, output: "second" },
      ],
      gaps: [{ iteration: 1, gapSummary: "no rhyme" }],
    });
    expect(workerInput(c)).toMatchObject({
      iteration: 2,
      maxIterations: 3,
      previous: "second",
      gaps: [{ iteration: 1, gapSummary: "no rhyme" }],
    });
    expect(workerInput(context({ attempts: [] }))).not.toHaveProperty("previous");
    expect(judgeInput(c)).toMatchObject({ output: "second", iteration: 2 });
    expect(judgeInput(c)).not.toHaveProperty("gaps");
  });

  it("records a FAIL verdict with its gap, and a PASS without one", () => {
    const failed = withVerdict(context(), JSON.stringify({ result: "FAIL", score: 40, criteria: [], gapSummary: " no rhyme " }));
    expect(failed.attempts?.at(-1)).toMatchObject({ iteration: 2, output: "first", verdict: { result: "FAIL", score: 40, parsed: true } });
    expect(failed.gaps).toEqual([{ iteration: 2, gapSummary: "no rhyme" }]);
    expect(withVerdict(context(), JSON.stringify({ result: "PASS", score: 90, criteria: [], gapSummary: "" })).gaps).toEqual([]);
  });

  it("counts a failing judge as an unparsed FAIL with a note, keeping its error", () => {
    const error = { type: "TASK_FAILURE" as const, reason: "model_error" as const, message: "down" };
    expect(withJudgeError(context(), error).attempts?.at(-1)).toMatchObject({
      verdict: { result: "FAIL", score: 0, parsed: false, note: "the judge failed (down); counted as FAIL" },
      judgeError: error,
    });
  });

  it("fails on spent clarification rounds only when the intake still asks", () => {
    const asks = ok("[NEEDS_CLARIFICATION] which metre?");
    const answered = [
      { questions: "q", answer: "a" },
      { questions: "q", answer: "a" },
    ];
    expect(clarificationsSpent(context({ clarifications: answered }), asks)).toBe(true);
    expect(clarificationsSpent(context({ clarifications: answered.slice(1) }), asks)).toBe(false);
    expect(clarificationsSpent(context({ clarifications: answered }), ok("- rhymes"))).toBe(false);
    expect(withClarification(context({ questions: "which metre?" }), { answer: "iambic" })).toEqual({
      clarifications: [{ questions: "which metre?", answer: "iambic" }],
      questions: undefined,
    });
  });

  it("keeps a worker or judge error that ends the loop, with the history", () => {
    const error = { type: "RESOURCE_EXHAUSTION" as const, resource: "budget" as const, message: "spent" };
    expect(roleFailure(context(), "worker", error)).toMatchObject({
      status: "FAILED",
      error,
      notes: { iteration_history: [{ iteration: 1, output: "first" }] },
    });
    expect(roleFailure(context(), "judge", undefined).error).toMatchObject({ type: "TASK_FAILURE", message: "judge failed" });
  });
});
