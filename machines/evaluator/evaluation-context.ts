/**
 * What an evaluation knows (machines/evaluator/evaluation.ts): the summary of the node it decides on, its input
 * and context, and the pure rules it applies (binding outcomes, which failures decomposition may recover from).
 */
import { taskFailure, type TaskError, type TaskId, type TaskResult } from "../../protocol/index.js";
import type { Env } from "../language/env.js";
import type { AccumulationFormat } from "../language/ast.js";
import { messageOf } from "../../protocol/errors.js";
import type { Scoped } from "../scoped.js";

export type { Scoped } from "../scoped.js";

/** The part of a template node the walk decides on: plain data, summarised by the shell. */
export interface EvalNode {
  kind: string;
  type?: string;
  /** The task's `subtype`, when it has one. */
  subtype?: string;
  loc?: { line: number; col: number };
  /** `ref` of a task: the name of a template of the library, run in the task's place. */
  ref?: string;
  /** atomic: the task may be decomposed by the Compiler when it runs out of a resource (not `disable_reparsing`). */
  reparse?: boolean;
  /** `name` of a task, or the called template of a `<call>`. */
  name?: string;
  /** sequential: number of `<steps>`. */
  stepCount?: number;
  /** sequential: the `<output_slot>` of each step that has one (step index → variable name). */
  outputSlots?: Record<number, string>;
  /** sequential: `accumulate_data` in effect. */
  accumulate?: boolean;
  /** sequential: `accumulation_format` in effect. */
  format?: AccumulationFormat;
  /**
   * A task with an `<input>` that is a nested task: binding evaluates it (the `bindInputs` actor). Without one, the
   * inputs are bound at once (the `bindNow` action).
   */
  inputTasks?: boolean;
  /** map: `max_parallel`, `on_failure`, and for a map over a list `over` and `as` (reduce: `over`). */
  map?: { maxParallel?: number; onFailure?: "fail_fast" | "collect"; over?: string; as?: string };
  /** reduce: literal `<initial_value>` text. */
  initialValue?: string;
  /** reduce: whether `<initial_value>` holds a task. */
  initialTask?: boolean;
  /** director–evaluator loop: which of `<director>`, `<evaluator>`, `<script_execution>` it has. */
  loop?: { director: boolean; evaluator: boolean; script: boolean; maxIterations?: number; condition?: string };
  /** judge_loop (checkmate): its settings. */
  checkmate?: { maxIterations?: number; criteriaJudge?: boolean; maxIntakeRounds?: number };
}

/** Input of an evaluation. */
export interface EvaluationInput<N extends EvalNode = EvalNode> extends Scoped {
  taskId: TaskId;
  /** Path of the node in its document. */
  path: string;
  /** Summary of the node at `path`. */
  node: N;
  /** The environment the node is evaluated in. */
  env: Env;
  /** Whether this is the document's entry node (its literal inputs are defaults the submitted inputs override). */
  entry: boolean;
}

/** Context of an evaluation. */
export interface EvaluationContext<N extends EvalNode = EvalNode> extends EvaluationInput<N> {
  result?: TaskResult;
}

/** What binding a node's inputs gives: its environment, or the failure that stopped it. */
export type BindOutcome = { env: Env } | { result: TaskResult };

/** Upper bound on the characters (step output and serialized notes) a SequentialHistory keeps. */
export const MAX_HISTORY_CHARS = 64_000;

/** Task types the atomic path executes. */
export const ATOMIC_TYPES: ReadonlySet<string> = new Set(["atomic", "standard", "subtask", "director", "evaluator"]);

export const failed = (reason: "not_supported" | "unexpected_error" | "execution_halted", message: string) => taskFailure(reason, message);

/** A node as the user wrote it, with its line and column, for messages. */
export function describe(node: EvalNode): string {
  const at = node.loc ? ` at line ${node.loc.line}, column ${node.loc.col}` : "";
  const ref = node.ref === undefined ? "" : ` ref="${node.ref}"`;
  return `<${node.kind}${node.type ? ` type="${node.type}"` : ""}${ref}>${at}`;
}

/** An unexpected throw as the evaluation's failure. */
export function errorResult(error: unknown): TaskResult {
  return failed("unexpected_error", messageOf(error));
}

/** The context with the node's inputs bound: its environment, or the failure that stopped the binding. */
export function withBinding(outcome: BindOutcome): { env: Env } | { result: TaskResult } {
  return "result" in outcome ? { result: outcome.result } : { env: outcome.env };
}

/**
 * The context once `bind` has bound the node's inputs at once: the `bindNow` action, provided by the shell as
 * `assign(() => boundNow(() => ...))`. A throw is the evaluation's failure.
 */
export function boundNow(bind: () => BindOutcome): { env: Env } | { result: TaskResult } {
  try {
    return withBinding(bind());
  } catch (error) {
    return { result: failed("unexpected_error", messageOf(error)) };
  }
}

/** An error decomposition may recover from: a resource ran out (not the task's budget), or the error says it is recoverable. */
export function recoverableError(error: TaskError | undefined): boolean {
  if (!error) return false;
  // A spent budget is not recovered by decomposing: that would spend more.
  if (error.type === "RESOURCE_EXHAUSTION") return error.resource !== "budget";
  return error.type === "TASK_FAILURE" && error.details?.["recoverable"] === true;
}

/** A failed result decomposition may recover from ({@link recoverableError}). */
export function recoverable(result: TaskResult): boolean {
  return result.status === "FAILED" && recoverableError(result.error);
}
