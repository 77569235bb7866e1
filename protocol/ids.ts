/**
 * Identifiers that travel on the wire. Ids are validated here and nowhere else.
 */
import { z } from "zod";

/** Pattern every task id must match: 1–64 characters of `[A-Za-z0-9_-]` (safe as a NATS token and a KV key). */
export const TASK_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** A task id, chosen by the client (for idempotent submission) or by the runtime. */
export const TaskId = z.string().regex(TASK_ID_PATTERN, "task id must be 1–64 characters of [A-Za-z0-9_-]").brand<"TaskId">();
export type TaskId = z.infer<typeof TaskId>;

/** Returns the id when `value` is a valid task id, otherwise `undefined`. */
export function parseTaskId(value: unknown): TaskId | undefined {
  const parsed = TaskId.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
