/**
 * What a continuation knows (machines/evaluator/continuation.ts): the `$` bindings the Evaluator reserves for subtask
 * chains and limits, the default limits, the machine's input and context, and what each of its effects is given.
 */
import type {
  AwaitRequest,
  CancelRequest,
  EvaluationRequest,
  InputRequest,
  SessionState,
  SubtaskRequest,
  TaskResult,
} from "../../protocol/index.js";
import { find, type Env } from "../language/env.js";
import type { SpawnedSubtask } from "./spawn.js";
import type { Scoped } from "./evaluation-context.js";

/** Env bindings the Evaluator reserves (`$` names cannot be written in a template). */
export const RESERVED = {
  /** Signatures of the subtask requests on the path to this node, outermost first. */
  chain: "$subtask_chain",
  /** Deepest subtask nesting allowed here. */
  maxDepth: "$subtask_max_depth",
  /** Evaluations one director session may ask for. */
  maxEvaluations: "$max_evaluations",
} as const;

/** A positive integer bound under a reserved name, or `fallback`. */
export function reservedLimit(env: Env, name: string, fallback: number): number {
  const found = find(env, name);
  return found.found && typeof found.value === "number" && Number.isInteger(found.value) && found.value > 0 ? found.value : fallback;
}

/** Default deepest subtask nesting (a setting: `DIRIGENT_MAX_SUBTASK_DEPTH`). */
export const DEFAULT_MAX_SUBTASK_DEPTH = 5;
/** Default evaluations one director session may ask for. */
export const DEFAULT_MAX_EVALUATIONS = 5;

/** A result the Handler suspended: CONTINUATION with its session. */
export type SuspendedResult = TaskResult & { session?: SessionState };

/** Input of a continuation. */
export interface ContinuationInput extends Scoped {
  /** Path of the atomic node. */
  path: string;
  /** The node's environment. */
  env: Env;
  /** The CONTINUATION result. */
  result: SuspendedResult;
  /** Default deepest nesting, when the environment sets none. */
  maxDepth: number;
  /** Evaluations one session may ask for. */
  maxEvaluations: number;
}

export type Pending =
  | { kind: "subtask"; request: SubtaskRequest; signature: string }
  | { kind: "spawn"; request: SubtaskRequest; signature: string }
  | { kind: "await"; request: AwaitRequest }
  | { kind: "cancel"; request: CancelRequest }
  | { kind: "evaluation"; request: EvaluationRequest }
  | { kind: "input"; request: InputRequest };

/** What `resumeAtomic` is given: the suspended session and the answer to resume it with. */
export interface ResumeInput extends Scoped {
  path: string;
  session: SessionState;
  answer: string;
}

/** What `waitForInput` is given. */
export interface InputWaitInput extends Scoped {
  path: string;
  request: InputRequest;
}

export interface ContinuationContext extends ContinuationInput {
  chain: string[];
  pending?: Pending;
  /** Subtasks run so far. */
  subtasks: number;
  /** Evaluations run so far. */
  evaluations: number;
  /** Subtasks spawned so far (`spawn_subtask`), in order. */
  spawned: SpawnedSubtask[];
  /** The handles the pending `await_subtasks` waits for. */
  awaiting: string[];
  /** Handles still running when the session ended: cancelled. */
  orphans: string[];
  /** The answer to resume the session with. */
  answer?: string;
  /** The latest evaluation's output, bound as `last_evaluator_output`. */
  lastEvaluatorOutput?: string;
  failure?: TaskResult;
}

/** What `runSubtask` is given: the request and the environment the child starts from. */
export interface SubtaskInput extends Scoped {
  path: string;
  request: SubtaskRequest;
  /** Number of the subtask within this node, from 1 (of its kind: run or spawned). */
  number: number;
  /** `subtask` (run_subtask) or `spawn` (spawn_subtask): its node paths are scoped `<path>/<scope><number>:`. */
  scope?: "subtask" | "spawn";
  /** Reserved bindings the child carries (chain, depth limit). */
  env: Env;
}

/** What `runEvaluation` is given. */
export interface EvaluationStepInput extends Scoped {
  path: string;
  request: EvaluationRequest;
  /** The director's output so far. */
  output: string;
  /** 1-based. */
  iteration: number;
  env: Env;
}

/** What `runEvaluation` answers: the evaluation, and the text the director's session gets back. */
export interface EvaluationOutcome {
  result: TaskResult;
  answer: string;
  /** The evaluation's output (or its error): bound as `last_evaluator_output`. */
  lastEvaluatorOutput: string;
}

/**
 * The one variable that survives between continuations of a dynamic director–evaluator: the director's next round sees the
 * evaluator's verdict and nothing else of the evaluation, so its context does not grow with every round.
 */
export const LAST_EVALUATOR_OUTPUT = "last_evaluator_output";
