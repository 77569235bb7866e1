/**
 * Messages the Director sends to the Evaluator, and the Evaluator's replies.
 * Request/reply on `<root>.evaluator.evaluate` (queue group `evaluator`).
 */
import { z } from "zod";
import { ReplayPlan } from "./fork.js";
import { TaskId } from "./ids.js";
import { TaskResult } from "./result.js";
import { TaskBudget, TaskInputs } from "./tasks.js";

/** Evaluate a whole task template. */
export const EvaluateRequest = z.object({
  type: z.literal("evaluator.evaluate"),
  /** The task being run. */
  taskId: TaskId,
  /** The template text (already validated by the Director). */
  xml: z.string(),
  /** Submitted inputs, bound in the root environment. */
  inputs: TaskInputs,
  /** The task's token and cost limits, shared by every Handler call of the task (subtasks included). */
  budget: TaskBudget.optional(),
  /** Ask every Handler call of the task to stream its answer as `model.delta` events. */
  stream: z.boolean().optional(),
  /** The Director claim this evaluation runs for; an evaluation for another owner of the task is stopped. */
  owner: z.string().min(1).max(200).optional(),
  /**
   * No evaluation of this task ran before (the task's first claim, first request): there is no older evaluation to
   * stop, and the Handler has no records of its calls to look for. Absent: there may be.
   */
  fresh: z.boolean().optional(),
  /** A fork: the nodes answered from another task's node records instead of being run. */
  replay: ReplayPlan.optional(),
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
