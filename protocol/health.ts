/**
 * Liveness: every runtime process answers a ping on `<root>.ping` (a plain subscription, not a queue group, so every
 * process answers), which `dirigent health` and supervisors use to see which roles and processes are up.
 */
import { z } from "zod";

/**
 * Request on `<root>.ping`; an empty body is the same as `{}`. With `processId`, only that process answers (a process
 * checks this way that its own subscriptions still reach it).
 */
export const PingRequest = z.strictObject({
  /** Only the process with this id answers. */
  processId: z.string().min(1).max(200).optional(),
});
export type PingRequest = z.infer<typeof PingRequest>;

/** One process's answer to a {@link PingRequest}. */
export const PingReply = z.object({
  /** Unique per process start, e.g. `host-a:4711:3f9a0c21`. */
  processId: z.string().min(1),
  /** Host name of the machine. */
  host: z.string(),
  /** Operating-system process id. */
  pid: z.number().int().nonnegative(),
  /** The roles this process runs (`director`, `evaluator`, `handler`, `memory`, `supervisor`). */
  roles: z.array(z.string().min(1)),
  /** dirigent's version. */
  version: z.string(),
  /** Milliseconds since the process started its roles. */
  uptimeMs: z.number().int().nonnegative(),
  /** Requests its subscriptions are handling right now, when the transport counts them. */
  inFlight: z.number().int().nonnegative().optional(),
});
export type PingReply = z.infer<typeof PingReply>;
