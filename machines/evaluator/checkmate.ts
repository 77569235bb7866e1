/**
 * The checkmate judge loop: a worker's output is checked against acceptance criteria by a separate judge, so the model
 * that did the work never grades it. intake → worker → judge until PASS or max iterations.
 *
 * idle → preparing → intake? (→ awaitingInput on `[NEEDS_CLARIFICATION]` → intake …) → judgingCriteria | reviewingCriteria?
 * (→ intake …) → startGate? → working → judging → deciding → checkpoint? → working … → passed | exhausted | stopped | failed.
 * - Criteria come from the task (`<criteria>`), else from an intake model call. An intake answer containing
 *   `[NEEDS_CLARIFICATION]` makes the task wait for the user's answer (`continuation.input`, the task's visible
 *   `awaiting_input` state); the questions are never locked in as criteria. An optional criteria judge approves the
 *   draft (`APPROVED`/`NEEDS_WORK`), bounded by `maxIntakeRounds`; unapproved after the last round, the last draft
 *   is used and a `checkmate.criteria` event says so.
 * - Human gates (`interactive`, set from the node by `prepare`), each a question the task waits on like the intake's
 *   (`askUser`), each with a default when no answer comes in time: the user approves the intake's criteria or says
 *   what to change (instead of the criteria judge; default: approve); before the first worker, go / cancel / edit:
 *   <new criteria> (default: go); after a FAIL verdict before the last iteration, continue / redirect: <guidance
 *   for the next workers> / stop (default: continue; stop delivers the best attempt so far).
 * - Each iteration publishes `[checkmate: iteration n/max]` (`checkmate.iteration`). The worker sees the task, the
 *   criteria, the previous attempt, every gap summary and the user's directions so far; the judge's answer is a
 *   typed verdict (protocol/checkmate.ts); one that does not parse counts as FAIL with a note.
 * - A worker that fails (model error after the client's retries, timeout) makes a *failed iteration*: it is
 *   recorded with its error, reported as `checkmate.worker_error`, and uses up its iteration; the judge does not
 *   run. A failing judge counts as a FAIL verdict with a note (`checkmate.judge_error`). A spent task budget fails
 *   the loop.
 * - PASS ends in `passed` (COMPLETE, the output). After the last iteration the loop ends in `exhausted`, like the
 *   static director–evaluator loop: FAILED `execution_halted` whose content is the best attempt, chosen by the
 *   highest typed score among parsed verdicts (ties: the later one), with the final judge report in the notes.
 * Effects: `prepare`, `runIntake`, `runCriteriaJudge`, `askUser`, `runWorker`, `runJudge` and `progress`.
 */
import { assign, fromPromise, setup } from "xstate";
import { thrownError, verdictOf, type StoredVerdict, type TaskError, type TaskResult } from "../../protocol/index.js";
import {
  bestAttempt,
  CHECKMATE_DEFAULTS,
  history,
  clarificationQuestions,
  criteriaApproved,
  failure,
  fatal,
  tag,
  type AskInput,
  type AskReply,
  type CheckmateContext,
  type GateKind,
  type CheckmateInput,
  type CriteriaJudgeInput,
  type IntakeInput,
  type JudgeInput,
  type Prepared,
  type WorkerInput,
} from "./checkmate-context.js";
import {
  checkpointChoice,
  criteriaChoice,
  gateProgress,
  gateRequest,
  startChoice,
  timedOut,
  withCheckpoint,
  withClarification,
  withCriteriaReview,
  withStartGate,
} from "./checkmate-gates.js";
import { errorOf, outputOf, type StartEvent, idleUntilStarted } from "../invoke-events.js";
import type { Env } from "../language/env.js";
import { notProvided } from "../not-provided.js";
import type { ProgressParams } from "./sequential.js";
import type { Scoped } from "./evaluation-context.js";

export * from "./checkmate-context.js";
export * from "./checkmate-gates.js";

/** True when the intake's answer asks for clarification and the rounds of answers are spent. */
export function clarificationsSpent(context: CheckmateContext, output: TaskResult): boolean {
  return clarificationQuestions(output.content) !== undefined && context.clarifications.length >= context.maxClarifications;
}

/** The task and its criteria, from the preparation (nothing when it failed). */
export function preparedTask(prepared: Prepared): Partial<CheckmateContext> {
  if (!("task" in prepared)) return {};
  const { task, criteria, interactive, gateTimeoutS } = prepared;
  return { task, criteria: criteria ?? "", interactive: interactive === true, ...(gateTimeoutS === undefined ? {} : { gateTimeoutS }) };
}

/** A failed result's error, or a stand-in when the worker failed without one. */
export function errorOrDefault(error: TaskError | undefined): TaskError {
  return error ?? thrownError("the worker failed without an error");
}

/** The failure of a preparation that returned one. */
export function preparedFailure(prepared: Prepared): TaskResult | undefined {
  return "result" in prepared ? prepared.result : undefined;
}

/** The intake returned a failure. */
export function intakeFailure(output: TaskResult): TaskResult {
  return failure("subtask_failure", `intake failed: ${output.error?.message ?? "no result"}`, {}, output.error);
}

/** The intake still asks questions after the last round of answers. */
export function clarificationsSpentFailure(context: CheckmateContext): TaskResult {
  const message = `the intake still needs clarification after ${context.maxClarifications} rounds of answers`;
  return failure("execution_halted", message, { clarifications: context.clarifications });
}

/** The criteria judge's feedback for the next intake round (its error when it failed). */
export function criteriaFeedback(output: TaskResult): string {
  return output.status === "COMPLETE" ? output.content : `the criteria judge failed: ${output.error?.message ?? ""}`;
}

/** What `runWorker` is given besides path and env: the task, criteria, previous output, every gap and the user's directions. */
export function workerInput(context: CheckmateContext) {
  const previous = context.attempts.findLast((a) => a.output !== undefined)?.output;
  const { scopeKey, path, env, task, criteria, iteration, maxIterations, gaps, directions } = context;
  return {
    scopeKey,
    path,
    env,
    task,
    criteria,
    iteration,
    maxIterations,
    ...(previous === undefined ? {} : { previous }),
    gaps,
    directions,
  };
}

/** What `runJudge` is given: the task, criteria and the last attempt's output. */
export function judgeInput(context: CheckmateContext) {
  const { scopeKey, path, env, task, criteria, iteration, maxIterations } = context;
  return { scopeKey, path, env, task, criteria, iteration, maxIterations, output: context.attempts.at(-1)?.output ?? "" };
}

/** The worker's output, recorded as this iteration's attempt. */
export function withAttempt(context: CheckmateContext, output: string): Partial<CheckmateContext> {
  return { attempts: [...context.attempts, { iteration: context.iteration, output }] };
}

/** The worker's error, recorded as this iteration's failed attempt. */
export function withWorkerError(context: CheckmateContext, error: TaskError): Partial<CheckmateContext> {
  return { attempts: [...context.attempts, { iteration: context.iteration, workerError: error }] };
}

/** A worker or judge failure that ends the loop (a spent budget, a cancel), with the iteration history. */
export function roleFailure(context: CheckmateContext, role: "worker" | "judge", error: TaskError | undefined): TaskResult {
  const result = failure("subtask_failure", `${tag(context)} ${role} failed: ${error?.message ?? ""}`, {
    iteration_history: history(context),
  });
  return { ...result, error: error ?? thrownError(`${role} failed`) };
}

/** The judge's typed verdict on the last attempt, and its gap summary when it is a FAIL. */
export function withVerdict(context: CheckmateContext, content: string): Partial<CheckmateContext> {
  const verdict = verdictOf(content);
  const attempts = [...context.attempts.slice(0, -1), { ...context.attempts.at(-1), iteration: context.iteration, verdict }];
  const gap = verdict.result === "FAIL" ? verdict.gapSummary.trim() : "";
  return { attempts, gaps: gap === "" ? context.gaps : [...context.gaps, { iteration: context.iteration, gapSummary: gap }] };
}

/** A failing judge counts as a FAIL verdict with a note, and its error is kept on the attempt. */
export function withJudgeError(context: CheckmateContext, error: TaskError | undefined): Partial<CheckmateContext> {
  const judgeError = error ?? thrownError("the judge failed without an error");
  const note = `the judge failed (${judgeError.message}); counted as FAIL`;
  const verdict: StoredVerdict = { result: "FAIL", score: 0, criteria: [], gapSummary: "", parsed: false, note };
  return {
    attempts: [...context.attempts.slice(0, -1), { ...context.attempts.at(-1), iteration: context.iteration, verdict, judgeError }],
  };
}

/** `checkmate.criteria`: where the criteria came from, and whether the criteria judge approved them. */
export function criteriaProgress(context: CheckmateContext, message: string, approved?: boolean): ProgressParams {
  const source = context.criteriaSource ?? "intake";
  const data = {
    nodePath: context.path,
    source,
    ...(approved === undefined ? {} : { approved }),
    ...(source === "intake" ? { criteria: context.criteria } : {}),
  };
  return { event: "checkmate.criteria", message, data };
}

/** `checkmate.intake`: an intake call starts. */
export function intakeProgress(context: CheckmateContext): ProgressParams {
  const call = context.intakeCalls;
  return { event: "checkmate.intake", message: `checkmate: intake (call ${call})`, data: { nodePath: context.path, call } };
}

/** `checkmate.judge_error`: the judge failed; the iteration counts as FAIL. */
export function judgeErrorProgress(context: CheckmateContext): ProgressParams {
  const message = `${tag(context)} judge failed: ${context.attempts.at(-1)?.judgeError?.message ?? ""}`;
  return { event: "checkmate.judge_error", message, data: { nodePath: context.path, iteration: context.iteration } };
}

/** `checkmate.criteria`: the criteria judge or the user did not approve the last draft, which the loop goes on with. */
export function criteriaUnapprovedProgress(context: CheckmateContext): ProgressParams {
  return criteriaProgress(context, `criteria not approved after ${context.maxIntakeRounds} rounds; going on with the last draft`, false);
}

/** `checkmate.worker_error`: the failed iteration's error. */
export function workerErrorProgress(context: CheckmateContext): ProgressParams {
  const error = context.attempts.at(-1)?.workerError;
  return {
    event: "checkmate.worker_error",
    message: `${tag(context)} worker failed: ${error?.message ?? ""}`,
    data: { nodePath: context.path, iteration: context.iteration, error },
  };
}

/** `checkmate.verdict`: the iteration's verdict and score, or that it failed. */
export function verdictProgress(context: CheckmateContext): ProgressParams {
  const v = context.attempts.at(-1)?.verdict;
  const message = v ? `${tag(context)} ${v.result} score ${v.score}${v.note ? ` (${v.note})` : ""}` : `${tag(context)} failed iteration`;
  const verdict = v ? { result: v.result, score: v.score, parsed: v.parsed } : { result: "ERROR" };
  return { event: "checkmate.verdict", message, data: { nodePath: context.path, iteration: context.iteration, ...verdict } };
}

/** `checkmate.exhausted`: the best attempt delivered with the final judge report. */
export function exhaustedProgress(context: CheckmateContext): ProgressParams {
  const best = bestAttempt(context.attempts)?.iteration;
  const message = `checkmate: max iterations reached. Delivering best attempt (iteration ${best ?? "none"}) + final judge report.`;
  return { event: "checkmate.exhausted", message, data: { nodePath: context.path, bestIteration: best ?? null } };
}

/** The loop's result once it stopped without a failure: the passing output, or the best attempt when exhausted. */
export function checkmateOutput(context: CheckmateContext): TaskResult {
  if (context.result) return context.result;
  const last = context.attempts.at(-1);
  const notes = {
    criteria: context.criteria,
    criteria_source: context.criteriaSource ?? null,
    ...(context.criteriaApproved === undefined ? {} : { criteria_approved: context.criteriaApproved }),
    ...(context.clarifications.length > 0 ? { clarifications: context.clarifications } : {}),
    ...(context.gates.length > 0 ? { gates: context.gates } : {}),
    ...(context.directions.length > 0 ? { directions: context.directions } : {}),
    iteration_history: history(context),
    iterations_completed: context.attempts.length,
    final_verdict: context.attempts.findLast((a) => a.verdict)?.verdict ?? null,
  };
  if (last?.verdict?.result === "PASS")
    return { content: last.output ?? "", status: "COMPLETE", notes: { ...notes, termination_reason: "judge_pass" } };
  const best = bestAttempt(context.attempts);
  const bestNote = best ? `; best attempt: iteration ${best.iteration}` : "; no iteration produced an output";
  const message = context.stopped
    ? `checkmate stopped by the user after iteration ${context.iteration}${bestNote}`
    : `checkmate reached max iterations (${context.maxIterations}) without a PASS${bestNote}`;
  return {
    content: best?.output ?? "",
    status: "FAILED",
    notes: {
      ...notes,
      termination_reason: context.stopped ? "user_stopped" : "max_iterations_reached",
      best_iteration: best?.iteration ?? null,
      best_verdict: best?.verdict ?? null,
    },
    error: { type: "TASK_FAILURE", reason: "execution_halted", message },
  };
}

type Ctx = { context: CheckmateContext };
/** The effect's result, from its done event. */
const result = (e: { event: { type: string; output?: unknown } }) => outputOf<TaskResult>(e.event);
/** The user's reply to a question, from `askUser`'s done event. */
const reply = (e: { event: { type: string; output?: unknown } }) => outputOf<AskReply>(e.event);
/** The effect's thrown error, as a task error. */
const threw = (e: { event: { type: string; error?: unknown } }) => thrownError(errorOf(e.event));
/** A `progress` action whose params are built from the context. */
const progress = (params: (context: CheckmateContext) => ProgressParams) => ({
  type: "progress" as const,
  params: ({ context }: Ctx) => params(context),
});

/** What `askUser` is given for a gate. */
const ask =
  (gate: GateKind) =>
  ({ context }: Ctx): AskInput => ({ scopeKey: context.scopeKey, path: context.path, gate, request: gateRequest(context, gate) });

/** The checkmate machine. Output: the passing output, the exhaustion with the best attempt, or the failure. */
export const checkmateMachine = setup({
  types: {
    input: {} as CheckmateInput,
    context: {} as CheckmateContext,
    events: {} as StartEvent,
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
    recordClarification: assign(({ context, event }) => withClarification(context, outputOf<AskReply>(event))),
    failInputTimeout: assign({ result: (e) => failure("execution_timeout", timedOut(reply(e)), { questions: e.context.questions }) }),
    failAskThrew: assign({ result: (e) => failure("unexpected_error", `waiting for the user's answer failed: ${threw(e).message}`) }),
    recordCriteriaReview: assign(({ context, event }) => withCriteriaReview(context, outputOf<AskReply>(event))),
    recordStartGate: assign(({ context, event }) => withStartGate(context, outputOf<AskReply>(event))),
    recordCheckpoint: assign(({ context, event }) => withCheckpoint(context, outputOf<AskReply>(event))),
    countCriteriaRound: assign({ intakeRounds: ({ context }) => context.intakeRounds + 1 }),
    approveCriteria: assign({ criteriaApproved: true }),
    keepUnapprovedCriteria: assign({ criteriaApproved: false }),
    storeCriteriaFeedback: assign({ criteriaFeedback: (e) => criteriaFeedback(result(e)) }),
    failCriteriaJudgeThrew: assign({ result: (e) => failure("subtask_failure", `criteria judge failed: ${threw(e).message}`) }),
    recordAttempt: assign(({ context, event }) => withAttempt(context, outputOf<TaskResult>(event).content)),
    failWorker: assign({ result: (e) => roleFailure(e.context, "worker", result(e).error) }),
    recordWorkerError: assign(({ context, event }) => withWorkerError(context, errorOrDefault(outputOf<TaskResult>(event).error))),
    recordWorkerThrew: assign(({ context, event }) => withWorkerError(context, thrownError(errorOf(event)))),
    recordVerdict: assign(({ context, event }) => withVerdict(context, outputOf<TaskResult>(event).content)),
    failJudge: assign({ result: (e) => roleFailure(e.context, "judge", result(e).error) }),
    recordJudgeError: assign(({ context, event }) => withJudgeError(context, outputOf<TaskResult>(event).error)),
    failJudgeThrew: assign({ result: (e) => failure("unexpected_error", `judge failed: ${threw(e).message}`) }),
    nextIteration: assign({ iteration: ({ context }) => context.iteration + 1 }),
  },
  actors: {
    prepare: fromPromise<Prepared, { path: string; env: Env } & Scoped>(async () => notProvided("checkmate.prepare")),
    runIntake: fromPromise<TaskResult, IntakeInput>(async () => notProvided("checkmate.runIntake")),
    runCriteriaJudge: fromPromise<TaskResult, CriteriaJudgeInput>(async () => notProvided("checkmate.runCriteriaJudge")),
    askUser: fromPromise<AskReply, AskInput>(async () => notProvided("checkmate.askUser")),
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
    interactive: ({ context }) => context.interactive,
    askTimedOut: (e) => "timedOut" in reply(e),
    userApprovesCriteria: (e) => criteriaChoice(reply(e)) === "approve",
    userCancels: (e) => startChoice(reply(e)) === "cancel",
    userStops: (e) => checkpointChoice(reply(e)) === "stop",
    checkpointDue: ({ context }) => context.interactive && context.attempts.at(-1)?.verdict?.result === "FAIL",
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
    interactive: false,
    gates: [],
    directions: [],
  }),
  initial: "idle",
  states: {
    idle: idleUntilStarted("preparing"),
    preparing: {
      description: "The task text and any given criteria, substituted.",
      invoke: {
        src: "prepare",
        input: ({ context }) => ({ path: context.path, env: context.env, scopeKey: context.scopeKey }),
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
          target: "routingStart",
          actions: ["markCriteriaGiven", progress((c) => criteriaProgress(c, "criteria given with the task"))],
        },
        { target: "intake" },
      ],
    },
    routingStart: {
      description: "An interactive loop asks at the start gate before the first worker.",
      always: [{ guard: "interactive", target: "startGate" }, { target: "working" }],
    },
    intake: {
      description: "The intake turns the task into acceptance criteria, or asks the user questions ([NEEDS_CLARIFICATION]).",
      entry: ["countIntakeCall", progress(intakeProgress)],
      invoke: {
        src: "runIntake",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
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
          { guard: "interactive", target: "reviewingCriteria", actions: "storeIntakeCriteria" },
          { guard: "judgeCriteria", target: "judgingCriteria", actions: "storeIntakeCriteria" },
          { target: "working", actions: ["storeIntakeCriteria", progress((c) => criteriaProgress(c, "criteria written by the intake"))] },
        ],
        onError: { target: "failed", actions: "failIntakeThrew" },
      },
    },
    awaitingInput: {
      description: "The intake asked questions; the task waits for the user's answer on its input subject (awaiting_input).",
      invoke: {
        src: "askUser",
        input: ask("clarification"),
        onDone: [
          { guard: "askTimedOut", target: "failed", actions: "failInputTimeout" },
          { target: "intake", actions: "recordClarification" },
        ],
        onError: { target: "failed", actions: "failAskThrew" },
      },
    },
    reviewingCriteria: {
      description: "Interactive: the user approves the intake's criteria (default: approve) or says what to change for the next draft.",
      entry: "countCriteriaRound",
      invoke: {
        src: "askUser",
        input: ask("criteria"),
        onDone: [
          {
            guard: "userApprovesCriteria",
            target: "startGate",
            actions: [
              "recordCriteriaReview",
              progress(gateProgress),
              progress((c) => criteriaProgress(c, "criteria approved by the user", true)),
            ],
          },
          { guard: "intakeRoundsLeft", target: "intake", actions: ["recordCriteriaReview", progress(gateProgress)] },
          {
            target: "startGate",
            actions: ["recordCriteriaReview", progress(gateProgress), progress(criteriaUnapprovedProgress)],
          },
        ],
        onError: { target: "failed", actions: "failAskThrew" },
      },
    },
    startGate: {
      description: "Interactive: before the first worker, go (default), cancel, or edit: <new criteria>.",
      invoke: {
        src: "askUser",
        input: ask("start"),
        onDone: [
          { guard: "userCancels", target: "failed", actions: ["recordStartGate", progress(gateProgress)] },
          { target: "working", actions: ["recordStartGate", progress(gateProgress)] },
        ],
        onError: { target: "failed", actions: "failAskThrew" },
      },
    },
    judgingCriteria: {
      description: "The criteria judge approves the draft, or sends it back to the intake with its feedback (bounded in rounds).",
      entry: "countCriteriaRound",
      invoke: {
        src: "runCriteriaJudge",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
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
            actions: ["keepUnapprovedCriteria", progress(criteriaUnapprovedProgress)],
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
            actions: ["recordJudgeError", progress(judgeErrorProgress)],
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
        { guard: "checkpointDue", target: "checkpoint" },
        { target: "working", actions: "nextIteration" },
      ],
    },
    checkpoint: {
      description: "Interactive, after a FAIL verdict: continue (default), redirect: <guidance for the next workers>, or stop.",
      invoke: {
        src: "askUser",
        input: ask("checkpoint"),
        onDone: [
          { guard: "userStops", target: "stopped", actions: ["recordCheckpoint", progress(gateProgress)] },
          { target: "working", actions: ["recordCheckpoint", progress(gateProgress), "nextIteration"] },
        ],
        onError: { target: "failed", actions: "failAskThrew" },
      },
    },
    passed: { description: "The judge's verdict is PASS: the output is delivered.", type: "final" },
    exhausted: { description: "Max iterations without PASS: the best attempt by score, with the final judge report.", type: "final" },
    stopped: { description: "The user stopped the loop at a checkpoint: the best attempt so far, as when exhausted.", type: "final" },
    failed: {
      description: "Preparation, intake or clarification failed, the user cancelled, or the task's budget ran out.",
      type: "final",
    },
  },
  output: ({ context }) => checkmateOutput(context),
});
