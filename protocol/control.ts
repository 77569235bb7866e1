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
