/**
 * The checkmate judge loop (seed 001, the checkmate skill): intake → worker → judge until PASS or max iterations.
 *
 * preparing → intake? (→ awaitingInput on `[NEEDS_CLARIFICATION]` → intake …) → judgingCriteria? (→ intake …) →
 * working → judging → deciding → working … → passed | exhausted | failed.
 * - Criteria come from the task (`<criteria>`), else from an intake model call. An intake answer containing
 *   `[NEEDS_CLARIFICATION]` makes the task wait for the user's answer (`continuation.input`, the task's visible
 *   `awaiting_input` state); the questions are never locked in as criteria. An optional criteria judge approves the
 *   draft (`APPROVED`/`NEEDS_WORK`), bounded by `maxIntakeRounds`; unapproved after the last round, the last draft
 *   is used and a `checkmate.criteria` event says so.
 * - Each iteration publishes `[checkmate: iteration n/max]` (`checkmate.iteration`). The worker sees the task, the
 *   criteria, the previous attempt and every gap summary so far; the judge's answer is a typed verdict
 *   (protocol/checkmate.ts); one that does not parse counts as FAIL with a note.
 * - A worker that fails (model error after the client's retries, timeout) makes a *failed iteration*: it is
 *   recorded with its error, reported as `checkmate.worker_error`, and uses up its iteration; the judge does not
 *   run. A failing judge counts as a FAIL verdict with a note (`checkmate.judge_error`). A spent task budget fails
 *   the loop.
 * - PASS ends in `passed` (COMPLETE, the output). After the last iteration the loop ends in `exhausted`, like the
 *   static director–evaluator loop: FAILED `execution_halted` whose content is the best attempt, chosen by the
 *   highest typed score among parsed verdicts (ties: the later one), with the final judge report in the notes.
 * Effects: `prepare`, `runIntake`, `runCriteriaJudge`, `waitForInput`, `runWorker`, `runJudge` and `progress`.
 */
import { assign, fromPromise, setup } from "xstate";
import type { TaskError, TaskResult } from "../../protocol/index.js";
import {
  CHECKMATE_DEFAULTS,
  clarificationQuestions,
  criteriaApproved,
  failure,
  fatal,
  tag,
  thrown,
  type CheckmateContext,
  type CheckmateInput,
  type CriteriaJudgeInput,
  type IntakeInput,
  type JudgeInput,
  type Prepared,
  type WorkerInput,
} from "./checkmate-types.js";
import {
  checkmateOutput,
  clarificationsSpent,
  clarificationsSpentFailure,
  criteriaFeedback,
  criteriaProgress,
  exhaustedProgress,
  inputProgress,
  intakeFailure,
  preparedFailure,
  preparedTask,
  roleFailure,
  verdictProgress,
  withAttempt,
  withClarification,
  withJudgeError,
  withVerdict,
  withWorkerError,
  workerErrorProgress,
  judgeInput,
  workerInput,
} from "./checkmate-rules.js";
import type { InputWaitInput } from "./continuation.js";
import { errorOf, outputOf } from "../invoke-events.js";
import type { Env } from "../language/env.js";
import { notProvided } from "../not-provided.js";
import type { ProgressParams } from "./sequential.js";

export * from "./checkmate-types.js";
export * from "./checkmate-rules.js";

type Ctx = { context: CheckmateContext };
/** The effect's result, from its done event. */
const result = (e: { event: { type: string; output?: unknown } }) => outputOf<TaskResult>(e.event);
/** The effect's thrown error, as a task error. */
const threw = (e: { event: { type: string; error?: unknown } }) => thrown(errorOf(e.event));
/** A `progress` action whose params are built from the context. */
const progress = (params: (context: CheckmateContext) => ProgressParams) => ({
  type: "progress" as const,
  params: ({ context }: Ctx) => params(context),
});

/** The checkmate machine. Output: the passing output, the exhaustion with the best attempt, or the failure. */
export const checkmateMachine = setup({
  types: {
    input: {} as CheckmateInput,
    context: {} as CheckmateContext,
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
    storePreparedTask: assign(({ event }) => preparedTask(outputOf<Prepared>(event))),
    failPreparation: assign({ result: ({ event }) => preparedFailure(outputOf<Prepared>(event)) }),
    failPreparationThrew: assign({ result: (e) => failure("unexpected_error", threw(e).message) }),
    markCriteriaGiven: assign({ criteriaSource: "given" }),
    countIntakeCall: assign({ intakeCalls: ({ context }) => context.intakeCalls + 1 }),
    failIntake: assign({ result: (e) => intakeFailure(result(e)) }),
    failIntakeThrew: assign({ result: (e) => failure("subtask_failure", `intake failed: ${threw(e).message}`) }),
    failClarificationsSpent: assign({ result: ({ context }) => clarificationsSpentFailure(context) }),
    storeQuestions: assign({ questions: (e) => clarificationQuestions(result(e).content) }),
    storeIntakeCriteria: assign({ criteria: (e) => result(e).content.trim(), criteriaSource: "intake" }),
    recordClarification: assign(({ context, event }) => withClarification(context, outputOf<string>(event))),
    failInputTimeout: assign({ result: (e) => failure("execution_timeout", threw(e).message, { questions: e.context.questions }) }),
    countCriteriaRound: assign({ intakeRounds: ({ context }) => context.intakeRounds + 1 }),
    approveCriteria: assign({ criteriaApproved: true }),
    keepUnapprovedCriteria: assign({ criteriaApproved: false }),
    storeCriteriaFeedback: assign({ criteriaFeedback: (e) => criteriaFeedback(result(e)) }),
    failCriteriaJudgeThrew: assign({ result: (e) => failure("subtask_failure", `criteria judge failed: ${threw(e).message}`) }),
    recordAttempt: assign(({ context, event }) => withAttempt(context, outputOf<TaskResult>(event).content)),
    failWorker: assign({ result: (e) => roleFailure(e.context, "worker", result(e).error) }),
    recordWorkerError: assign(({ context, event }) => withWorkerError(context, errorOrDefault(outputOf<TaskResult>(event).error))),
    recordWorkerThrew: assign(({ context, event }) => withWorkerError(context, thrown(errorOf(event)))),
    recordVerdict: assign(({ context, event }) => withVerdict(context, outputOf<TaskResult>(event).content)),
    failJudge: assign({ result: (e) => roleFailure(e.context, "judge", result(e).error) }),
    recordJudgeError: assign(({ context, event }) => withJudgeError(context, outputOf<TaskResult>(event).error)),
    failJudgeThrew: assign({ result: (e) => failure("unexpected_error", `judge failed: ${threw(e).message}`) }),
    nextIteration: assign({ iteration: ({ context }) => context.iteration + 1 }),
  },
  actors: {
    prepare: fromPromise<Prepared, { path: string; env: Env }>(async () => notProvided("checkmate.prepare")),
    runIntake: fromPromise<TaskResult, IntakeInput>(async () => notProvided("checkmate.runIntake")),
    runCriteriaJudge: fromPromise<TaskResult, CriteriaJudgeInput>(async () => notProvided("checkmate.runCriteriaJudge")),
    waitForInput: fromPromise<string, InputWaitInput>(async () => notProvided("checkmate.waitForInput")),
    runWorker: fromPromise<TaskResult, WorkerInput>(async () => notProvided("checkmate.runWorker")),
    runJudge: fromPromise<TaskResult, JudgeInput>(async () => notProvided("checkmate.runJudge")),
  },
  guards: {
    criteriaGiven: ({ context }) => context.criteria.trim() !== "",
    judgeCriteria: ({ context }) => context.criteriaJudge === true,
    passed: ({ context }) => context.attempts.at(-1)?.verdict?.result === "PASS",
    exhausted: ({ context }) => context.iteration >= context.maxIterations,
    preparationFailed: ({ event }) => preparedFailure(outputOf<Prepared>(event)) !== undefined,
    effectFailed: (e) => result(e).status !== "COMPLETE",
    effectComplete: (e) => result(e).status === "COMPLETE",
    failureIsFatal: (e) => fatal(result(e).error),
    clarificationsSpent: (e) => clarificationsSpent(e.context, result(e)),
    asksClarification: (e) => clarificationQuestions(result(e).content) !== undefined,
    criteriaApproved: (e) => result(e).status === "COMPLETE" && criteriaApproved(result(e).content),
    intakeRoundsLeft: ({ context }) => context.intakeRounds < context.maxIntakeRounds,
  },
}).createMachine({
  id: "checkmate",
  context: ({ input }) => ({
    ...input,
    maxIterations: input.maxIterations ?? CHECKMATE_DEFAULTS.maxIterations,
    maxIntakeRounds: input.maxIntakeRounds ?? CHECKMATE_DEFAULTS.maxIntakeRounds,
    maxClarifications: input.maxClarifications ?? CHECKMATE_DEFAULTS.maxClarifications,
    task: "",
    criteria: "",
    intakeCalls: 0,
    intakeRounds: 0,
    clarifications: [],
    iteration: 1,
    attempts: [],
    gaps: [],
  }),
  initial: "preparing",
  states: {
    preparing: {
      description: "The task text and any given criteria, substituted.",
      invoke: {
        src: "prepare",
        input: ({ context }) => ({ path: context.path, env: context.env }),
        onDone: [
          { guard: "preparationFailed", target: "failed", actions: "failPreparation" },
          { target: "routingIntake", actions: "storePreparedTask" },
        ],
        onError: { target: "failed", actions: "failPreparationThrew" },
      },
    },
    routingIntake: {
      description: "Criteria given with the task skip the intake.",
      always: [
        {
          guard: "criteriaGiven",
          target: "working",
          actions: ["markCriteriaGiven", progress((c) => criteriaProgress(c, "criteria given with the task"))],
        },
        { target: "intake" },
      ],
    },
    intake: {
      description: "The intake turns the task into acceptance criteria, or asks the user questions ([NEEDS_CLARIFICATION]).",
      entry: [
        "countIntakeCall",
        progress((c) => ({
          event: "checkmate.intake",
          message: `checkmate: intake (call ${c.intakeCalls})`,
          data: { nodePath: c.path, call: c.intakeCalls },
        })),
      ],
      invoke: {
        src: "runIntake",
        input: ({ context }) => ({
          path: context.path,
          env: context.env,
          task: context.task,
          round: context.intakeCalls,
          clarifications: context.clarifications,
          ...(context.criteriaFeedback === undefined ? {} : { feedback: context.criteriaFeedback, previousDraft: context.criteria }),
        }),
        onDone: [
          { guard: "effectFailed", target: "failed", actions: "failIntake" },
          { guard: "clarificationsSpent", target: "failed", actions: "failClarificationsSpent" },
          { guard: "asksClarification", target: "awaitingInput", actions: "storeQuestions" },
          { guard: "judgeCriteria", target: "judgingCriteria", actions: "storeIntakeCriteria" },
          { target: "working", actions: ["storeIntakeCriteria", progress((c) => criteriaProgress(c, "criteria written by the intake"))] },
        ],
        onError: { target: "failed", actions: "failIntakeThrew" },
      },
    },
    awaitingInput: {
      description: "The intake asked questions; the task waits for the user's answer on its input subject (awaiting_input).",
      entry: progress(inputProgress),
      invoke: {
        src: "waitForInput",
        input: ({ context }) => ({ path: context.path, request: { question: context.questions ?? "" } }),
        onDone: {
          target: "intake",
          actions: [
            "recordClarification",
            progress((c) => ({ event: "continuation.resumed", message: "resumed after input", data: { nodePath: c.path } })),
          ],
        },
        onError: { target: "failed", actions: "failInputTimeout" },
      },
    },
    judgingCriteria: {
      description: "The criteria judge approves the draft, or sends it back to the intake with its feedback (bounded in rounds).",
      entry: "countCriteriaRound",
      invoke: {
        src: "runCriteriaJudge",
        input: ({ context }) => ({
          path: context.path,
          env: context.env,
          task: context.task,
          criteria: context.criteria,
          round: context.intakeRounds,
        }),
        onDone: [
          {
            guard: "criteriaApproved",
            target: "working",
            actions: ["approveCriteria", progress((c) => criteriaProgress(c, `criteria approved in round ${c.intakeRounds}`, true))],
          },
          { guard: "intakeRoundsLeft", target: "intake", actions: "storeCriteriaFeedback" },
          {
            target: "working",
            actions: [
              "keepUnapprovedCriteria",
              progress((c) =>
                criteriaProgress(c, `criteria not approved after ${c.maxIntakeRounds} rounds; going on with the last draft`, false),
              ),
            ],
          },
        ],
        onError: { target: "failed", actions: "failCriteriaJudgeThrew" },
      },
    },
    working: {
      description: "[checkmate: iteration n/max]: the worker produces an attempt from the task, criteria, previous attempt and all gaps.",
      entry: progress((c) => ({
        event: "checkmate.iteration",
        message: tag(c),
        data: { nodePath: c.path, iteration: c.iteration, maxIterations: c.maxIterations },
      })),
      invoke: {
        src: "runWorker",
        input: ({ context }) => workerInput(context),
        onDone: [
          { guard: "effectComplete", target: "judging", actions: "recordAttempt" },
          { guard: "failureIsFatal", target: "failed", actions: "failWorker" },
          { target: "workerFailed", actions: "recordWorkerError" },
        ],
        onError: { target: "workerFailed", actions: "recordWorkerThrew" },
      },
    },
    workerFailed: {
      description: "The worker failed: a failed iteration, recorded with its error; the judge does not run.",
      entry: progress(workerErrorProgress),
      always: { target: "deciding" },
    },
    judging: {
      description: "The judge returns a typed verdict on the attempt; an unparseable one, or a failing judge, counts as FAIL with a note.",
      invoke: {
        src: "runJudge",
        input: ({ context }) => judgeInput(context),
        onDone: [
          { guard: "effectComplete", target: "deciding", actions: "recordVerdict" },
          { guard: "failureIsFatal", target: "failed", actions: "failJudge" },
          {
            target: "deciding",
            actions: [
              "recordJudgeError",
              progress((c) => ({
                event: "checkmate.judge_error",
                message: `${tag(c)} judge failed: ${c.attempts.at(-1)?.judgeError?.message ?? ""}`,
                data: { nodePath: c.path, iteration: c.iteration },
              })),
            ],
          },
        ],
        onError: { target: "failed", actions: "failJudgeThrew" },
      },
    },
    deciding: {
      description: "PASS ends the loop; after the last iteration it is exhausted; else the next iteration.",
      entry: progress(verdictProgress),
      always: [
        { guard: "passed", target: "passed" },
        { guard: "exhausted", target: "exhausted", actions: progress(exhaustedProgress) },
        { target: "working", actions: "nextIteration" },
      ],
    },
    passed: { description: "The judge's verdict is PASS: the output is delivered.", type: "final" },
    exhausted: { description: "Max iterations without PASS: the best attempt by score, with the final judge report.", type: "final" },
    failed: { description: "Preparation, intake or clarification failed, or the task's budget ran out.", type: "final" },
  },
  output: ({ context }) => checkmateOutput(context),
});

/** A failed result's error, or a stand-in when the worker failed without one. */
function errorOrDefault(error: TaskError | undefined): TaskError {
  return error ?? thrown("the worker failed without an error");
}
