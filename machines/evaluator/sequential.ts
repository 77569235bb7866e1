/**
 * A `sequential` task: its `<steps>` run in order, each in the environment of the task plus what earlier
 * steps produced (docs/task-language.md#sequential).
 *
 * idle → advancing ⇄ running → done | failed. Each step is evaluated by the `runStep` actor (the shell evaluates the
 * node at the step's path). After each step, the next step sees `step_results` (every earlier result, in order, as
 * `{content, status, parsedContent?, notes?}`), `previous_result` (the last output), `result` (its value), the
 * `<output_slot>` variables of earlier steps and the latest `last_evaluator_output` (`result`, the slots and
 * `last_evaluator_output` are kept so that templates written for the earlier variable wiring run unchanged),
 * and, when the task accumulates data, `history`: the SequentialHistory in the task's
 * `accumulation_format` (notes only, or output and notes). The history is bounded ({@link SequentialInput.maxHistoryChars})
 * and lives only in this actor's context, so it is discarded when the sequence ends.
 */
import { assign, fromPromise, setup } from "xstate";
import { taskFailure, thrownError, type TaskError, type TaskResult } from "../../protocol/index.js";
import { ACCUMULATED_BINDING, accumulatedOutputs } from "./context-defaults.js";
import { extend, find, type Env } from "../language/env.js";
import { notProvided } from "../not-provided.js";
import { errorOf, outputOf, type StartEvent, idleUntilStarted } from "../invoke-events.js";
import type { AccumulationFormat } from "../language/ast.js";
import type { Scoped } from "./evaluation-context.js";

/** One entry of the SequentialHistory. */
export interface HistoryEntry {
  /** 0-based index of the step. */
  step: number;
  /** The step's output; present only with `full_output`. */
  output?: string;
  /** The step's notes. */
  notes: Record<string, unknown>;
  /** Set when `output` was cut, or `notes` dropped, to fit the history bound. */
  truncated?: boolean;
}

/** One entry of `step_results`. */
export interface StepResult {
  content: string;
  status: "COMPLETE" | "FAILED" | "CANCELLED" | "NOT_STARTED";
  parsedContent?: unknown;
  notes?: Record<string, unknown>;
  error?: TaskResult["error"];
}

/** The value of a result for a program: its parsed JSON, or its text. */
export function parsedOf(result: TaskResult): unknown {
  if (result.parsedContent !== undefined) return result.parsedContent;
  const text = result.content.trim();
  if (!text.startsWith("{") && !text.startsWith("[")) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** A step's result as later steps see it in `step_results`: content, status, parsed JSON and notes. */
export function stepResultOf(result: TaskResult): StepResult {
  const parsed = parsedOf(result);
  return {
    content: result.content,
    status: result.status === "COMPLETE" ? "COMPLETE" : "FAILED",
    ...(parsed === undefined ? {} : { parsedContent: parsed }),
    ...(Object.keys(result.notes).length > 0 ? { notes: result.notes } : {}),
  };
}

/** Input of a sequential actor. */
export interface SequentialInput extends Scoped {
  /** Path of the sequential task node; its steps are `<path>.steps.<i>`. */
  path: string;
  /** Number of `<steps>`. */
  stepCount: number;
  /** The environment of the task (its inputs bound). */
  env: Env;
  /** `accumulate_data` in effect. */
  accumulate: boolean;
  /** `accumulation_format` in effect. */
  format: AccumulationFormat;
  /** Upper bound on the characters of the history: output (with `full_output`) and serialized notes. */
  maxHistoryChars: number;
  /** `<output_slot>` of each step (index → variable name): the step's output is bound to it for the later steps. */
  outputSlots?: Readonly<Record<number, string>>;
}

/** Context of a sequential actor. */
export interface SequentialContext extends SequentialInput {
  /** The step running or about to run (0-based). */
  index: number;
  /** Every step output, in order. */
  outputs: string[];
  /** Every step result, in order, as `step_results` gives them. */
  results: StepResult[];
  /** The SequentialHistory. */
  history: HistoryEntry[];
  /** Characters of output and serialized notes stored in the history so far. */
  historyChars: number;
  /** Variables the finished steps bound: their `<output_slot>`s, and `last_evaluator_output` (kept for templates that read it). */
  slots: Record<string, unknown>;
  result?: TaskResult;
}

/** Input of the `runStep` actor: evaluate the node at `path` in `env`. */
export interface RunStepInput extends Scoped {
  path: string;
  env: Env;
}

/** Params of the `progress` action. */
export interface ProgressParams {
  event: string;
  message: string;
  data?: Record<string, unknown>;
}

/** The error of a failed composite: the inner reason is kept when the inner error is a TASK_FAILURE. */
export function compositeFailure(inner: TaskError | undefined, message: string, details: Record<string, unknown>): TaskResult {
  const reason = inner?.type === "TASK_FAILURE" ? inner.reason : "subtask_failure";
  return taskFailure(reason, message, { ...details, ...(inner ? { cause: inner } : {}) });
}

function stepEnv(context: SequentialContext): Env {
  const bindings: Record<string, unknown> = {
    ...context.slots,
    step_results: context.results,
    previous_result: context.outputs.at(-1) ?? "",
  };
  // `result` is the previous step's value (its parsed JSON, else its text), for templates that chain steps with
  // `{{result}}`; a task that binds `result` itself keeps its own value.
  const last = context.results.at(-1);
  if (last && !find(context.env, "result").found) bindings["result"] = last.parsedContent ?? last.content;
  if (context.accumulate) {
    bindings["history"] = context.history;
    bindings[ACCUMULATED_BINDING] = accumulatedOutputs(context.history);
  }
  return extend(context.env, bindings);
}

function recorded(context: SequentialContext, result: TaskResult): Partial<SequentialContext> {
  const entry: HistoryEntry = { step: context.index, notes: result.notes };
  let chars = context.historyChars;
  if (context.format === "full_output") {
    const room = Math.max(0, context.maxHistoryChars - chars);
    entry.output = result.content.slice(0, room);
    if (entry.output.length < result.content.length) entry.truncated = true;
    chars += entry.output.length;
  }
  // Notes count against the bound too: notes that do not fit are dropped from the entry.
  const notesChars = Object.keys(result.notes).length === 0 ? 0 : JSON.stringify(result.notes).length;
  if (chars + notesChars > context.maxHistoryChars) {
    entry.notes = {};
    entry.truncated = true;
  } else chars += notesChars;
  const slots = { ...context.slots };
  // An evaluation's output survives as `last_evaluator_output`, so a later director step written against that name
  // sees the verdict.
  const evaluated = result.notes["last_evaluator_output"];
  if (typeof evaluated === "string") slots["last_evaluator_output"] = evaluated;
  const slot = context.outputSlots?.[context.index];
  if (slot !== undefined) slots[slot] = result.content;
  return {
    outputs: [...context.outputs, result.content],
    results: [...context.results, stepResultOf(result)],
    history: [...context.history, entry],
    historyChars: chars,
    slots,
    index: context.index + 1,
  };
}

function failure(context: SequentialContext, error: TaskError | undefined): TaskResult {
  const step = context.index + 1;
  const why = error?.message ?? "no error given";
  return compositeFailure(error, `step ${step}/${context.stepCount} failed: ${why}`, {
    failedStep: context.index,
    totalSteps: context.stepCount,
    partialResults: context.history,
  });
}

/** The sequential machine. Output: the last step's result (its content and notes), or the failure. */
export const sequentialMachine = setup({
  types: {
    input: {} as SequentialInput,
    context: {} as SequentialContext,
    events: {} as StartEvent,
    output: {} as TaskResult,
  },
  actions: {
    progress: (_, _params: ProgressParams) => undefined,
    /** The completed step's output is recorded in the history and is the result so far. */
    recordStep: assign(({ context, event }) => ({
      ...recorded(context, outputOf<TaskResult>(event)),
      result: outputOf<TaskResult>(event),
    })),
    failStep: assign({ result: ({ context, event }) => failure(context, outputOf<TaskResult>(event).error) }),
    failStepThrew: assign({ result: ({ context, event }) => failure(context, thrownError(errorOf(event))) }),
  },
  actors: {
    runStep: fromPromise<TaskResult, RunStepInput>(async () => notProvided("sequential.runStep")),
  },
  guards: {
    hasNextStep: ({ context }) => context.index < context.stepCount,
    stepCompleted: ({ event }) => outputOf<TaskResult>(event).status === "COMPLETE",
  },
}).createMachine({
  id: "sequential",
  context: ({ input }) => ({ ...input, index: 0, outputs: [], results: [], history: [], historyChars: 0, slots: {} }),
  initial: "idle",
  states: {
    idle: idleUntilStarted("advancing"),
    advancing: {
      description: "Run the next step, or finish when every step has run.",
      always: [{ guard: "hasNextStep", target: "running" }, { target: "done" }],
    },
    running: {
      description: "One step evaluates.",
      entry: {
        type: "progress",
        params: ({ context }) => ({
          event: "step.started",
          message: `step ${context.index + 1}/${context.stepCount}`,
          data: { nodePath: `${context.path}.steps.${context.index}`, step: context.index + 1, totalSteps: context.stepCount },
        }),
      },
      invoke: {
        src: "runStep",
        input: ({ context }) => ({ path: `${context.path}.steps.${context.index}`, env: stepEnv(context), scopeKey: context.scopeKey }),
        onDone: [
          {
            guard: "stepCompleted",
            target: "advancing",
            actions: "recordStep",
          },
          { target: "failed", actions: "failStep" },
        ],
        onError: { target: "failed", actions: "failStepThrew" },
      },
    },
    done: { description: "Every step completed.", type: "final" },
    failed: { description: "A step failed; the error carries the partial results.", type: "final" },
  },
  output: ({ context }) => {
    const last = context.result;
    if (!last) return { content: "", status: "COMPLETE", notes: { steps: 0 } };
    if (last.status === "FAILED") return last;
    return { ...last, notes: { ...last.notes, steps: context.stepCount } };
  },
});
