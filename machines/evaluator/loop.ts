/**
 * A static `director_evaluator_loop` (docs/task-language.md#director_evaluator_loop; choices in docs/design.md).
 *
 * idle → validating → directing → scripting? → evaluating → deciding → directing … → done | exhausted | failed.
 * Iterations are 1-based. The director sees `current_iteration` and the previous round's `evaluation_feedback`,
 * `evaluation_success` and `last_evaluation`; the script and the evaluator also see `director_result` and (after
 * the script) `script_output`≡`script_stdout`, `script_errors`≡`script_stderr` (templates use both spellings)
 * and `script_exit_code`. A script's non-zero exit is data for the evaluator, never a failure. The loop stops when
 * the evaluator reports `success === true` or the `<termination_condition>` is true over `{evaluation, iteration,
 * current_iteration}`. Running out of iterations ends in `exhausted`: FAILED (`execution_halted`) with the best
 * attempt, never a COMPLETE that looks like success.
 * Effects: `runStep` (the director at `<path>.director`, the evaluator at `<path>.evaluator`), `runScript` (the
 * `<script_execution>` at `<path>.scriptExecution`) and `progress`.
 */
import { assign, fromPromise, setup } from "xstate";
import { taskFailure, thrownError, type TaskError, type TaskResult } from "../../protocol/index.js";
import { extend, rootEnv, type Env } from "../language/env.js";
import { evaluateTest } from "../language/expression.js";
import { notProvided } from "../not-provided.js";
import { errorOf, outputOf, type StartEvent, idleUntilStarted } from "../invoke-events.js";
import type { ProgressParams, RunStepInput } from "./sequential.js";
import type { Scoped } from "./evaluation-context.js";

/** Default of `<max_iterations>`. */
export const DEFAULT_MAX_ITERATIONS = 5;

/** Feedback when the evaluator's answer carries no `success`. */
export const INVALID_EVALUATION_FEEDBACK = "Evaluation failed or structure invalid.";

/** Input of a director–evaluator loop. */
export interface DirectorEvaluatorInput extends Scoped {
  /** Path of the loop task node. */
  path: string;
  /** The environment of the loop (its inputs bound). */
  env: Env;
  /** Whether the loop has a `<director>`, an `<evaluator>`, a `<script_execution>`. */
  hasDirector: boolean;
  hasEvaluator: boolean;
  hasScript: boolean;
  /** `<max_iterations>`; {@link DEFAULT_MAX_ITERATIONS} when absent. */
  maxIterations?: number;
  /** `<termination_condition>` text. */
  condition?: string;
}

/** What the evaluator said about one attempt. */
export interface Evaluation {
  /** `success === true` as reported; anything else is false. */
  success: boolean;
  /** The feedback for the next director. */
  feedback: string;
  /** `notes.score` or `notes.successScore`, when numeric. */
  score?: number;
  /** The evaluator's notes, `success` and `feedback` filled in. */
  notes: Record<string, unknown>;
  content: string;
}

/** What the script of one iteration produced. */
export interface ScriptData {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** One entry of `notes.iteration_history`. */
export interface IterationEntry {
  iteration: number;
  director?: TaskResult;
  script?: TaskResult;
  evaluator?: TaskResult;
  error?: TaskError;
}

/** Context of a director–evaluator loop. */
export interface DirectorEvaluatorContext extends DirectorEvaluatorInput {
  maxIterations: number;
  /** The iteration running (1-based). */
  iteration: number;
  history: IterationEntry[];
  /** The current iteration's entry while it runs. */
  current: IterationEntry;
  /** The last evaluation, if any. */
  evaluation?: Evaluation;
  script?: ScriptData | undefined;
  /** Why the loop stopped successfully. */
  reason?: "evaluation_success" | "termination_condition" | undefined;
  /** A termination condition that could not be evaluated this iteration. */
  conditionError?: string | undefined;
  result?: TaskResult;
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function parseJson(text: string): Record<string, unknown> {
  try {
    return record(JSON.parse(text.trim()));
  } catch {
    return {};
  }
}

/** Reads an evaluator's result: `notes.success`, else its content as JSON `{success, feedback}`; missing → false. */
export function readEvaluation(result: TaskResult): Evaluation {
  const parsed = typeof result.notes["success"] === "boolean" ? {} : parseJson(result.content);
  const source = { ...parsed, ...result.notes };
  const success = typeof source["success"] === "boolean" ? source["success"] : undefined;
  const given = source["feedback"];
  const feedback = success === undefined ? INVALID_EVALUATION_FEEDBACK : typeof given === "string" ? given : result.content;
  const rawScore = source["score"] ?? source["successScore"];
  const score = typeof rawScore === "number" && Number.isFinite(rawScore) ? rawScore : undefined;
  return {
    success: success === true,
    feedback,
    ...(score === undefined ? {} : { score }),
    notes: { ...source, success: success === true, feedback },
    content: result.content,
  };
}

/** Reads a script's result: `notes.scriptOutput {stdout, stderr, exitCode|exit_code}`, else its content (as Python). */
export function readScript(result: TaskResult): ScriptData {
  const out = record(result.notes["scriptOutput"]);
  const code = out["exitCode"] ?? out["exit_code"];
  if (typeof out["stdout"] !== "string" || typeof code !== "number")
    return { stdout: result.content, stderr: "Script output format error", exitCode: -1 };
  return { stdout: out["stdout"], stderr: typeof out["stderr"] === "string" ? out["stderr"] : "", exitCode: code };
}

/** Evaluates the termination condition; `evaluation.success` is an alias of `evaluation.notes.success`. */
export function checkCondition(
  condition: string,
  evaluation: Evaluation,
  iteration: number,
): { ok: true; value: boolean } | { ok: false; error: string } {
  const env = rootEnv({
    evaluation: { success: evaluation.success, feedback: evaluation.feedback, content: evaluation.content, notes: evaluation.notes },
    iteration,
    current_iteration: iteration,
  });
  return evaluateTest(condition, env);
}

function loopBindings(context: DirectorEvaluatorContext): Record<string, unknown> {
  const e = context.evaluation;
  return {
    current_iteration: context.iteration,
    evaluation_feedback: e?.feedback ?? "",
    evaluation_success: e?.success ?? false,
    last_evaluation: e ? e.notes : null,
  };
}

function scriptBindings(script: ScriptData | undefined): Record<string, unknown> {
  if (!script) return {};
  return {
    script_output: script.stdout,
    script_stdout: script.stdout,
    script_errors: script.stderr,
    script_stderr: script.stderr,
    script_exit_code: script.exitCode,
  };
}

function afterDirector(context: DirectorEvaluatorContext): Env {
  const director = context.current.director?.content ?? "";
  return extend(context.env, {
    ...loopBindings(context),
    director_result: director,
    script_input: director,
    solution: director,
    ...scriptBindings(context.script),
  });
}

function loopFailure(
  context: DirectorEvaluatorContext,
  phase: string,
  error: TaskError | undefined,
  result?: TaskResult,
): Partial<DirectorEvaluatorContext> {
  const entry: IterationEntry = { ...context.current, ...(result ? { [phase]: result } : {}), ...(error ? { error } : {}) };
  const history = [...context.history, entry];
  return {
    history,
    result: {
      content: `Director-Evaluator loop failed during iteration ${context.iteration}.`,
      status: "FAILED",
      notes: { iteration_history: history, iterations_completed: context.iteration - 1 },
      error: {
        type: "TASK_FAILURE",
        reason: "subtask_failure",
        message: `${phase} failed in iteration ${context.iteration}/${context.maxIterations}: ${error?.message ?? "no error given"}`,
        details: { iteration: context.iteration, phase, ...(error ? { cause: error } : {}) },
      },
    },
  };
}

/** The attempt with the highest numeric evaluator score, else the last one. */
export function bestAttempt(history: readonly IterationEntry[]): IterationEntry | undefined {
  let best: IterationEntry | undefined;
  let bestScore = Number.NEGATIVE_INFINITY;
  for (const entry of history) {
    const score = entry.evaluator ? readEvaluation(entry.evaluator).score : undefined;
    if (score !== undefined && score >= bestScore) {
      best = entry;
      bestScore = score;
    }
  }
  return best ?? history.at(-1);
}

const invalid = (message: string): TaskResult => taskFailure("input_validation_failure", message);

/** The context once the evaluator judged the attempt: its evaluation, the iteration in the history, and why to stop. */
export function evaluated(context: DirectorEvaluatorContext, output: TaskResult): Partial<DirectorEvaluatorContext> {
  const evaluation = readEvaluation(output);
  const check =
    context.condition === undefined || evaluation.success ? undefined : checkCondition(context.condition, evaluation, context.iteration);
  const reason = evaluation.success
    ? ("evaluation_success" as const)
    : check?.ok && check.value
      ? ("termination_condition" as const)
      : undefined;
  return {
    evaluation,
    history: [...context.history, { ...context.current, evaluator: output }],
    conditionError: check && !check.ok ? check.error : undefined,
    reason,
  };
}

const complete = (event: { output: TaskResult }) => event.output.status === "COMPLETE";

/** The director–evaluator machine. Output: the final attempt, the exhaustion with the best attempt, or the failure. */
export const directorEvaluatorMachine = setup({
  types: {
    input: {} as DirectorEvaluatorInput,
    context: {} as DirectorEvaluatorContext,
    events: {} as StartEvent,
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
    failMalformed: assign({
      result: ({ context }) => invalid(`director_evaluator_loop requires ${context.hasDirector ? "an <evaluator>" : "a <director>"}`),
    }),
    recordAttempt: assign({
      current: ({ context, event }) => ({ ...context.current, director: outputOf<TaskResult>(event) }),
      script: undefined,
    }),
    recordScript: assign({
      current: ({ context, event }) => ({ ...context.current, script: outputOf<TaskResult>(event) }),
      script: ({ event }) => readScript(outputOf<TaskResult>(event)),
    }),
    recordEvaluation: assign(({ context, event }) => evaluated(context, outputOf<TaskResult>(event))),
    failStep: assign(({ context, event }, params: { phase: string }) =>
      loopFailure(context, params.phase, outputOf<TaskResult>(event).error, outputOf<TaskResult>(event)),
    ),
    failThrew: assign(({ context, event }, params: { phase: string }) => loopFailure(context, params.phase, thrownError(errorOf(event)))),
    nextIteration: assign({
      iteration: ({ context }) => context.iteration + 1,
      current: ({ context }) => ({ iteration: context.iteration + 1 }),
    }),
  },
  actors: {
    runStep: fromPromise<TaskResult, RunStepInput>(async () => notProvided("directorEvaluator.runStep")),
    runScript: fromPromise<TaskResult, RunStepInput>(async () => notProvided("directorEvaluator.runScript")),
  },
  guards: {
    valid: ({ context }) => context.hasDirector && context.hasEvaluator,
    succeeded: ({ context }) => context.reason !== undefined,
    exhausted: ({ context }) => context.iteration >= context.maxIterations,
    stepCompleted: ({ event }) => complete({ output: outputOf<TaskResult>(event) }),
    directedWithScript: ({ context, event }) => complete({ output: outputOf<TaskResult>(event) }) && context.hasScript,
  },
}).createMachine({
  id: "directorEvaluator",
  context: ({ input }) => ({
    ...input,
    maxIterations: input.maxIterations ?? DEFAULT_MAX_ITERATIONS,
    iteration: 1,
    history: [],
    current: { iteration: 1 },
  }),
  initial: "idle",
  states: {
    idle: idleUntilStarted("validating"),
    validating: {
      description: "A loop needs a <director> and an <evaluator>.",
      always: [
        { guard: "valid", target: "directing" },
        { target: "failed", actions: "failMalformed" },
      ],
    },
    directing: {
      description: "The director produces an attempt, seeing the previous round's feedback.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "iteration.started",
          message: `iteration ${context.iteration}/${context.maxIterations}`,
          data: { nodePath: context.path, iteration: context.iteration, maxIterations: context.maxIterations },
        }),
      },
      invoke: {
        src: "runStep",
        input: ({ context }) => ({
          path: `${context.path}.director`,
          env: extend(context.env, loopBindings(context)),
          scopeKey: context.scopeKey,
        }),
        onDone: [
          { guard: "directedWithScript", target: "scripting", actions: "recordAttempt" },
          { guard: "stepCompleted", target: "evaluating", actions: "recordAttempt" },
          { target: "failed", actions: { type: "failStep", params: { phase: "director" } } },
        ],
        onError: { target: "failed", actions: { type: "failThrew", params: { phase: "director" } } },
      },
    },
    scripting: {
      description: "The script runs on the director's attempt; a non-zero exit is data for the evaluator.",
      invoke: {
        src: "runScript",
        input: ({ context }) => ({ path: `${context.path}.scriptExecution`, env: afterDirector(context), scopeKey: context.scopeKey }),
        onDone: [
          { guard: "stepCompleted", target: "evaluating", actions: "recordScript" },
          { target: "failed", actions: { type: "failStep", params: { phase: "script" } } },
        ],
        onError: { target: "failed", actions: { type: "failThrew", params: { phase: "script" } } },
      },
    },
    evaluating: {
      description: "The evaluator judges the attempt (and the script's output).",
      invoke: {
        src: "runStep",
        input: ({ context }) => ({ path: `${context.path}.evaluator`, env: afterDirector(context), scopeKey: context.scopeKey }),
        onDone: [
          { guard: "stepCompleted", target: "deciding", actions: "recordEvaluation" },
          { target: "failed", actions: { type: "failStep", params: { phase: "evaluator" } } },
        ],
        onError: { target: "failed", actions: { type: "failThrew", params: { phase: "evaluator" } } },
      },
    },
    deciding: {
      description: "Stop on success or the termination condition, end exhausted after the last iteration, or go on.",
      entry: {
        type: "progress",
        params: ({ context }) =>
          context.conditionError === undefined
            ? {
                event: "iteration.evaluated",
                message: `iteration ${context.iteration}/${context.maxIterations}: ${context.evaluation?.success ? "success" : "not yet"}`,
                data: { nodePath: context.path, iteration: context.iteration, success: context.evaluation?.success ?? false },
              }
            : {
                event: "loop.condition_error",
                message: `termination condition counts as false: ${context.conditionError}`,
                data: { nodePath: context.path, iteration: context.iteration, condition: context.condition },
              },
      },
      always: [
        { guard: "succeeded", target: "done" },
        { guard: "exhausted", target: "exhausted" },
        { target: "directing", actions: "nextIteration" },
      ],
    },
    done: { description: "The evaluator accepted the attempt, or the termination condition held.", type: "final" },
    exhausted: { description: "Every iteration ran without meeting the success criteria.", type: "final" },
    failed: { description: "A director, script or evaluator failed, or the loop was malformed.", type: "final" },
  },
  output: ({ context }) => {
    if (context.result) return context.result;
    const last = context.history.at(-1);
    const notes = {
      iteration_history: context.history,
      final_evaluation: context.evaluation?.notes ?? null,
      iterations_completed: context.history.length,
    };
    if (context.reason !== undefined) {
      return { content: last?.director?.content ?? "", status: "COMPLETE", notes: { ...notes, termination_reason: context.reason } };
    }
    const best = bestAttempt(context.history);
    return {
      content: best?.director?.content ?? "",
      status: "FAILED",
      notes: { ...notes, termination_reason: "max_iterations_reached", best_iteration: best?.iteration ?? null },
      error: {
        type: "TASK_FAILURE",
        reason: "execution_halted",
        message: `Director-Evaluator loop reached max iterations (${context.maxIterations}) without meeting success criteria`,
      },
    };
  },
});
