/**
 * The Evaluator's walk of one node of a task template.
 *
 * idle → routing → (binding →) bound → runningAtomic | runningSequential | runningMap | runningMemory | runningScript | runningLoop | runningCheckmate, or →
 * runningReduce | runningCall | runningCond, each → done | failed;
 * → unsupported for task types it does not know. The machine knows nodes by *path* (`0`, `0.steps.2`,
 * `templates.1.body`) and a plain summary ({@link EvalNode}); the shell resolves paths to typed AST nodes.
 * Composites are child machines registered by name: `sequential`, `map`, `reduce`, `directorEvaluator`, `checkmate` (a
 * `judge_loop`), and
 * `continuation` for an atomic task whose session returned CONTINUATION (a subtask or an evaluation). An atomic
 * task that fails recoverably ({@link recoverable}), before or after a continuation, goes to `reparsing`.
 * Effects: `bindNow` (an action: the node's `<inputs>` bound into its environment at once) or `bindInputs` (an actor, when
 * an input is a nested task to evaluate first), `runAtomic` (substitute and run
 * in a Handler), `runScript` (a `script` task's command, run by a Handler), `runCall` (a function template call), `runCond` (the first true case of a `<cond>`) and `progress`. `evaluation.cancel` aborts the node in flight.
 * The machine waits in `idle` for START (machines/invoke-events.ts), and sends it to each composite it invokes.
 */
import { assign, fromPromise, sendTo, setup } from "xstate";
import type { TaskResult } from "../../protocol/index.js";
import type { Env } from "../language/env.js";
import { continuationMachine, DEFAULT_MAX_EVALUATIONS, DEFAULT_MAX_SUBTASK_DEPTH, type SuspendedResult } from "./continuation.js";
import { checkmateMachine } from "./checkmate.js";
import { directorEvaluatorMachine } from "./loop.js";
import { notProvided } from "../not-provided.js";
import { errorOf, outputOf, START, type StartEvent, idleUntilStarted } from "../invoke-events.js";
import { reduceMachine } from "./reduce.js";
import { DEFAULT_MAX_PARALLEL, mapMachine } from "./map.js";
import { sequentialMachine, type ProgressParams } from "./sequential.js";
import {
  ATOMIC_TYPES,
  boundNow,
  describe,
  errorResult,
  failed,
  MAX_HISTORY_CHARS,
  recoverable,
  withBinding,
  type BindOutcome,
  type EvalNode,
  type EvaluationContext,
  type EvaluationInput,
  type Scoped,
} from "./evaluation-context.js";

export * from "./evaluation-context.js";

const isTask = (node: EvalNode, type: string) => node.kind === "task" && (node.type ?? "atomic") === type;

/** How a node runs, by its kind and type (the machine's guards). */
const runsAs = {
  ref: (node: EvalNode) => node.kind === "task" && node.ref !== undefined,
  atomic: (node: EvalNode) =>
    node.kind === "task" && node.ref === undefined && ATOMIC_TYPES.has(node.type ?? "atomic") && node.subtype !== "associative_matching",
  sequential: (node: EvalNode) => isTask(node, "sequential"),
  map: (node: EvalNode) => node.ref === undefined && isTask(node, "map"),
  memory: (node: EvalNode) =>
    node.ref === undefined && (isTask(node, "associative_memory") || (isTask(node, "atomic") && node.subtype === "associative_matching")),
  script: (node: EvalNode) => node.ref === undefined && isTask(node, "script"),
  // A loop without its director or evaluator reaches the child machine, which answers input_validation_failure.
  loop: (node: EvalNode) => node.ref === undefined && isTask(node, "director_evaluator_loop"),
  checkmate: (node: EvalNode) => node.ref === undefined && isTask(node, "judge_loop"),
};

/** Nodes whose inputs are bound before they run: those routed through `bound` (reduce folds its inputs itself). */
const bindable = (node: EvalNode) => Object.values(runsAs).some((runs) => runs(node));

/** The `node.started` report a composite state enters with. */
const started = (kind: string, message: (context: EvaluationContext) => string) =>
  ({
    type: "progress",
    params: ({ context }: { context: EvaluationContext }) => ({
      event: "node.started",
      message: message(context),
      data: { nodePath: context.path, kind },
    }),
  }) as const;

/** An invoke's result is the evaluation's: done with its output, failed with its thrown error. */
const settles = {
  onDone: { target: "done", actions: "storeResult" },
  onError: { target: "failed", actions: "failThrew" },
} as const;

function unsupported(node: EvalNode): string {
  const runs =
    "atomic, sequential, map, reduce, script, associative_memory, director_evaluator_loop and judge_loop tasks, library templates (ref), calls of function templates and cond";
  return `${describe(node)} is not supported: dirigent executes ${runs}`;
}

/** The evaluation machine. */
export const evaluationMachine = setup({
  types: {
    input: {} as EvaluationInput,
    context: {} as EvaluationContext,
    events: {} as { type: "evaluation.cancel" } | StartEvent,
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
    bindInputs: fromPromise<BindOutcome, { path: string; env: Env; entry: boolean } & Scoped>(async () =>
      notProvided("evaluation.bindInputs"),
    ),
    runAtomic: fromPromise<SuspendedResult, { path: string; env: Env } & Scoped>(async () => notProvided("evaluation.runAtomic")),
    continuation: continuationMachine,
    runCall: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async () => notProvided("evaluation.runCall")),
    runCond: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async () => notProvided("evaluation.runCond")),
    runScript: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async () => notProvided("evaluation.runScript")),
    runRef: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async () => notProvided("evaluation.runRef")),
    runMemory: fromPromise<TaskResult, { path: string; env: Env } & Scoped>(async () => notProvided("evaluation.runMemory")),
    reparse: fromPromise<TaskResult, { path: string; env: Env; result: TaskResult } & Scoped>(async () =>
      notProvided("evaluation.reparse"),
    ),
    sequential: sequentialMachine,
    map: mapMachine,
    directorEvaluator: directorEvaluatorMachine,
    checkmate: checkmateMachine,
    reduce: reduceMachine,
  },
  guards: {
    isAtomic: ({ context }) => runsAs.atomic(context.node),
    isRef: ({ context }) => runsAs.ref(context.node),
    isSequential: ({ context }) => runsAs.sequential(context.node),
    isMap: ({ context }) => runsAs.map(context.node),
    isMemory: ({ context }) => runsAs.memory(context.node),
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
  initial: "idle",
  on: {
    "evaluation.cancel": {
      target: ".failed",
      actions: "failCancelled",
    },
  },
  states: {
    idle: idleUntilStarted("routing"),
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
        input: ({ context }) => ({ path: context.path, env: context.env, entry: context.entry, scopeKey: context.scopeKey }),
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
        { guard: "isMap", target: "runningMap" },
        { guard: "isMemory", target: "runningMemory" },
        { guard: "isScript", target: "runningScript" },
        { guard: "isLoop", target: "runningLoop" },
        { guard: "isCheckmate", target: "runningCheckmate" },
        { target: "runningAtomic" },
      ],
    },
    runningAtomic: {
      description: "One atomic task: one Handler session.",
      entry: started("atomic", () => "atomic task started"),
      invoke: {
        src: "runAtomic",
        input: ({ context }) => ({ path: context.path, env: context.env, scopeKey: context.scopeKey }),
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
      entry: sendTo("continuation", START),
      invoke: {
        id: "continuation",
        src: "continuation",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
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
          scopeKey: context.scopeKey,
          path: context.path,
          env: context.env,
          result: context.result ?? failed("unexpected_error", "no result to reparse"),
        }),
        ...settles,
      },
    },
    runningSequential: {
      description: "A sequential task: its steps run in the `sequential` child machine.",
      entry: [
        started("sequential", (context) => `sequential task started: ${context.node.stepCount ?? 0} steps`),
        sendTo("sequential", START),
      ],
      invoke: {
        id: "sequential",
        src: "sequential",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
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
    runningMap: {
      description: "A map task: its branches run at once (at most max_parallel) in the `map` child machine.",
      entry: sendTo("map", START),
      invoke: {
        id: "map",
        src: "map",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
          path: context.path,
          stepCount: context.node.stepCount ?? 0,
          env: context.env,
          maxParallel: context.node.map?.maxParallel ?? DEFAULT_MAX_PARALLEL,
          onFailure: context.node.map?.onFailure ?? "fail_fast",
          ...(context.node.map?.over === undefined ? {} : { over: context.node.map.over }),
          as: context.node.map?.as ?? "item",
        }),
        ...settles,
      },
    },
    runningMemory: {
      description: "An associative memory task: Memory matches its query against the file index; no model session.",
      entry: started("associative_memory", () => "associative memory task started"),
      invoke: {
        src: "runMemory",
        input: ({ context }) => ({ path: context.path, env: context.env, scopeKey: context.scopeKey }),
        ...settles,
      },
    },
    runningScript: {
      description: "A script task: its command runs in a Handler, as argv, never through a shell.",
      entry: started("script", () => "script task started"),
      invoke: {
        src: "runScript",
        input: ({ context }) => ({ path: context.path, env: context.env, scopeKey: context.scopeKey }),
        ...settles,
      },
    },
    runningLoop: {
      description: "A director–evaluator loop: its iterations run in the `directorEvaluator` child machine.",
      entry: [started("director_evaluator_loop", () => "director-evaluator loop started"), sendTo("directorEvaluator", START)],
      invoke: {
        id: "directorEvaluator",
        src: "directorEvaluator",
        input: ({ context }) => {
          const loop = context.node.loop ?? { director: false, evaluator: false, script: false };
          return {
            scopeKey: context.scopeKey,
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
      entry: [started("judge_loop", () => "checkmate loop started"), sendTo("checkmate", START)],
      invoke: {
        id: "checkmate",
        src: "checkmate",
        input: ({ context }) => ({ path: context.path, env: context.env, ...(context.node.checkmate ?? {}), scopeKey: context.scopeKey }),
        ...settles,
      },
    },
    runningReduce: {
      description: "A reduce task: its inputs are folded in the `reduce` child machine.",
      entry: [started("reduce", () => "reduce task started"), sendTo("reduce", START)],
      invoke: {
        id: "reduce",
        src: "reduce",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
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
        input: ({ context }) => ({ path: context.path, env: context.env, scopeKey: context.scopeKey }),
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
        input: ({ context }) => ({ path: context.path, env: context.env, scopeKey: context.scopeKey }),
        ...settles,
      },
    },
    runningCond: {
      description: "A <cond>: the body of the first case whose test is true runs.",
      invoke: {
        src: "runCond",
        input: ({ context }) => ({ path: context.path, env: context.env, scopeKey: context.scopeKey }),
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
