/**
 * The lifecycle of one task, owned by the Director that accepted it.
 *
 * queued → running → completed | failed | cancelled. While running, a `CONTINUATION` (a result that asks for an
 * evaluation, a subtask or the user's answer before the parent goes on) is a visible sub-state:
 * `awaitingEvaluation`, `awaitingSubtask` or `awaitingInput`, entered and left on progress reports from the Evaluator.
 *
 * Inbound: `task.start`, `task.cancel`, `task.progress`. Effects: the `evaluate` actor (run the template),
 * and `announce` (publish a task event: a lifecycle change, or a progress report republished).
 * Every state carries a tag naming its public {@link TaskState}.
 */
import { assign, fromPromise, setup } from "xstate";
import {
  FINAL_STATES,
  taskFailure,
  type Progress,
  type TaskId,
  type TaskInputs,
  type TaskResult,
  type TaskState,
} from "../../protocol/index.js";
import { notProvided } from "../not-provided.js";

/** Input of a task lifecycle actor. */
export interface TaskInput {
  taskId: TaskId;
  xml: string;
  inputs: TaskInputs;
}

/** Context of a task lifecycle actor: plain data, persistable. */
export interface TaskContext extends TaskInput {
  /** The result, once final. */
  result?: TaskResult;
  /** Whether the task ended by cancellation. */
  cancelled: boolean;
}

/** Events a task lifecycle actor accepts. */
export type TaskEvent = { type: "task.start" } | { type: "task.cancel" } | Progress;

/** Progress events that move a running task into or out of a CONTINUATION. */
export const CONTINUATION_EVENTS = {
  evaluation: "continuation.evaluation",
  subtask: "continuation.subtask",
  input: "continuation.input",
  resumed: "continuation.resumed",
} as const;

/** What `announce` publishes: a task event, in the state the task has after it. */
export interface Announcement {
  event: string;
  state: TaskState;
  message?: string;
  data?: Record<string, unknown>;
}

/** Params of `announce` for a progress report received in `state`. */
function relayIn(state: TaskState) {
  return ({ event }: { event: TaskEvent }): Announcement =>
    event.type === "task.progress"
      ? {
          event: event.event,
          state,
          ...(event.message === undefined ? {} : { message: event.message }),
          ...(event.data === undefined ? {} : { data: event.data }),
        }
      : { event: event.type, state };
}

/** The result of a task that fails for a reason of its own lifecycle, not of its template. */
const failure = (message: string): TaskResult => taskFailure("unexpected_error", message);

/** The task lifecycle machine. */
/**
 * Version of the task machine's persisted snapshots. Raise it when a change to states, context or children makes
 * older snapshots unfit, and add a migration from the old version in actors/director/snapshot.ts.
 */
export const TASK_MACHINE_VERSION = 2;

/** The id of the invoked evaluation: a restored snapshot finds its child under it (v1 used xstate's generated id). */
export const EVALUATE_ID = "evaluate";

export const taskMachine = setup({
  types: {
    input: {} as TaskInput,
    context: {} as TaskContext,
    events: {} as TaskEvent,
    output: {} as TaskContext,
    tags: {} as TaskState,
  },
  actions: {
    announce: (_, _params: Announcement) => undefined,
  },
  actors: {
    evaluate: fromPromise<TaskResult, TaskInput>(async () => notProvided("task.evaluate")),
  },
  guards: {
    succeeded: (_, result: TaskResult) => result.status === "COMPLETE",
    isProgress: (_, params: { event: string; expected: string }) => params.event === params.expected,
  },
}).createMachine({
  id: "task",
  // Not `{ ...input, cancelled }`: a literal that starts with a spread and adds to it gets a hidden class of its own
  // in this V8 (Node 20), about 0.3 KB more per task. The keys keep their order (the context is checkpointed).
  context: ({ input }) => Object.assign({}, input, { cancelled: false }),
  initial: "queued",
  output: ({ context }) => context,
  states: {
    queued: {
      description: "Accepted and stored; waiting for a free slot in its Director.",
      tags: ["queued"],
      on: {
        "task.start": "running",
        "task.cancel": "cancelled",
      },
    },
    running: {
      description: "The Evaluator is walking the template.",
      entry: { type: "announce", params: { event: "task.running", state: "running", message: "running" } },
      invoke: {
        id: EVALUATE_ID,
        src: "evaluate",
        input: ({ context }) => ({ taskId: context.taskId, xml: context.xml, inputs: context.inputs }),
        onDone: [
          {
            guard: { type: "succeeded", params: ({ event }) => event.output },
            target: "completed",
            actions: assign({ result: ({ event }) => event.output }),
          },
          {
            target: "failed",
            actions: assign({
              result: ({ event }) =>
                event.output.status === "CONTINUATION"
                  ? failure("the root task asked to continue, but no task is above it to answer")
                  : event.output,
            }),
          },
        ],
        onError: {
          target: "failed",
          actions: assign({
            result: ({ event }) => failure(event.error instanceof Error ? event.error.message : String(event.error)),
          }),
        },
      },
      on: { "task.cancel": "cancelled" },
      initial: "executing",
      states: {
        executing: {
          description: "Working; no continuation pending.",
          tags: ["running"],
          on: {
            "task.progress": [
              {
                guard: { type: "isProgress", params: ({ event }) => ({ event: event.event, expected: CONTINUATION_EVENTS.evaluation }) },
                target: "awaitingEvaluation",
                actions: { type: "announce", params: relayIn("awaiting_evaluation") },
              },
              {
                guard: { type: "isProgress", params: ({ event }) => ({ event: event.event, expected: CONTINUATION_EVENTS.subtask }) },
                target: "awaitingSubtask",
                actions: { type: "announce", params: relayIn("awaiting_subtask") },
              },
              {
                guard: { type: "isProgress", params: ({ event }) => ({ event: event.event, expected: CONTINUATION_EVENTS.input }) },
                target: "awaitingInput",
                actions: { type: "announce", params: relayIn("awaiting_input") },
              },
              { actions: { type: "announce", params: relayIn("running") } },
            ],
          },
        },
        awaitingEvaluation: {
          description: "A result returned CONTINUATION with an evaluation request; waiting for the evaluation.",
          tags: ["awaiting_evaluation"],
          on: {
            "task.progress": [
              {
                guard: { type: "isProgress", params: ({ event }) => ({ event: event.event, expected: CONTINUATION_EVENTS.resumed }) },
                target: "executing",
                actions: { type: "announce", params: relayIn("running") },
              },
              { actions: { type: "announce", params: relayIn("awaiting_evaluation") } },
            ],
          },
        },
        awaitingInput: {
          description: "A session asked the user a question (request_user_input); waiting for the answer on the task's input subject.",
          tags: ["awaiting_input"],
          on: {
            "task.progress": [
              {
                guard: { type: "isProgress", params: ({ event }) => ({ event: event.event, expected: CONTINUATION_EVENTS.resumed }) },
                target: "executing",
                actions: { type: "announce", params: relayIn("running") },
              },
              { actions: { type: "announce", params: relayIn("awaiting_input") } },
            ],
          },
        },
        awaitingSubtask: {
          description: "A result returned CONTINUATION with a subtask request; waiting for the subtask's result.",
          tags: ["awaiting_subtask"],
          on: {
            "task.progress": [
              {
                guard: { type: "isProgress", params: ({ event }) => ({ event: event.event, expected: CONTINUATION_EVENTS.resumed }) },
                target: "executing",
                actions: { type: "announce", params: relayIn("running") },
              },
              { actions: { type: "announce", params: relayIn("awaiting_subtask") } },
            ],
          },
        },
      },
    },
    completed: {
      description: "The template's result was COMPLETE.",
      tags: ["completed"],
      type: "final",
    },
    failed: {
      description: "The template failed, or the evaluation could not be carried out.",
      tags: ["failed"],
      type: "final",
    },
    cancelled: {
      description: "Cancelled on request; work in flight was aborted.",
      tags: ["cancelled"],
      type: "final",
      entry: assign({ cancelled: true }),
    },
  },
});

/**
 * The state a status request reports: a stored final state wins over a task actor still running here (a task
 * cancelled while its claim was pending gets its final record from the cancel, while the Director that started it
 * still runs it until it finds the record final); otherwise the live state, else the stored one.
 */
export function reportedState(live: TaskState | undefined, stored: TaskState | undefined): TaskState | undefined {
  if (stored !== undefined && FINAL_STATES.has(stored)) return stored;
  return live ?? stored;
}
