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
import { verdictOf, type InputRequest, type StoredVerdict, type TaskResult } from "../../protocol/index.js";
import {
  bestAttempt,
  CHECKMATE_DEFAULTS,
  clarificationQuestions,
  complete,
  criteriaApproved,
  failure,
  fatal,
  history,
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
import type { InputWaitInput } from "./continuation.js";
import type { Env } from "../language/env.js";
import { notProvided } from "../not-provided.js";
import type { ProgressParams } from "./sequential.js";

export * from "./checkmate-types.js";

/** The checkmate machine. Output: the passing output, the exhaustion with the best attempt, or the failure. */
export const checkmateMachine = setup({
  types: {
    input: {} as CheckmateInput,
    context: {} as CheckmateContext,
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
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
          { guard: ({ event }) => "result" in event.output, target: "failed", actions: assign({ result: ({ event }) => ("result" in event.output ? event.output.result : undefined) }) },
          {
            target: "routingIntake",
            actions: assign(({ event }) => ("task" in event.output ? { task: event.output.task, criteria: event.output.criteria ?? "" } : {})),
          },
        ],
        onError: { target: "failed", actions: assign({ result: ({ event }) => failure("unexpected_error", thrown(event.error).message) }) },
      },
    },
    routingIntake: {
      description: "Criteria given with the task skip the intake.",
      always: [
        {
          guard: "criteriaGiven",
          target: "working",
          actions: [assign({ criteriaSource: "given" }), { type: "progress", params: ({ context }) => ({ event: "checkmate.criteria", message: "criteria given with the task", data: { nodePath: context.path, source: "given" } }) }],
        },
        { target: "intake" },
      ],
    },
    intake: {
      description: "The intake turns the task into acceptance criteria, or asks the user questions ([NEEDS_CLARIFICATION]).",
      entry: [
        assign({ intakeCalls: ({ context }) => context.intakeCalls + 1 }),
        { type: "progress", params: ({ context }) => ({ event: "checkmate.intake", message: `checkmate: intake (call ${context.intakeCalls})`, data: { nodePath: context.path, call: context.intakeCalls } }) },
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
          { guard: ({ event }) => !complete(event), target: "failed", actions: assign({ result: ({ event }) => failure("subtask_failure", `intake failed: ${event.output.error?.message ?? "no result"}`, {}, event.output.error) }) },
          {
            guard: ({ context, event }) => clarificationQuestions(event.output.content) !== undefined && context.clarifications.length >= context.maxClarifications,
            target: "failed",
            actions: assign({ result: ({ context }) => failure("execution_halted", `the intake still needs clarification after ${context.maxClarifications} rounds of answers`, { clarifications: context.clarifications }) }),
          },
          { guard: ({ event }) => clarificationQuestions(event.output.content) !== undefined, target: "awaitingInput", actions: assign({ questions: ({ event }) => clarificationQuestions(event.output.content) }) },
          { guard: "judgeCriteria", target: "judgingCriteria", actions: assign({ criteria: ({ event }) => event.output.content.trim(), criteriaSource: "intake" }) },
          {
            target: "working",
            actions: [
              assign({ criteria: ({ event }) => event.output.content.trim(), criteriaSource: "intake" }),
              { type: "progress", params: ({ context }) => ({ event: "checkmate.criteria", message: "criteria written by the intake", data: { nodePath: context.path, source: "intake", criteria: context.criteria } }) },
            ],
          },
        ],
        onError: { target: "failed", actions: assign({ result: ({ event }) => failure("subtask_failure", `intake failed: ${thrown(event.error).message}`) }) },
      },
    },
    awaitingInput: {
      description: "The intake asked questions; the task waits for the user's answer on its input subject (awaiting_input).",
      entry: {
        type: "progress",
        params: ({ context }) => ({ event: "continuation.input", message: context.questions ?? "", data: { nodePath: context.path, request: { question: context.questions ?? "" } satisfies InputRequest } }),
      },
      invoke: {
        src: "waitForInput",
        input: ({ context }) => ({ path: context.path, request: { question: context.questions ?? "" } }),
        onDone: {
          target: "intake",
          actions: [
            assign({ clarifications: ({ context, event }) => [...context.clarifications, { questions: context.questions ?? "", answer: event.output }], questions: undefined }),
            { type: "progress", params: ({ context }) => ({ event: "continuation.resumed", message: "resumed after input", data: { nodePath: context.path } }) },
          ],
        },
        onError: { target: "failed", actions: assign({ result: ({ context, event }) => failure("execution_timeout", thrown(event.error).message, { questions: context.questions }) }) },
      },
    },
    judgingCriteria: {
      description: "The criteria judge approves the draft, or sends it back to the intake with its feedback (bounded in rounds).",
      entry: assign({ intakeRounds: ({ context }) => context.intakeRounds + 1 }),
      invoke: {
        src: "runCriteriaJudge",
        input: ({ context }) => ({ path: context.path, env: context.env, task: context.task, criteria: context.criteria, round: context.intakeRounds }),
        onDone: [
          {
            guard: ({ event }) => complete(event) && criteriaApproved(event.output.content),
            target: "working",
            actions: [
              assign({ criteriaApproved: true }),
              { type: "progress", params: ({ context }) => ({ event: "checkmate.criteria", message: `criteria approved in round ${context.intakeRounds}`, data: { nodePath: context.path, source: "intake", approved: true, criteria: context.criteria } }) },
            ],
          },
          {
            guard: ({ context }) => context.intakeRounds < context.maxIntakeRounds,
            target: "intake",
            actions: assign({ criteriaFeedback: ({ event }) => (complete(event) ? event.output.content : `the criteria judge failed: ${event.output.error?.message ?? ""}`) }),
          },
          {
            target: "working",
            actions: [
              assign({ criteriaApproved: false }),
              {
                type: "progress",
                params: ({ context }) => ({ event: "checkmate.criteria", message: `criteria not approved after ${context.maxIntakeRounds} rounds; going on with the last draft`, data: { nodePath: context.path, source: "intake", approved: false, criteria: context.criteria } }),
              },
            ],
          },
        ],
        onError: { target: "failed", actions: assign({ result: ({ event }) => failure("subtask_failure", `criteria judge failed: ${thrown(event.error).message}`) }) },
      },
    },
    working: {
      description: "[checkmate: iteration n/max]: the worker produces an attempt from the task, criteria, previous attempt and all gaps.",
      entry: { type: "progress", params: ({ context }) => ({ event: "checkmate.iteration", message: tag(context), data: { nodePath: context.path, iteration: context.iteration, maxIterations: context.maxIterations } }) },
      invoke: {
        src: "runWorker",
        input: ({ context }) => {
          const previous = context.attempts.findLast((a) => a.output !== undefined)?.output;
          return { path: context.path, env: context.env, task: context.task, criteria: context.criteria, iteration: context.iteration, maxIterations: context.maxIterations, ...(previous === undefined ? {} : { previous }), gaps: context.gaps };
        },
        onDone: [
          { guard: ({ event }) => complete(event), target: "judging", actions: assign({ attempts: ({ context, event }) => [...context.attempts, { iteration: context.iteration, output: event.output.content }] }) },
          {
            guard: ({ event }) => fatal(event.output.error),
            target: "failed",
            actions: assign({ result: ({ context, event }) => ({ ...failure("subtask_failure", `${tag(context)} worker failed: ${event.output.error?.message ?? ""}`, { iteration_history: history(context) }), error: event.output.error ?? thrown("worker failed") }) }),
          },
          { target: "workerFailed", actions: assign({ attempts: ({ context, event }) => [...context.attempts, { iteration: context.iteration, workerError: event.output.error ?? thrown("the worker failed without an error") }] }) },
        ],
        onError: { target: "workerFailed", actions: assign({ attempts: ({ context, event }) => [...context.attempts, { iteration: context.iteration, workerError: thrown(event.error) }] }) },
      },
    },
    workerFailed: {
      description: "The worker failed: a failed iteration, recorded with its error; the judge does not run.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "checkmate.worker_error",
          message: `${tag(context)} worker failed: ${context.attempts.at(-1)?.workerError?.message ?? ""}`,
          data: { nodePath: context.path, iteration: context.iteration, error: context.attempts.at(-1)?.workerError },
        }),
      },
      always: { target: "deciding" },
    },
    judging: {
      description: "The judge returns a typed verdict on the attempt; an unparseable one, or a failing judge, counts as FAIL with a note.",
      invoke: {
        src: "runJudge",
        input: ({ context }) => ({ path: context.path, env: context.env, task: context.task, criteria: context.criteria, iteration: context.iteration, maxIterations: context.maxIterations, output: context.attempts.at(-1)?.output ?? "" }),
        onDone: [
          {
            guard: ({ event }) => complete(event),
            target: "deciding",
            actions: assign(({ context, event }) => {
              const verdict = verdictOf(event.output.content);
              const attempts = [...context.attempts.slice(0, -1), { ...context.attempts.at(-1), iteration: context.iteration, verdict }];
              const gaps = verdict.result === "FAIL" && verdict.gapSummary.trim() !== "" ? [...context.gaps, { iteration: context.iteration, gapSummary: verdict.gapSummary.trim() }] : context.gaps;
              return { attempts, gaps };
            }),
          },
          {
            guard: ({ event }) => fatal(event.output.error),
            target: "failed",
            actions: assign({ result: ({ context, event }) => ({ ...failure("subtask_failure", `${tag(context)} judge failed: ${event.output.error?.message ?? ""}`, { iteration_history: history(context) }), error: event.output.error ?? thrown("judge failed") }) }),
          },
          {
            target: "deciding",
            actions: [
              assign(({ context, event }) => {
                const error = event.output.error ?? thrown("the judge failed without an error");
                const verdict: StoredVerdict = { result: "FAIL", score: 0, criteria: [], gapSummary: "", parsed: false, note: `the judge failed (${error.message}); counted as FAIL` };
                return { attempts: [...context.attempts.slice(0, -1), { ...context.attempts.at(-1), iteration: context.iteration, verdict, judgeError: error }] };
              }),
              { type: "progress", params: ({ context }) => ({ event: "checkmate.judge_error", message: `${tag(context)} judge failed: ${context.attempts.at(-1)?.judgeError?.message ?? ""}`, data: { nodePath: context.path, iteration: context.iteration } }) },
            ],
          },
        ],
        onError: { target: "failed", actions: assign({ result: ({ event }) => failure("unexpected_error", `judge failed: ${thrown(event.error).message}`) }) },
      },
    },
    deciding: {
      description: "PASS ends the loop; after the last iteration it is exhausted; else the next iteration.",
      entry: {
        type: "progress",
        params: ({ context }) => {
          const v = context.attempts.at(-1)?.verdict;
          const message = v ? `${tag(context)} ${v.result} score ${v.score}${v.note ? ` (${v.note})` : ""}` : `${tag(context)} failed iteration`;
          return { event: "checkmate.verdict", message, data: { nodePath: context.path, iteration: context.iteration, ...(v ? { result: v.result, score: v.score, parsed: v.parsed } : { result: "ERROR" }) } };
        },
      },
      always: [
        { guard: "passed", target: "passed" },
        {
          guard: "exhausted",
          target: "exhausted",
          actions: {
            type: "progress",
            params: ({ context }) => ({
              event: "checkmate.exhausted",
              message: `checkmate: max iterations reached. Delivering best attempt (iteration ${bestAttempt(context.attempts)?.iteration ?? "none"}) + final judge report.`,
              data: { nodePath: context.path, bestIteration: bestAttempt(context.attempts)?.iteration ?? null },
            }),
          },
        },
        { target: "working", actions: assign({ iteration: ({ context }) => context.iteration + 1 }) },
      ],
    },
    passed: { description: "The judge's verdict is PASS: the output is delivered.", type: "final" },
    exhausted: { description: "Max iterations without PASS: the best attempt by score, with the final judge report (C15).", type: "final" },
    failed: { description: "Preparation, intake or clarification failed, or the task's budget ran out.", type: "final" },
  },
  output: ({ context }) => {
    if (context.result) return context.result;
    const last = context.attempts.at(-1);
    const notes = {
      criteria: context.criteria,
      criteria_source: context.criteriaSource ?? null,
      ...(context.criteriaApproved === undefined ? {} : { criteria_approved: context.criteriaApproved }),
      ...(context.clarifications.length > 0 ? { clarifications: context.clarifications } : {}),
      iteration_history: history(context),
      iterations_completed: context.attempts.length,
      final_verdict: context.attempts.findLast((a) => a.verdict)?.verdict ?? null,
    };
    if (last?.verdict?.result === "PASS") return { content: last.output ?? "", status: "COMPLETE", notes: { ...notes, termination_reason: "judge_pass" } };
    const best = bestAttempt(context.attempts);
    return {
      content: best?.output ?? "",
      status: "FAILED",
      notes: { ...notes, termination_reason: "max_iterations_reached", best_iteration: best?.iteration ?? null, best_verdict: best?.verdict ?? null },
      error: {
        type: "TASK_FAILURE",
        reason: "execution_halted",
        message: `checkmate reached max iterations (${context.maxIterations}) without a PASS${best ? `; best attempt: iteration ${best.iteration}` : "; no iteration produced an output"}`,
      },
    };
  },
});
