/**
 * The Evaluator's walk of one node of a task template.
 *
 * routing → (binding →) bound → runningAtomic | runningSequential | runningScript | runningLoop | runningCheckmate, or →
 * runningReduce | runningCall | runningCond, each → done | failed;
 * → unsupported for task types it does not know. The machine knows nodes by *path* (`0`, `0.steps.2`,
 * `templates.1.body`) and a plain summary ({@link EvalNode}); the shell resolves paths to typed AST nodes.
 * Composites are child machines registered by name: `sequential`, `reduce`, `directorEvaluator`, `checkmate` (a
 * `judge_loop`), and
 * `continuation` for an atomic task whose session returned CONTINUATION (a subtask or an evaluation). An atomic
 * task that fails recoverably ({@link recoverable}), before or after a continuation, goes to `reparsing`.
 * Effects: `bindNow` (an action: the node's `<inputs>` bound into its environment at once) or `bindInputs` (an actor, when
 * an input is a nested task to evaluate first), `runAtomic` (substitute and run
 * in a Handler), `runScript` (a `script` task's command, run by a Handler), `runCall` (a function template call), `runCond` (the first true case of a `<cond>`) and `progress`. `evaluation.cancel` aborts the node in flight.
 */
import { assign, fromPromise, setup } from "xstate";
import { taskFailure, type TaskError, type TaskResult } from "../../protocol/index.js";
import type { Env } from "../language/env.js";
import { continuationMachine, DEFAULT_MAX_EVALUATIONS, DEFAULT_MAX_SUBTASK_DEPTH, type SuspendedResult } from "./continuation.js";
import { checkmateMachine } from "./checkmate.js";
import { directorEvaluatorMachine } from "./loop.js";
import { notProvided } from "../not-provided.js";
import { errorOf, outputOf } from "../invoke-events.js";
import { reduceMachine } from "./reduce.js";
import { sequentialMachine, type ProgressParams } from "./sequential.js";
import type { AccumulationFormat } from "../language/ast.js";
import { messageOf } from "../../protocol/errors.js";

/** The part of a template node the walk decides on: plain data, summarised by the shell. */
export interface EvalNode {
  kind: string;
  type?: string;
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
export interface EvaluationInput<N extends EvalNode = EvalNode> {
  taskId: string;
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

const failed = (reason: "not_supported" | "unexpected_error" | "execution_halted", message: string) => taskFailure(reason, message);

function describe(node: EvalNode): string {
  const at = node.loc ? ` at line ${node.loc.line}, column ${node.loc.col}` : "";
  const ref = node.ref === undefined ? "" : ` ref="${node.ref}"`;
  return `<${node.kind}${node.type ? ` type="${node.type}"` : ""}${ref}>${at}`;
}

function errorResult(error: unknown): TaskResult {
  return failed("unexpected_error", messageOf(error));
}

/** The context with the node's inputs bound: its environment, or the failure that stopped the binding. */
function withBinding(outcome: BindOutcome): { env: Env } | { result: TaskResult } {
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

const isTask = (node: EvalNode, type: string) => node.kind === "task" && (node.type ?? "atomic") === type;

/** How a node runs, by its kind and type (the machine's guards). */
const runsAs = {
  ref: (node: EvalNode) => node.kind === "task" && node.ref !== undefined,
  atomic: (node: EvalNode) => node.kind === "task" && node.ref === undefined && ATOMIC_TYPES.has(node.type ?? "atomic"),
  sequential: (node: EvalNode) => isTask(node, "sequential"),
  script: (node: EvalNode) => node.ref === undefined && isTask(node, "script"),
  // A loop without its director or evaluator reaches the child machine, which answers input_validation_failure.
  loop: (node: EvalNode) => node.ref === undefined && isTask(node, "director_evaluator_loop"),
  checkmate: (node: EvalNode) => node.ref === undefined && isTask(node, "judge_loop"),
};

/** Nodes whose inputs are bound before they run: those routed through `bound` (reduce folds its inputs itself). */
const bindable = (node: EvalNode) => Object.values(runsAs).some((runs) => runs(node));

/** An invoke's result is the evaluation's: done with its output, failed with its thrown error. */
const settles = {
  onDone: { target: "done", actions: "storeResult" },
  onError: { target: "failed", actions: "failThrew" },
} as const;

function unsupported(node: EvalNode): string {
  const runs =
    "atomic, sequential, reduce, script, director_evaluator_loop and judge_loop tasks, library templates (ref), calls of function templates and cond";
  return `${describe(node)} is not supported: dirigent executes ${runs}`;
}

/** The evaluation machine. */
export const evaluationMachine = setup({
  types: {
    input: {} as EvaluationInput,
    context: {} as EvaluationContext,
    events: {} as { type: "evaluation.cancel" },
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
    bindNow: assign(() => boundNow(() => notProvided("evaluation.bindNow"))),
    storeBinding: assign(({ event }) => withBinding(outputOf<BindOutcome>(event))),
    storeResult: assign({ result: ({ event }) => outputOf<TaskResult>(event) }),
    failThrew: assign({ result: ({ event }) => errorResult(errorOf(event)) }),
    failCancelled: assign({ result: () => failed("execution_halted", "cancelled") }),
    failUnsupported: assign({ result: ({ context }) => failed("not_supported", unsupported(context.node)) }),
  },
  actors: {
    bindInputs: fromPromise<BindOutcome, { path: string; env: Env; entry: boolean }>(async () => notProvided("evaluation.bindInputs")),
    runAtomic: fromPromise<SuspendedResult, { path: string; env: Env }>(async () => notProvided("evaluation.runAtomic")),
    continuation: continuationMachine,
    runCall: fromPromise<TaskResult, { path: string; env: Env }>(async () => notProvided("evaluation.runCall")),
    runCond: fromPromise<TaskResult, { path: string; env: Env }>(async () => notProvided("evaluation.runCond")),
    runScript: fromPromise<TaskResult, { path: string; env: Env }>(async () => notProvided("evaluation.runScript")),
    runRef: fromPromise<TaskResult, { path: string; env: Env }>(async () => notProvided("evaluation.runRef")),
    reparse: fromPromise<TaskResult, { path: string; env: Env; result: TaskResult }>(async () => notProvided("evaluation.reparse")),
    sequential: sequentialMachine,
    directorEvaluator: directorEvaluatorMachine,
    checkmate: checkmateMachine,
    reduce: reduceMachine,
  },
  guards: {
    isAtomic: ({ context }) => runsAs.atomic(context.node),
    isRef: ({ context }) => runsAs.ref(context.node),
    isSequential: ({ context }) => runsAs.sequential(context.node),
    isReduce: ({ context }) => isTask(context.node, "reduce"),
    isScript: ({ context }) => runsAs.script(context.node),
    isLoop: ({ context }) => runsAs.loop(context.node),
    isCheckmate: ({ context }) => runsAs.checkmate(context.node),
    isCall: ({ context }) => context.node.kind === "call",
    isCond: ({ context }) => context.node.kind === "cond",
    isBindable: ({ context }) => bindable(context.node),
    bindsTasks: ({ context }) => bindable(context.node) && context.node.inputTasks === true,
    // Nothing but binding sets a result before the node runs.
    bindFailed: ({ context }) => context.result !== undefined,
    suspended: ({ event }) => outputOf<TaskResult>(event).status === "CONTINUATION",
    // A failure decomposition may recover from, on a node that asks for it.
    reparseRecovers: ({ context, event }) => context.node.reparse === true && recoverable(outputOf<TaskResult>(event)),
  },
}).createMachine({
  id: "evaluation",
  context: ({ input }) => input,
  initial: "routing",
  on: {
    "evaluation.cancel": {
      target: ".failed",
      actions: "failCancelled",
    },
  },
  states: {
    routing: {
      description:
        "Choose how to evaluate the node by its kind and type. A task's <inputs> are bound first: at once (`bindNow`), or by the `bindInputs` actor when one of them is a nested task to evaluate.",
      always: [
        { guard: "bindsTasks", target: "binding" },
        { guard: "isBindable", target: "bound", actions: "bindNow" },
        { guard: "isReduce", target: "runningReduce" },
        { guard: "isCall", target: "runningCall" },
        { guard: "isCond", target: "runningCond" },
        { target: "unsupported" },
      ],
    },
    binding: {
      description: "Evaluate the nested tasks among the task's <inputs>, and bind all of them into a child environment.",
      invoke: {
        id: "bindInputs",
        src: "bindInputs",
        input: ({ context }) => ({ path: context.path, env: context.env, entry: context.entry }),
        onDone: { target: "bound", actions: "storeBinding" },
        onError: settles.onError,
      },
    },
    bound: {
      description:
        "The task's inputs are bound (env variables, literals, nested tasks' results) into a child environment: run it by its type.",
      always: [
        { guard: "bindFailed", target: "failed" },
        { guard: "isRef", target: "runningRef" },
        { guard: "isSequential", target: "runningSequential" },
        { guard: "isScript", target: "runningScript" },
        { guard: "isLoop", target: "runningLoop" },
        { guard: "isCheckmate", target: "runningCheckmate" },
        { target: "runningAtomic" },
      ],
    },
    runningAtomic: {
      description: "One atomic task: one Handler session.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "node.started",
          message: "atomic task started",
          data: { nodePath: context.path, kind: "atomic" },
        }),
      },
      invoke: {
        src: "runAtomic",
        input: ({ context }) => ({ path: context.path, env: context.env }),
        onDone: [
          { guard: "suspended", target: "continuing", actions: "storeResult" },
          { guard: "reparseRecovers", target: "reparsing", actions: "storeResult" },
          settles.onDone,
        ],
        onError: settles.onError,
      },
    },
    continuing: {
      description:
        "CONTINUATION: the session asked for a subtask or an evaluation; the `continuation` child machine answers it and resumes the session.",
      invoke: {
        src: "continuation",
        input: ({ context }) => ({
          path: context.path,
          env: context.env,
          result: context.result ?? failed("unexpected_error", "no continuation result"),
          maxDepth: DEFAULT_MAX_SUBTASK_DEPTH,
          maxEvaluations: DEFAULT_MAX_EVALUATIONS,
        }),
        onDone: [
          // A session that runs out of a resource after resuming is decomposed like one that never suspended.
          { guard: "reparseRecovers", target: "reparsing", actions: "storeResult" },
          settles.onDone,
        ],
        onError: settles.onError,
      },
    },
    reparsing: {
      description: "The task ran out of a resource: the Compiler decomposes it into a sub-tree that runs in its place (at most 3 times).",
      invoke: {
        src: "reparse",
        input: ({ context }) => ({
          path: context.path,
          env: context.env,
          result: context.result ?? failed("unexpected_error", "no result to reparse"),
        }),
        ...settles,
      },
    },
    runningSequential: {
      description: "A sequential task: its steps run in the `sequential` child machine.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "node.started",
          message: `sequential task started: ${context.node.stepCount ?? 0} steps`,
          data: { nodePath: context.path, kind: "sequential" },
        }),
      },
      invoke: {
        src: "sequential",
        input: ({ context }) => ({
          path: context.path,
          stepCount: context.node.stepCount ?? 0,
          env: context.env,
          accumulate: context.node.accumulate ?? true,
          format: context.node.format ?? "notes_only",
          maxHistoryChars: MAX_HISTORY_CHARS,
          ...(context.node.outputSlots ? { outputSlots: context.node.outputSlots } : {}),
        }),
        ...settles,
      },
    },
    runningScript: {
      description: "A script task: its command runs in a Handler, as argv, never through a shell.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "node.started",
          message: "script task started",
          data: { nodePath: context.path, kind: "script" },
        }),
      },
      invoke: {
        src: "runScript",
        input: ({ context }) => ({ path: context.path, env: context.env }),
        ...settles,
      },
    },
    runningLoop: {
      description: "A director–evaluator loop: its iterations run in the `directorEvaluator` child machine.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "node.started",
          message: "director-evaluator loop started",
          data: { nodePath: context.path, kind: "director_evaluator_loop" },
        }),
      },
      invoke: {
        src: "directorEvaluator",
        input: ({ context }) => {
          const loop = context.node.loop ?? { director: false, evaluator: false, script: false };
          return {
            path: context.path,
            env: context.env,
            hasDirector: loop.director,
            hasEvaluator: loop.evaluator,
            hasScript: loop.script,
            ...(loop.maxIterations === undefined ? {} : { maxIterations: loop.maxIterations }),
            ...(loop.condition === undefined ? {} : { condition: loop.condition }),
          };
        },
        ...settles,
      },
    },
    runningCheckmate: {
      description: "A judge_loop (checkmate): intake, then worker and judge iterations in the `checkmate` child machine.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "node.started",
          message: "checkmate loop started",
          data: { nodePath: context.path, kind: "judge_loop" },
        }),
      },
      invoke: {
        src: "checkmate",
        input: ({ context }) => ({ path: context.path, env: context.env, ...(context.node.checkmate ?? {}) }),
        ...settles,
      },
    },
    runningReduce: {
      description: "A reduce task: its inputs are folded in the `reduce` child machine.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "node.started",
          message: "reduce task started",
          data: { nodePath: context.path, kind: "reduce" },
        }),
      },
      invoke: {
        src: "reduce",
        input: ({ context }) => ({
          path: context.path,
          env: context.env,
          initialValue: context.node.initialValue ?? "",
          initialTask: context.node.initialTask ?? false,
        }),
        ...settles,
      },
    },
    runningRef: {
      description: "A task with `ref`: the library template of that name runs with the task's inputs.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "call.started",
          message: `template ${context.node.ref ?? ""}`,
          data: { nodePath: context.path, template: context.node.ref },
        }),
      },
      invoke: {
        src: "runRef",
        input: ({ context }) => ({ path: context.path, env: context.env }),
        ...settles,
      },
    },
    runningCall: {
      description: "A call of a function template: arguments bound, the template's body evaluated.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "call.started",
          message: `call ${context.node.name ?? ""}`,
          data: { nodePath: context.path, template: context.node.name },
        }),
      },
      invoke: {
        src: "runCall",
        input: ({ context }) => ({ path: context.path, env: context.env }),
        ...settles,
      },
    },
    runningCond: {
      description: "A <cond>: the body of the first case whose test is true runs.",
      invoke: {
        src: "runCond",
        input: ({ context }) => ({ path: context.path, env: context.env }),
        ...settles,
      },
    },
    unsupported: {
      description: "A construct this release parses but does not execute yet.",
      type: "final",
      entry: "failUnsupported",
    },
    done: { description: "The node produced a result.", type: "final" },
    failed: { description: "The evaluation could not be carried out, or was cancelled.", type: "final" },
  },
  output: ({ context }) => context.result ?? failed("unexpected_error", "evaluation ended without a result"),
});
