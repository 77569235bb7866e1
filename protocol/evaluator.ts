/**
 * Messages the Director sends to the Evaluator, and the Evaluator's replies.
 * Request/reply on `<root>.evaluator.evaluate` (queue group `evaluator`).
 */
import { z } from "zod";
import { TaskId } from "./ids.js";
import { TaskResult } from "./result.js";
import { TaskInputs } from "./tasks.js";

/** Evaluate a whole task template. */
export const EvaluateRequest = z.object({
  type: z.literal("evaluator.evaluate"),
  /** The task being run. */
  taskId: TaskId,
  /** The template text (already validated by the Director). */
  xml: z.string(),
  /** Submitted inputs, bound in the root environment. */
  inputs: TaskInputs,
});
export type EvaluateRequest = z.infer<typeof EvaluateRequest>;

/** The Evaluator's answer: the task's result. */
export const EvaluateReply = z.object({
  type: z.literal("evaluator.result"),
  /** The task. */
  taskId: TaskId,
  /** The result of the root node. */
  result: TaskResult,
});
export type EvaluateReply = z.infer<typeof EvaluateReply>;
