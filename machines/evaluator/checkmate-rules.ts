/**
 * Pure steps of the checkmate machine (machines/evaluator/checkmate.ts): what each named action writes to the context
 * and what each progress event says, as functions of the context and the effect's output, so each can be unit-tested.
 */
import { verdictOf, type InputRequest, type StoredVerdict, type TaskError, type TaskResult } from "../../protocol/index.js";
import {
  bestAttempt,
  clarificationQuestions,
  failure,
  history,
  tag,
  thrown,
  type CheckmateContext,
  type Prepared,
} from "./checkmate-types.js";
import type { ProgressParams } from "./sequential.js";

export { errorOf, outputOf } from "../invoke-events.js";

/** True when the intake's answer asks for clarification and the rounds of answers are spent. */
export function clarificationsSpent(context: CheckmateContext, output: TaskResult): boolean {
  return clarificationQuestions(output.content) !== undefined && context.clarifications.length >= context.maxClarifications;
}

/** The task and its criteria, from the preparation (nothing when it failed). */
export function preparedTask(prepared: Prepared): Partial<CheckmateContext> {
  return "task" in prepared ? { task: prepared.task, criteria: prepared.criteria ?? "" } : {};
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

/** The user's answer to the pending questions, appended to the clarifications. */
export function withClarification(context: CheckmateContext, answer: string): Partial<CheckmateContext> {
  return { clarifications: [...context.clarifications, { questions: context.questions ?? "", answer }], questions: undefined };
}

/** The criteria judge's feedback for the next intake round (its error when it failed). */
export function criteriaFeedback(output: TaskResult): string {
  return output.status === "COMPLETE" ? output.content : `the criteria judge failed: ${output.error?.message ?? ""}`;
}

/** What `runWorker` is given besides path and env: the task, criteria, previous output and every gap. */
export function workerInput(context: CheckmateContext) {
  const previous = context.attempts.findLast((a) => a.output !== undefined)?.output;
  const { path, env, task, criteria, iteration, maxIterations, gaps } = context;
  return { path, env, task, criteria, iteration, maxIterations, ...(previous === undefined ? {} : { previous }), gaps };
}

/** What `runJudge` is given: the task, criteria and the last attempt's output. */
export function judgeInput(context: CheckmateContext) {
  const { path, env, task, criteria, iteration, maxIterations } = context;
  return { path, env, task, criteria, iteration, maxIterations, output: context.attempts.at(-1)?.output ?? "" };
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
  return { ...result, error: error ?? thrown(`${role} failed`) };
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
  const judgeError = error ?? thrown("the judge failed without an error");
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

/** `continuation.input`: the intake's questions, as the request the user answers. */
export function inputProgress(context: CheckmateContext): ProgressParams {
  const request: InputRequest = { question: context.questions ?? "" };
  return { event: "continuation.input", message: context.questions ?? "", data: { nodePath: context.path, request } };
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
    iteration_history: history(context),
    iterations_completed: context.attempts.length,
    final_verdict: context.attempts.findLast((a) => a.verdict)?.verdict ?? null,
  };
  if (last?.verdict?.result === "PASS")
    return { content: last.output ?? "", status: "COMPLETE", notes: { ...notes, termination_reason: "judge_pass" } };
  const best = bestAttempt(context.attempts);
  const bestNote = best ? `; best attempt: iteration ${best.iteration}` : "; no iteration produced an output";
  const message = `checkmate reached max iterations (${context.maxIterations}) without a PASS${bestNote}`;
  return {
    content: best?.output ?? "",
    status: "FAILED",
    notes: {
      ...notes,
      termination_reason: "max_iterations_reached",
      best_iteration: best?.iteration ?? null,
      best_verdict: best?.verdict ?? null,
    },
    error: { type: "TASK_FAILURE", reason: "execution_halted", message },
  };
}
