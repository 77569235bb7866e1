/**
 * The public task API: what any NATS client sends to and receives from dirigent.
 * Subjects are in `subjects.ts`; the human-readable contract is `docs/protocol.md`.
 */
import { z } from "zod";
import { MAX_COMPILE_PROMPT_CHARS } from "./compiler.js";
import { ForkOf, ReplayPlan } from "./fork.js";
import { TaskId } from "./ids.js";
import { Notes, TaskError } from "./result.js";

/** Values bound to `{{var}}` placeholders of the template. */
export const TaskInputs = z.record(
  z.string().regex(/^[A-Za-z_][\w.-]*$/, "input names start with a letter or _ and hold letters, digits, _ . -"),
  z.unknown(),
);
export type TaskInputs = z.infer<typeof TaskInputs>;

/** Spending limits of a whole task, its subtasks included (checked by the Handler before each model call). */
export const TaskBudget = z.strictObject({
  /** Prompt plus completion tokens the task may use. */
  max_tokens: z.int().positive().optional(),
  /** Cost the task may incur, in the unit of the price table (`DIRIGENT_MODEL_PRICES`). */
  max_cost: z.number().positive().optional(),
});
export type TaskBudget = z.infer<typeof TaskBudget>;

/** Body of `<root>.tasks.submit` (JSON form; a raw XML body is accepted too). */
export const SubmitRequest = z
  .strictObject({
    /** Client-chosen id; submitting the same id again starts no second run. */
    taskId: TaskId.optional(),
    /** The task template as XML text. */
    xml: z.string().min(1).optional(),
    /** Alias of `xml`. */
    template: z.string().min(1).optional(),
    /** The task in words instead of XML: the Compiler turns it into a template before the task runs. */
    prompt: z.string().min(1).max(MAX_COMPILE_PROMPT_CHARS).optional(),
    /** Values for the template's `{{var}}` placeholders. */
    inputs: TaskInputs.optional(),
    /** Token and cost limits of the task; its subtasks share them. */
    budget: TaskBudget.optional(),
    /** Publish the answers as `model.delta` events while they arrive; the Handler's setting otherwise. */
    stream: z.boolean().optional(),
  })
  .refine((r) => [r.xml, r.template, r.prompt].filter((v) => v !== undefined).length === 1, {
    message: "exactly one of 'xml', 'template' or 'prompt' is required",
  });
export type SubmitRequest = z.infer<typeof SubmitRequest>;

/** Positive answer to a submission. */
export const SubmitReply = z.object({
  /** The task's id. */
  taskId: TaskId,
  /** `accepted`: stored and queued; `duplicate`: a task with this id already exists. */
  status: z.enum(["accepted", "duplicate"]),
});
export type SubmitReply = z.infer<typeof SubmitReply>;

/** Lifecycle states of a task, as seen from outside. */
export const TaskState = z.enum([
  "queued",
  "running",
  "awaiting_evaluation",
  "awaiting_subtask",
  "awaiting_input",
  "completed",
  "failed",
  "cancelled",
]);
export type TaskState = z.infer<typeof TaskState>;

/** States from which a task never moves again. */
export const FINAL_STATES: ReadonlySet<TaskState> = new Set(["completed", "failed", "cancelled"]);

/** An event on `<root>.tasks.<id>.events`. */
export const TaskEvent = z.object({
  /** The task. */
  taskId: TaskId,
  /** Position in the task's event sequence, from 1. */
  seq: z.number().int().positive(),
  /** What happened, dotted (`task.running`, `model.turn`, `step.completed`, …). */
  type: z.string(),
  /** The task's lifecycle state after the event. */
  state: TaskState,
  /** ISO-8601 time of the event. */
  at: z.string(),
  /** One-line human-readable summary. */
  message: z.string().optional(),
  /** Event-specific data. */
  data: z.record(z.string(), z.unknown()).optional(),
  /** The task is a fork (`dirigent rerun`): what it was forked from. */
  forkOf: ForkOf.optional(),
});
export type TaskEvent = z.infer<typeof TaskEvent>;

/** Final outcome of a task. */
export const FinalStatus = z.enum(["COMPLETE", "FAILED", "CANCELLED"]);
export type FinalStatus = z.infer<typeof FinalStatus>;

/** The message on `<root>.tasks.<id>.result`, published once per task. */
export const TaskOutcome = z.object({
  /** The task. */
  taskId: TaskId,
  /** How it ended. */
  status: FinalStatus,
  /** Output text (partial output when failed). */
  content: z.string(),
  /** Metadata: usage, model, … */
  notes: Notes,
  /** Parsed JSON output, when the template asked for JSON. */
  parsedContent: z.unknown().optional(),
  /** Why it failed. */
  error: TaskError.optional(),
});
export type TaskOutcome = z.infer<typeof TaskOutcome>;

/** Answer of `<root>.tasks.<id>.get`. */
export const TaskStatusReply = z.object({
  /** The task. */
  taskId: TaskId,
  /** Its current lifecycle state. */
  state: TaskState,
  /** Its outcome, once final. */
  result: TaskOutcome.optional(),
});
export type TaskStatusReply = z.infer<typeof TaskStatusReply>;

/** Answer of `<root>.tasks.<id>.cancel`. */
export const CancelReply = z.object({
  /** The task. */
  taskId: TaskId,
  /** State after the request: `cancelled`, or the final state it had already reached. */
  state: TaskState,
  /** Whether this request cancelled the task. */
  cancelled: z.boolean(),
});
export type CancelReply = z.infer<typeof CancelReply>;

/** What the runtime stores for each accepted task (KV value). */
/** W3C trace context of a task (docs/traces.md): its spans continue this trace, in whichever process runs it. */
export const TraceContext = z.object({
  traceparent: z.string().max(55),
  tracestate: z.string().max(512).optional(),
});
export type TraceContext = z.infer<typeof TraceContext>;

export const TaskRecord = z.object({
  /** The task. */
  taskId: TaskId,
  /** Current lifecycle state. */
  state: TaskState,
  /** The template text; empty for a task submitted with a `prompt` until the Compiler's template is stored. */
  xml: z.string(),
  /** The request in words, for a task submitted with a `prompt` (compiled before it runs). */
  prompt: z.string().optional(),
  /** Submitted inputs. */
  inputs: TaskInputs,
  /** Submitted token and cost limits. */
  budget: TaskBudget.optional(),
  /** Submitted with `stream: true`. */
  stream: z.boolean().optional(),
  /** ISO-8601 time of acceptance. */
  submittedAt: z.string(),
  /** ISO-8601 time of the last change. */
  updatedAt: z.string(),
  /** Outcome, once final. */
  result: TaskOutcome.optional(),
  /** Set when a cancel was requested before the task finished. */
  cancelRequested: z.boolean().optional(),
  /** The Director process that claimed the task last (absent while queued). */
  owner: z.string().optional(),
  /** ISO-8601 time of that claim; with `owner` it identifies one claim. */
  claimedAt: z.string().optional(),
  /** The last event `seq` the owner checkpointed; a resuming Director continues after it. */
  seq: z.number().int().nonnegative().optional(),
  /**
   * The intake queue item the record was made from (its stream sequence): a second item of the same id, queued
   * again after the queue's duplicate window, is told apart from a redelivery and dropped.
   */
  intakeSeq: z.number().int().nonnegative().optional(),
  /** The persisted snapshot of the task's machine, with the machine's id and version; a resuming Director restores it. */
  machine: z.object({ id: z.string(), version: z.int().nonnegative(), snapshot: z.unknown() }).optional(),
  /** The trace the task's spans belong to: the submitter's `traceparent`, or the intake's span. */
  trace: TraceContext.optional(),
  /** The task is a fork (`dirigent rerun`): what it was forked from. */
  forkOf: ForkOf.optional(),
  /** A fork's nodes answered from the original's records. */
  replay: ReplayPlan.optional(),
});
export type TaskRecord = z.infer<typeof TaskRecord>;

/**
 * The tasks stored before they were queued and not yet known to be queued: the value of `intake.unqueued` in the
 * tasks bucket. A submission whose queued record is too large for one intake message is stored in the bucket first and
 * queued by reference; it is listed here from before it is stored until it is queued, so that a Director queues it
 * should the queueing fail, or its submitter die in between (actors/director/unqueued.ts).
 */
export const UnqueuedTasks = z.object({
  v: z.literal(1),
  tasks: z.array(
    z.object({
      /** The task. */
      taskId: TaskId,
      /** ISO-8601 time it was listed. */
      since: z.string(),
    }),
  ),
});
export type UnqueuedTasks = z.infer<typeof UnqueuedTasks>;
