/**
 * A `reduce` task (docs/task-language.md#reduce): fold its `<inputs>` in order into an accumulator.
 *
 * idle → resolving → initialising? → inner → reducing → (next input) … → done | failed. The `resolveItems` actor gives the input values;
 * the accumulator starts as `<initial_value>` (literal text, or the output of its task at `<path>.initialValue.task`).
 * For each input, `<inner_task>` (`<path>.innerTask`) runs with `current_input`, `input_name`, `input_index` and
 * `accumulator` bound; then `<reduction_task>` (`<path>.reductionTask`) runs with `current_result`, `accumulator`
 * and `original_input`, and its output becomes the new accumulator. Output: the final accumulator.
 */
import { assign, fromPromise, setup } from "xstate";
import { thrownError, type TaskError, type TaskResult } from "../../protocol/index.js";
import { extend, type Env } from "../language/env.js";
import { notProvided } from "../not-provided.js";
import { errorOf, outputOf, type StartEvent, idleUntilStarted } from "../invoke-events.js";
import { compositeFailure, type ProgressParams, type RunStepInput } from "./sequential.js";
import type { Scoped } from "./evaluation-context.js";

/** One input of a reduce task, resolved. */
export interface ReduceItem {
  /** The `<input name>`. */
  name: string;
  /** Its value. */
  value: unknown;
}

/** What resolving the inputs gives: the items, or the result of the input that failed. */
export type ResolvedItems = { items: ReduceItem[] } | { result: TaskResult };

/** Input of a reduce actor. */
export interface ReduceInput extends Scoped {
  /** Path of the reduce task node. */
  path: string;
  /** The environment of the task. */
  env: Env;
  /** Literal `<initial_value>` text ("" when absent). */
  initialValue: string;
  /** Whether `<initial_value>` holds a task to run for the starting accumulator. */
  initialTask: boolean;
}

/** One processed input, as reported in partial results. */
export interface ReducePartial {
  /** 0-based index of the input. */
  index: number;
  /** The inner task's output. */
  result: string;
  /** The accumulator after the reduction. */
  accumulator: string;
}

/** Context of a reduce actor. */
export interface ReduceContext extends ReduceInput {
  items: ReduceItem[];
  index: number;
  accumulator: string;
  /** Output of the inner task for the current input. */
  current: string;
  partials: ReducePartial[];
  result?: TaskResult;
}

function item(context: ReduceContext): ReduceItem {
  return context.items[context.index] ?? { name: "", value: "" };
}

function failure(context: ReduceContext, phase: string, error: TaskError | undefined): TaskResult {
  const where = phase === "initial_value" ? "initial_value" : `${phase} of input ${context.index + 1}/${context.items.length}`;
  return compositeFailure(error, `reduce failed in ${where}: ${error?.message ?? "no error given"}`, {
    phase,
    failedInputIndex: context.index,
    totalInputs: context.items.length,
    processedInputs: context.partials.length,
    currentAccumulator: context.accumulator,
    partialResults: context.partials,
  });
}

const itemsOf = (resolved: ResolvedItems): ReduceItem[] => ("items" in resolved ? resolved.items : []);
const resolveError = (resolved: ResolvedItems): TaskError | undefined => ("result" in resolved ? resolved.result.error : undefined);

/** The context once the reduction of the current input produced `accumulator`. */
export function folded(context: ReduceContext, accumulator: string): Partial<ReduceContext> {
  return {
    accumulator,
    partials: [...context.partials, { index: context.index, result: context.current, accumulator }],
    index: context.index + 1,
  };
}

const ok = ({ event }: { event: { output: TaskResult } }) => event.output.status === "COMPLETE";

/** The reduce machine. */
export const reduceMachine = setup({
  types: {
    input: {} as ReduceInput,
    context: {} as ReduceContext,
    events: {} as StartEvent,
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
    storeItems: assign({ items: ({ event }) => itemsOf(outputOf<ResolvedItems>(event)) }),
    failInputs: assign({ result: ({ context, event }) => failure(context, "inputs", resolveError(outputOf<ResolvedItems>(event))) }),
    startAccumulator: assign({ accumulator: ({ event }) => outputOf<TaskResult>(event).content }),
    storeInnerResult: assign({ current: ({ event }) => outputOf<TaskResult>(event).content }),
    /** The reduction's output is the new accumulator; the input is done and recorded in the partial results. */
    foldReduction: assign(({ context, event }) => folded(context, outputOf<TaskResult>(event).content)),
    failStep: assign({
      result: ({ context, event }, params: { phase: string }) => failure(context, params.phase, outputOf<TaskResult>(event).error),
    }),
    failThrew: assign({
      result: ({ context, event }, params: { phase: string }) => failure(context, params.phase, thrownError(errorOf(event))),
    }),
  },
  actors: {
    resolveItems: fromPromise<ResolvedItems, { path: string; env: Env } & Scoped>(async () => notProvided("reduce.resolveItems")),
    runStep: fromPromise<TaskResult, RunStepInput>(async () => notProvided("reduce.runStep")),
  },
  guards: {
    hasInitialTask: ({ context }) => context.initialTask,
    hasNextInput: ({ context }) => context.index < context.items.length,
    inputsFailed: ({ event }) => "result" in outputOf<ResolvedItems>(event),
  },
}).createMachine({
  id: "reduce",
  context: ({ input }) => ({ ...input, items: [], index: 0, accumulator: input.initialValue, current: "", partials: [] }),
  initial: "idle",
  states: {
    idle: idleUntilStarted("resolving"),
    resolving: {
      description: "Resolve the values of the task's <inputs>.",
      invoke: {
        src: "resolveItems",
        input: ({ context }) => ({ path: context.path, env: context.env, scopeKey: context.scopeKey }),
        onDone: [
          { guard: "inputsFailed", target: "failed", actions: "failInputs" },
          { target: "starting", actions: "storeItems" },
        ],
        onError: { target: "failed", actions: { type: "failThrew", params: { phase: "inputs" } } },
      },
    },
    starting: {
      always: [{ guard: "hasInitialTask", target: "initialising" }, { target: "advancing" }],
    },
    initialising: {
      description: "Run the task of <initial_value>; its output is the starting accumulator.",
      invoke: {
        src: "runStep",
        input: ({ context }) => ({ path: `${context.path}.initialValue.task`, env: context.env, scopeKey: context.scopeKey }),
        onDone: [
          { guard: ok, target: "advancing", actions: "startAccumulator" },
          { target: "failed", actions: { type: "failStep", params: { phase: "initial_value" } } },
        ],
        onError: { target: "failed", actions: { type: "failThrew", params: { phase: "initial_value" } } },
      },
    },
    advancing: {
      always: [{ guard: "hasNextInput", target: "inner" }, { target: "done" }],
    },
    inner: {
      description: "The inner task processes one input.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "step.started",
          message: `input ${context.index + 1}/${context.items.length}`,
          data: { nodePath: `${context.path}.innerTask`, input: context.index + 1, totalInputs: context.items.length },
        }),
      },
      invoke: {
        src: "runStep",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
          path: `${context.path}.innerTask`,
          env: extend(context.env, {
            current_input: item(context).value,
            input_name: item(context).name,
            input_index: context.index,
            accumulator: context.accumulator,
          }),
        }),
        onDone: [
          { guard: ok, target: "reducing", actions: "storeInnerResult" },
          { target: "failed", actions: { type: "failStep", params: { phase: "inner_task" } } },
        ],
        onError: { target: "failed", actions: { type: "failThrew", params: { phase: "inner_task" } } },
      },
    },
    reducing: {
      description: "The reduction task folds the inner result into the accumulator.",
      invoke: {
        src: "runStep",
        input: ({ context }) => ({
          scopeKey: context.scopeKey,
          path: `${context.path}.reductionTask`,
          env: extend(context.env, {
            current_result: context.current,
            accumulator: context.accumulator,
            original_input: item(context).value,
            input_name: item(context).name,
            input_index: context.index,
          }),
        }),
        onDone: [
          {
            guard: ok,
            target: "advancing",
            actions: "foldReduction",
          },
          { target: "failed", actions: { type: "failStep", params: { phase: "reduction_task" } } },
        ],
        onError: { target: "failed", actions: { type: "failThrew", params: { phase: "reduction_task" } } },
      },
    },
    done: { description: "Every input was folded in.", type: "final" },
    failed: { description: "An input, the initial value or a task failed; the error carries the partial results.", type: "final" },
  },
  output: ({ context }) => context.result ?? { content: context.accumulator, status: "COMPLETE", notes: { inputs: context.items.length } },
});
