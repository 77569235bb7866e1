/**
 * Identifiers that travel on the wire. Ids are validated here and nowhere else.
 */
import { z } from "zod";

/** Pattern every task id must match: 1–64 characters of `[A-Za-z0-9_-]` (safe as a NATS token and a KV key). */
export const TASK_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** A task id, chosen by the client (for idempotent submission) or by the runtime. */
export const TaskId = z.string().regex(TASK_ID_PATTERN, "task id must be 1–64 characters of [A-Za-z0-9_-]").brand<"TaskId">();
export type TaskId = z.infer<typeof TaskId>;

/**
 * Pattern every model id must match: 1–200 characters, a letter or digit first, then letters, digits and
 * `. _ : / @ + -` (`gpt-4o-mini`, `meta-llama/Llama-3.1-8B-Instruct`, `llama3.1:8b`, `ft:gpt-4o-mini:org::abc`).
 * A model id names a span and labels metrics: no spaces, no markup, bounded.
 */
export const MODEL_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/;

/** A model id (see {@link MODEL_ID_PATTERN}). */
export const ModelId = z
  .string()
  .regex(MODEL_ID_PATTERN, "a model id is 1–200 characters of letters, digits and . _ : / @ + -, starting with a letter or digit");

/** Returns the id when `value` is a valid task id, otherwise `undefined`. */
export function parseTaskId(value: unknown): TaskId | undefined {
  const parsed = TaskId.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
