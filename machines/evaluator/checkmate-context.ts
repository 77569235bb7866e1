/**
 * What a checkmate loop knows (machines/evaluator/checkmate.ts): its input, defaults and context, its attempts and gaps,
 * the gates where it asks the user, what each effect is given, and the best attempt by typed score.
 */
import {
  NEEDS_CLARIFICATION,
  taskFailure,
  type InputRequest,
  type StoredVerdict,
  type TaskError,
  type TaskResult,
} from "../../protocol/index.js";
import type { Env } from "../language/env.js";
import type { Scoped } from "./evaluation-context.js";

/**
 * Defaults: 5 iterations lets the worker act on the judge's gaps a few times, and bounds the model calls a task that
 * never passes can spend.
 */
export const CHECKMATE_DEFAULTS = { maxIterations: 5, maxIntakeRounds: 3, maxClarifications: 3 } as const;

/** Input of a checkmate loop. */
export interface CheckmateInput extends Scoped {
  /** Path of the `judge_loop` task node. */
  path: string;
  env: Env;
  maxIterations?: number;
  /** Whether a criteria judge approves the intake's draft. */
  criteriaJudge?: boolean;
  maxIntakeRounds?: number;
  /** Rounds of questions to the user before the intake gives up. */
  maxClarifications?: number;
}

/**
 * The task and its given criteria, substituted, and the node's human-gate settings (`interactive="true"`,
 * `gate_timeout` in seconds); or the failure that stopped it.
 */
export type Prepared = { task: string; criteria?: string; interactive?: boolean; gateTimeoutS?: number } | { result: TaskResult };

/**
 * Where the loop asks the user: the intake's questions (`clarification`), and the human gates of an interactive
 * loop: approval of the criteria, go/cancel/edit before the first worker (`start`), continue/redirect/stop after a
 * FAIL verdict (`checkpoint`).
 */
export type GateKind = "clarification" | "criteria" | "start" | "checkpoint";

/** What `askUser` is given: the question, put to the user on the task's input subject. */
export interface AskInput extends Scoped {
  path: string;
  gate: GateKind;
  request: InputRequest;
}

/** The user's answer, or the wait's end without one (`timedOut`: why). */
export type AskReply = { answer: string } | { timedOut: string };

/** A gate's outcome, kept in the notes (`gates`). `timedOut`: the default action was taken. */
export interface GateOutcome {
  gate: Exclude<GateKind, "clarification">;
  /** After this iteration (0: before the first worker). */
  iteration: number;
  decision: string;
  answer?: string;
  timedOut?: true;
}

/** The user's guidance for the workers after a `redirect` at a checkpoint. */
export interface Direction {
  iteration: number;
  text: string;
}

/** A question and the user's answer. */
export interface Clarification {
  questions: string;
  answer: string;
}

/** What `runIntake` is given. `round` counts intake calls from 1. */
export interface IntakeInput extends Scoped {
  path: string;
  env: Env;
  task: string;
  round: number;
  clarifications: Clarification[];
  /** The criteria judge's feedback on the previous draft. */
  feedback?: string;
  previousDraft?: string;
}

/** What `runCriteriaJudge` is given. */
export interface CriteriaJudgeInput extends Scoped {
  path: string;
  env: Env;
  task: string;
  criteria: string;
  round: number;
}

/** A gap summary of a failed iteration. */
export interface Gap {
  iteration: number;
  gapSummary: string;
}

/** What the worker and the judge of an iteration are both given. */
export interface IterationInput extends Scoped {
  path: string;
  env: Env;
  task: string;
  criteria: string;
  iteration: number;
  maxIterations: number;
}

/** What `runWorker` is given. */
export interface WorkerInput extends IterationInput {
  /** The previous iteration's output, when it produced one. */
  previous?: string;
  /** Every gap summary so far, oldest first. */
  gaps: Gap[];
  /** The user's guidance from `redirect` checkpoints, oldest first. */
  directions: Direction[];
}

/** What `runJudge` is given. */
export interface JudgeInput extends IterationInput {
  output: string;
}

/** One iteration: its output and verdict, or the error that stopped its worker. */
export interface Attempt {
  iteration: number;
  output?: string;
  verdict?: StoredVerdict;
  workerError?: TaskError;
  judgeError?: TaskError;
}

export interface CheckmateContext extends CheckmateInput {
  maxIterations: number;
  maxIntakeRounds: number;
  maxClarifications: number;
  task: string;
  criteria: string;
  /** `user`: replaced at the start gate (`edit: …`). */
  criteriaSource?: "given" | "intake" | "user";
  criteriaApproved?: boolean;
  /** Intake calls made (clarification rounds included). */
  intakeCalls: number;
  /** Intake drafts judged. */
  intakeRounds: number;
  clarifications: Clarification[];
  questions?: string | undefined;
  criteriaFeedback?: string | undefined;
  iteration: number;
  attempts: Attempt[];
  gaps: Gap[];
  /** Human gates: set from the node by `prepare`. */
  interactive: boolean;
  gateTimeoutS?: number | undefined;
  gates: GateOutcome[];
  directions: Direction[];
  /** The user stopped the loop at a checkpoint. */
  stopped?: true;
  result?: TaskResult;
}

export const failure = (
  reason: "input_validation_failure" | "execution_halted" | "execution_timeout" | "subtask_failure" | "unexpected_error",
  message: string,
  notes: Record<string, unknown> = {},
  error?: TaskError,
): TaskResult => ({
  ...taskFailure(reason, message, error ? { cause: error } : undefined),
  notes,
});

/** The questions of an intake answer that asks for clarification, else undefined. */
export function clarificationQuestions(content: string): string | undefined {
  const at = content.indexOf(NEEDS_CLARIFICATION);
  if (at < 0) return undefined;
  const questions = content.slice(at + NEEDS_CLARIFICATION.length).trim();
  return questions === "" ? "The task needs clarification: please describe what you expect." : questions;
}

/** A criteria judge approves only with `APPROVED` and no `NEEDS_WORK`. */
export function criteriaApproved(content: string): boolean {
  return /\bAPPROVED\b/.test(content) && !/\bNEEDS_WORK\b/.test(content);
}

/** A failure that ends the loop rather than the iteration: the task's budget is spent, or it was cancelled. */
export function fatal(error: TaskError | undefined): boolean {
  if (!error) return false;
  return (
    (error.type === "RESOURCE_EXHAUSTION" && error.resource === "budget") ||
    (error.type === "TASK_FAILURE" && error.reason === "execution_halted")
  );
}

/** The best attempt: the highest score among parsed verdicts (ties: the later), else the last with an output. */
export function bestAttempt(attempts: readonly Attempt[]): Attempt | undefined {
  let best: Attempt | undefined;
  for (const a of attempts) {
    if (a.output === undefined || !a.verdict?.parsed) continue;
    if (!best?.verdict || a.verdict.score >= best.verdict.score) best = a;
  }
  return best ?? attempts.findLast((a) => a.output !== undefined);
}

export const tag = (c: { iteration: number; maxIterations: number }) => `[checkmate: iteration ${c.iteration}/${c.maxIterations}]`;

export function history(context: CheckmateContext): Record<string, unknown>[] {
  return context.attempts.map((a) => ({ ...a }));
}
