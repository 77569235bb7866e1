/**
 * Pure steps of the checkmate machine (machines/evaluator/checkmate.ts): what each named action writes to the context
 * and what each progress event says, as functions of the context and the effect's output, so each can be unit-tested.
 */
import { verdictOf, type InputRequest, type StoredVerdict, type TaskError, type TaskResult } from "../../protocol/index.js";
import {
  type AskReply,
  type GateKind,
  type GateOutcome,
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
  if (!("task" in prepared)) return {};
  const { task, criteria, interactive, gateTimeoutS } = prepared;
  return { task, criteria: criteria ?? "", interactive: interactive === true, ...(gateTimeoutS === undefined ? {} : { gateTimeoutS }) };
}

/** Why a wait for the user's answer ended without one. */
export function timedOut(reply: AskReply): string {
  return "timedOut" in reply ? reply.timedOut : "no answer";
}

/** A failed result's error, or a stand-in when the worker failed without one. */
export function errorOrDefault(error: TaskError | undefined): TaskError {
  return error ?? thrown("the worker failed without an error");
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
export function withClarification(context: CheckmateContext, reply: AskReply): Partial<CheckmateContext> {
  const answer = "answer" in reply ? reply.answer : "";
  return { clarifications: [...context.clarifications, { questions: context.questions ?? "", answer }], questions: undefined };
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

/**
 * Answers that approve the criteria or go on (the short replies people actually type to say yes); an empty answer
 * approves too, so pressing Enter goes on.
 */
const APPROVAL = /^(?:yes|y|ok|okay|approve|approved|lgtm|continue|proceed|go|good|looks good|ship it)?[.! ]*$/i;

/** Whether the user's answer approves. */
export const approves = (answer: string): boolean => APPROVAL.test(answer.trim());

/** `word: rest` or `word rest` at the start of an answer: the rest, trimmed (possibly empty); undefined when it does not start so. */
function after(word: string, answer: string): string | undefined {
  const text = answer.trim();
  if (text.slice(0, word.length).toLowerCase() !== word) return undefined;
  const rest = text.slice(word.length);
  return rest === "" || /^[\s:]/.test(rest) ? rest.replace(/^[\s:]+/, "").trim() : undefined;
}

const STOP_WORDS = new Set(["stop", "cancel", "abort", "no", "quit"]);
const stops = (answer: string) =>
  STOP_WORDS.has(
    answer
      .trim()
      .replace(/[.!]+$/, "")
      .toLowerCase(),
  );

/** The criteria review: approved (an approval word, or no answer in time), else the answer is feedback for the next draft. */
export function criteriaChoice(reply: AskReply): "approve" | "revise" {
  return "timedOut" in reply || approves(reply.answer) ? "approve" : "revise";
}

/** The start gate: `cancel`, `edit: <new criteria>`, else go (also without an answer in time). */
export function startChoice(reply: AskReply): "go" | "cancel" | "edit" {
  if ("timedOut" in reply) return "go";
  if (stops(reply.answer)) return "cancel";
  return after("edit", reply.answer) ? "edit" : "go";
}

/** A checkpoint: `stop`, `redirect: <guidance>` (or any other text: guidance), else continue (also without an answer in time). */
export function checkpointChoice(reply: AskReply): "continue" | "redirect" | "stop" {
  if ("timedOut" in reply || approves(reply.answer)) return "continue";
  if (stops(reply.answer)) return "stop";
  return after("redirect", reply.answer) === "" ? "continue" : "redirect";
}

/** The user's guidance of a redirect: the text after `redirect:`, or the whole answer. */
function guidance(answer: string): string {
  return after("redirect", answer) ?? answer.trim();
}

function outcome(context: CheckmateContext, gate: GateOutcome["gate"], decision: string, reply: AskReply): GateOutcome {
  const iteration = gate === "checkpoint" ? context.iteration : 0;
  return { gate, iteration, decision, ...("timedOut" in reply ? { timedOut: true as const } : { answer: reply.answer }) };
}

/** The criteria review's outcome: approved, or the user's feedback for the next intake draft. */
export function withCriteriaReview(context: CheckmateContext, reply: AskReply): Partial<CheckmateContext> {
  const choice = criteriaChoice(reply);
  const gates = [...context.gates, outcome(context, "criteria", choice, reply)];
  if (choice === "approve") return { gates, criteriaApproved: true, criteriaFeedback: undefined };
  return { gates, criteriaApproved: false, criteriaFeedback: "timedOut" in reply ? "" : reply.answer.trim() };
}

/** The start gate's outcome: edited criteria, or the cancel's result. */
export function withStartGate(context: CheckmateContext, reply: AskReply): Partial<CheckmateContext> {
  const choice = startChoice(reply);
  const gates = [...context.gates, outcome(context, "start", choice, reply)];
  if (choice === "edit" && !("timedOut" in reply)) return { gates, criteria: after("edit", reply.answer) ?? "", criteriaSource: "user" };
  if (choice === "cancel") {
    const result = failure("execution_halted", "checkmate cancelled by the user before the first worker", {
      termination_reason: "user_cancelled",
      criteria: context.criteria,
      gates,
    });
    return { gates, result };
  }
  return { gates };
}

/** A checkpoint's outcome: the user's guidance for the next workers, or the stop. */
export function withCheckpoint(context: CheckmateContext, reply: AskReply): Partial<CheckmateContext> {
  const choice = checkpointChoice(reply);
  const gates = [...context.gates, outcome(context, "checkpoint", choice, reply)];
  if (choice === "stop") return { gates, stopped: true };
  if (choice === "redirect" && !("timedOut" in reply))
    return { gates, directions: [...context.directions, { iteration: context.iteration, text: guidance(reply.answer) }] };
  return { gates };
}

/** Longest question text the input request carries. */
const MAX_QUESTION = 8_000;
const clip = (text: string) => (text.length <= MAX_QUESTION ? text : `${text.slice(0, MAX_QUESTION - 1)}…`);

/** The question of a gate, as the input request the user answers (`timeout_s`: the node's `gate_timeout`). */
export function gateRequest(context: CheckmateContext, gate: GateKind): InputRequest {
  const timeout = context.gateTimeoutS === undefined ? {} : { timeout_s: context.gateTimeoutS };
  return { question: clip(gateQuestion(context, gate)), ...timeout };
}

function gateQuestion(context: CheckmateContext, gate: GateKind): string {
  switch (gate) {
    case "clarification":
      return context.questions ?? "";
    case "criteria":
      return `checkmate: proposed acceptance criteria (round ${context.intakeRounds}/${context.maxIntakeRounds}):\n\n${context.criteria}\n\nReply "yes" to approve (the default when no answer comes in time), or say what to change.`;
    case "start":
      return `checkmate: ready to start (up to ${context.maxIterations} iterations) with these criteria:\n\n${context.criteria}\n\nReply "go" (the default when no answer comes in time), "cancel", or "edit: <new criteria>".`;
    case "checkpoint": {
      const v = context.attempts.at(-1)?.verdict;
      const gap = v?.gapSummary.trim() ? `\nGaps: ${v.gapSummary.trim()}` : "";
      return `${tag(context)} FAIL score ${v?.score ?? 0}.${gap}\n\nReply "continue" (the default when no answer comes in time), "redirect: <guidance for the next worker>", or "stop" (deliver the best attempt so far).`;
    }
  }
}

/** `checkmate.gate`: what the last gate decided, and whether it was the default for want of an answer. */
export function gateProgress(context: CheckmateContext): ProgressParams {
  const last = context.gates.at(-1);
  const how = last?.timedOut ? " (no answer in time: the default)" : "";
  const message = `checkmate: ${last?.gate ?? "?"} gate: ${last?.decision ?? "?"}${how}`;
  return { event: "checkmate.gate", message, data: { nodePath: context.path, ...last } };
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
