/**
 * The Evaluator's walk of one task template.
 *
 * routing → runningAtomic → done | failed, or → unsupported for constructs a later release executes.
 * Effects: the `runAtomic` actor (substitute the node's fields and run it in a Handler) and `progress`
 * (report a step to the owning Director). `evaluation.cancel` aborts the node in flight.
 */
import { assign, fromPromise, setup } from "xstate";
import type { TaskInputs, TaskResult } from "../protocol/index.js";
import { notProvided } from "./not-provided.js";

/** The part of a template node the walk decides on. */
export interface EvalNode {
  kind: string;
  type?: string;
  loc?: { line: number; col: number };
}

/** Input of an evaluation. */
export interface EvaluationInput<N extends EvalNode = EvalNode> {
  taskId: string;
  /** The document's entry node. */
  node: N;
  /** Submitted inputs (the root environment). */
  inputs: TaskInputs;
}

/** Context of an evaluation. */
export interface EvaluationContext<N extends EvalNode = EvalNode> extends EvaluationInput<N> {
  result?: TaskResult;
}

/** Task types the atomic path executes. */
const ATOMIC_TYPES = new Set(["atomic", "standard", "subtask", "director", "evaluator"]);

function failed(reason: "not_supported" | "unexpected_error" | "execution_halted", message: string): TaskResult {
  return { content: "", status: "FAILED", notes: {}, error: { type: "TASK_FAILURE", reason, message } };
}

function describe(node: EvalNode): string {
  const at = node.loc ? ` at line ${node.loc.line}, column ${node.loc.col}` : "";
  return `<${node.kind}${node.type ? ` type="${node.type}"` : ""}>${at}`;
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
    progress: (_, _params: { event: string; message: string; data?: Record<string, unknown> }) => undefined,
  },
  actors: {
    runAtomic: fromPromise<TaskResult, { node: EvalNode; inputs: TaskInputs; nodePath: string }>(async () => notProvided("evaluation.runAtomic")),
  },
  guards: {
    isAtomic: ({ context }) => context.node.kind === "task" && ATOMIC_TYPES.has(context.node.type ?? "atomic"),
  },
}).createMachine({
  id: "evaluation",
  context: ({ input }) => input,
  initial: "routing",
  on: {
    "evaluation.cancel": {
      target: ".failed",
      actions: assign({ result: () => failed("execution_halted", "cancelled") }),
    },
  },
  states: {
    routing: {
      description: "Choose how to evaluate the entry node by its kind and type.",
      always: [{ guard: "isAtomic", target: "runningAtomic" }, { target: "unsupported" }],
    },
    runningAtomic: {
      description: "One atomic task: one Handler session.",
      entry: { type: "progress", params: { event: "node.started", message: "atomic task started", data: { nodePath: "0", kind: "atomic" } } },
      invoke: {
        src: "runAtomic",
        input: ({ context }) => ({ node: context.node, inputs: context.inputs, nodePath: "0" }),
        onDone: { target: "done", actions: assign({ result: ({ event }) => event.output }) },
        onError: {
          target: "failed",
          actions: assign({ result: ({ event }) => failed("unexpected_error", event.error instanceof Error ? event.error.message : String(event.error)) }),
        },
      },
    },
    unsupported: {
      description: "A construct this release parses but does not execute yet.",
      type: "final",
      entry: assign({
        result: ({ context }) => failed("not_supported", `${describe(context.node)} is not supported yet: this release executes atomic tasks only`),
      }),
    },
    done: { description: "The entry node produced a result.", type: "final" },
    failed: { description: "The evaluation could not be carried out, or was cancelled.", type: "final" },
  },
  output: ({ context }) => context.result ?? failed("unexpected_error", "evaluation ended without a result"),
});
