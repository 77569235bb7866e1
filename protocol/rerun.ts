/** The body and answer of `<root>.tasks.<id>.rerun` (fork a finished task; see fork.ts). */
import { z } from "zod";
import { ForkOf } from "./fork.js";
import { TaskId } from "./ids.js";
import { TaskInputs } from "./tasks.js";

/** Body of `<root>.tasks.<id>.rerun`: fork task `<id>`. */
export const RerunRequest = z.strictObject({
  /** The node to run live from. Optional when `xml` or `inputs` change something: then the first node they change. */
  from: z.string().min(1).max(4096).optional(),
  /** The fork's id (client-chosen, so it can subscribe first); a new one when absent. */
  taskId: TaskId.optional(),
  /** Inputs that replace the original's of the same name (the others are kept). */
  inputs: TaskInputs.optional(),
  /** A changed template; the original's when absent. */
  xml: z.string().min(1).optional(),
});
export type RerunRequest = z.infer<typeof RerunRequest>;

/** Answer of `<root>.tasks.<id>.rerun`: the fork, accepted and queued. */
export const RerunReply = z.object({
  /** The fork's id. */
  taskId: TaskId,
  /** `accepted`, or `duplicate` when a task with the chosen id exists. */
  status: z.enum(["accepted", "duplicate"]),
  /** What it was forked from (`from`: the node it runs live from, chosen when the request named none). */
  forkOf: ForkOf,
  /** Nodes answered from the original's records (the outermost, and those inside them). */
  replayed: z.int().nonnegative(),
});
export type RerunReply = z.infer<typeof RerunReply>;
