/**
 * Messages between runtime roles that are not requests: cancellation broadcasts and progress reports.
 */
import { z } from "zod";
import { TaskId } from "./ids.js";

/** Broadcast on `<root>.control.cancel`: every process holding work of the task aborts it. */
export const CancelBroadcast = z.object({
  type: z.literal("task.cancel"),
  /** The task to abort. */
  taskId: TaskId,
});
export type CancelBroadcast = z.infer<typeof CancelBroadcast>;

/**
 * Broadcast on `<root>.control.abort` by an Evaluator: the Handler running one node of a task (a map branch cancelled
 * by fail_fast, a nested input stopped by a failed sibling) stops that session or script. Not sent for a task's
 * cancellation, a takeover or a shutdown: there the work is cancelled whole, or continued by another owner.
 */
export const NodeAbort = z.object({
  type: z.literal("node.abort"),
  taskId: TaskId,
  /** The node path the Evaluator asked the Handler to run. */
  nodePath: z.string().min(1).max(4096),
});
export type NodeAbort = z.infer<typeof NodeAbort>;

/** Broadcast on `<root>.control.superseded`: the task's evaluation now runs for `owner`; others stop theirs. */
export const Superseded = z.object({
  type: z.literal("task.superseded"),
  taskId: TaskId,
  owner: z.string().min(1),
});
export type Superseded = z.infer<typeof Superseded>;

/**
 * Sent by a Director that took a task over to the Director whose claim it replaced, on
 * `<root>.director.<previousOwner>.takeover`, before it publishes anything of the task: that Director stops publishing
 * the task's events, and answers once the events it had in flight are sent ({@link TakeoverReply}).
 */
export const TakeoverNotice = z.object({
  type: z.literal("task.taken_over"),
  taskId: TaskId,
  /** The Director that holds the task now. */
  owner: z.string().min(1),
  /** The claim it replaced: its owner and claim time, as the record held them. */
  previousOwner: z.string().min(1),
  previousClaimedAt: z.string().min(1),
});
export type TakeoverNotice = z.infer<typeof TakeoverNotice>;

/** The answer to a {@link TakeoverNotice}: `held`, the Director ran the task under that claim and has stopped publishing. */
export const TakeoverReply = z.object({
  type: z.literal("task.released"),
  taskId: TaskId,
  held: z.boolean(),
});
export type TakeoverReply = z.infer<typeof TakeoverReply>;

/** Published on `<root>.tasks.<id>.input` (public): the answer to a task's pending `request_user_input`. */
export const UserInput = z.strictObject({
  /** The answer. */
  text: z.string().max(64_000),
});
export type UserInput = z.infer<typeof UserInput>;

/** Reply to a {@link UserInput} sent as a request: whether a task was waiting for it. */
export const UserInputReply = z.object({
  taskId: TaskId,
  status: z.enum(["accepted"]),
});
export type UserInputReply = z.infer<typeof UserInputReply>;

/** Sent by Evaluators and Handlers on `<root>.progress.<taskId>`; the owning Director republishes it as a task event. */
export const Progress = z.object({
  type: z.literal("task.progress"),
  /** The task. */
  taskId: TaskId,
  /** Event type, dotted (`model.turn`, `node.started`, …). */
  event: z.string(),
  /** One-line summary. */
  message: z.string().optional(),
  /** Event data. */
  data: z.record(z.string(), z.unknown()).optional(),
});
export type Progress = z.infer<typeof Progress>;

/** Where a tool of a Handler comes from (runtime/tools/, docs/tools.md). */
export const ToolSourceKind = z.enum(["builtin", "mcp", "a2a", "ts", "nats", "template", "continuation"]);
export type ToolSourceKind = z.infer<typeof ToolSourceKind>;

/** The `data` of a `tool.call` progress event: one tool call of a Handler session, once answered. */
export const ToolCallEventData = z.object({
  /** The node of the session. */
  nodePath: z.string().optional(),
  /** The tool's name as the model called it. */
  tool: z.string(),
  /** Where the tool comes from; absent for a name no source has (a malformed call). */
  source: ToolSourceKind.optional(),
  /** Milliseconds the call took (0 for a replayed or malformed one). */
  durationMs: z.number().nonnegative().optional(),
  /** The call was malformed (unknown tool, bad arguments). */
  malformed: z.boolean(),
  /** Answered from the session's record: not run again. */
  replayed: z.boolean().optional(),
  /** The call was in flight in a Handler that stopped and is not idempotent: answered with an error, not run again. */
  unknownOutcome: z.boolean().optional(),
  /** The arguments as the model sent them (JSON text), cut to 1024 characters (`…` marks a cut). */
  arguments: z.string().optional(),
  /** The answer the model was given, cut to 1024 characters (`…` marks a cut); absent for a continuation. */
  result: z.string().optional(),
});
export type ToolCallEventData = z.infer<typeof ToolCallEventData>;
