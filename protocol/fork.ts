/**
 * Re-run and fork: a new task made from a finished one (`<root>.tasks.<id>.rerun`, answered by a Director). Every node
 * of the original that ended before the node `from` started is answered from the original's node records (no model
 * call, no tool call, no program run); `from` and everything after it run live, with the fork's inputs and template.
 * The rule that picks the replayed nodes is machines/fork/plan.ts; docs/protocol.md says it in words. The request and
 * its answer are in rerun.ts.
 */
import { z } from "zod";
import { TaskId } from "./ids.js";

/** What a fork was made from: on its task record and on each of its events. */
export const ForkOf = z.object({
  /** The task it was forked from. */
  taskId: TaskId,
  /** The node it runs live from (a path as `dirigent show` lists it). */
  from: z.string(),
});
export type ForkOf = z.infer<typeof ForkOf>;

/** One evaluation of a node, by path and occurrence. */
export const NodeRef = z.object({
  /** The node's path. */
  path: z.string().min(1).max(4096),
  /** Which evaluation of it, from 1. */
  occurrence: z.int().positive(),
});
export type NodeRef = z.infer<typeof NodeRef>;

/**
 * A node answered from the original's record, and the nodes inside it that ran during that evaluation (their records
 * are copied too, and their occurrences counted, so a later evaluation of the same path is told apart).
 */
export const ReplayedNode = NodeRef.extend({
  /** Nodes evaluated inside it in the original, in the order they started. */
  nested: z.array(NodeRef).max(100_000).optional(),
});
export type ReplayedNode = z.infer<typeof ReplayedNode>;

/** Which nodes of a fork are answered from which task's records. */
export const ReplayPlan = z.object({
  /** The task whose node records answer. */
  taskId: TaskId,
  /** The outermost nodes replayed, in the order they started in the original. */
  nodes: z.array(ReplayedNode).max(100_000),
});
export type ReplayPlan = z.infer<typeof ReplayPlan>;
