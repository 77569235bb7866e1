/**
 * Where a checkmate loop asks the user (machines/evaluator/checkmate.ts): the intake's questions, and the human gates of
 * an interactive loop (the criteria review, go / cancel / edit before the first worker, continue / redirect / stop
 * after a FAIL verdict). What each question says, what an answer decides (the short replies people type, and the
 * default when none comes in time), and what the loop keeps of it.
 */
import type { InputRequest } from "../../protocol/index.js";
import { failure, tag, type AskReply, type CheckmateContext, type GateKind, type GateOutcome } from "./checkmate-context.js";
import type { ProgressParams } from "./sequential.js";

/** Why a wait for the user's answer ended without one. */
export function timedOut(reply: AskReply): string {
  return "timedOut" in reply ? reply.timedOut : "no answer";
}

/** The user's answer to the pending questions, appended to the clarifications. */
export function withClarification(context: CheckmateContext, reply: AskReply): Partial<CheckmateContext> {
  const answer = "answer" in reply ? reply.answer : "";
  return { clarifications: [...context.clarifications, { questions: context.questions ?? "", answer }], questions: undefined };
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
