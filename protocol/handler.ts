/**
 * Messages the Evaluator sends to a Handler to run one atomic task as one LLM session, and the reply.
 * Request/reply on `<root>.handler.execute` (queue group `handler`).
 */
import { z } from "zod";
import { TaskId } from "./ids.js";
import { TaskResult } from "./result.js";

/** Run one atomic task. All text is fully substituted; the Handler never sees `{{var}}`. */
export const ExecuteRequest = z.object({
  type: z.literal("handler.execute"),
  /** The task this node belongs to. */
  taskId: TaskId,
  /** Path of the node in the template tree (`0`, `0.steps.2`, …). */
  nodePath: z.string(),
  /** The user prompt (the task's description and instructions). */
  prompt: z.string(),
  /** The template's system prompt, appended to the Handler's base prompt. */
  system: z.string().optional(),
  /** Model to use; the Handler's configured default otherwise. */
  model: z.string().optional(),
  /** Publish the answer as `model.delta` progress events while it arrives; the Handler's setting otherwise. */
  stream: z.boolean().optional(),
});
export type ExecuteRequest = z.infer<typeof ExecuteRequest>;

/** The Handler's answer. */
export const ExecuteReply = z.object({
  type: z.literal("handler.result"),
  /** The task. */
  taskId: TaskId,
  /** The node that ran. */
  nodePath: z.string(),
  /** The session's result; `notes.usage` holds token counts. */
  result: TaskResult,
});
export type ExecuteReply = z.infer<typeof ExecuteReply>;
