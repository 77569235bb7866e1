/**
 * The `data` of the progress events of a `map` node (fan-out: its branches run in parallel). The Evaluator publishes
 * them like `step.started`; the CLI prints them as `map 5/8 done` lines and the inspector draws the branches side by
 * side under their map node.
 */
import { z } from "zod";

/** The progress events of a map node, in the order they first occur. */
export const MAP_PROGRESS_EVENTS = ["map.started", "branch.started", "branch.finished"] as const;

/** A node path as reported in progress events (`0`, `0.steps.1`, `0/map:2`, `0/map:2:0.steps.0`). */
const NodePath = z.string().min(1).max(1000);
/** A count of branches. */
const Count = z.number().int().positive();

/** `map.started`: message `map started: 8 branches, 4 at once`. */
export const MapStartedEventData = z.object({
  /** The map node. */
  nodePath: NodePath,
  kind: z.literal("map"),
  /** How many branches the map runs. */
  total: Count,
  /** How many run at once. */
  maxParallel: Count,
  /** `fail_fast`: the first failed branch cancels the others; `collect`: every branch runs to its end. */
  onFailure: z.enum(["fail_fast", "collect"]),
});
export type MapStartedEventData = z.infer<typeof MapStartedEventData>;

/** `branch.started`: message `branch 3/8`. */
export const BranchStartedEventData = z.object({
  /** The branch's node: `0.steps.2` (a map of distinct steps) or `0/map:2` (a map over a list). */
  nodePath: NodePath,
  /** The map node the branch belongs to. */
  mapPath: NodePath,
  /** The branch's number, from 1. */
  branch: Count,
  /** How many branches the map runs. */
  total: Count,
});
export type BranchStartedEventData = z.infer<typeof BranchStartedEventData>;

/** How a branch ended. */
export const BranchStatus = z.enum(["COMPLETE", "FAILED", "CANCELLED"]);
export type BranchStatus = z.infer<typeof BranchStatus>;

/** `branch.finished`: message `branch 3/8 COMPLETE`. */
export const BranchFinishedEventData = BranchStartedEventData.extend({
  status: BranchStatus,
  /** How many branches of the map have finished so far, this one included. */
  finished: Count,
});
export type BranchFinishedEventData = z.infer<typeof BranchFinishedEventData>;

/**
 * The map a branch belongs to, as its node path names it: `0.steps.2` and `0/map:2` are branch 3 of the map `0`.
 * Node paths are scoped (the maps at the one step of a map over a list are `0/map:0:0.steps.0`, `0/map:1:0.steps.0`,
 * their branches `0/map:1:0.steps.0.steps.2`), so maps at the same template node stay apart even where `mapPath`
 * names the template node only; `mapPath` when the node path does not end so.
 */
export function branchMapPath({ nodePath, mapPath, branch }: Pick<BranchStartedEventData, "nodePath" | "mapPath" | "branch">): string {
  for (const suffix of [`.steps.${branch - 1}`, `/map:${branch - 1}`])
    if (nodePath.length > suffix.length && nodePath.endsWith(suffix)) return nodePath.slice(0, -suffix.length);
  return mapPath;
}
