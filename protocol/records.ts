/**
 * Records the Handler keeps in the turns bucket (`<ROOT>_TURNS`), so a task re-run after a crash continues a
 * session from its last completed turn, and does not run a finished session or script again. Versioned: a record
 * of another version is not used (the work runs again) and is reported.
 */
import { z } from "zod";
import { SessionCheckpoint, SessionState } from "./continuation.js";
import { TaskResult } from "./result.js";

/** Version of the records below. */
export const RECORD_VERSION = 1;

/** A Handler session's record: in progress (its state after the last completed turn), or finished (its reply). */
export const TurnRecord = z.discriminatedUnion("status", [
  z.object({ v: z.literal(RECORD_VERSION), status: z.literal("running"), session: SessionCheckpoint }),
  z.object({ v: z.literal(RECORD_VERSION), status: z.literal("done"), result: TaskResult, session: SessionState.optional() }),
]);
export type TurnRecord = z.infer<typeof TurnRecord>;

/** A script command's record: what it produced. */
export const ScriptRecord = z.object({
  v: z.literal(RECORD_VERSION),
  exitCode: z.int().nullable(),
  timedOut: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  error: z.string().optional(),
});
export type ScriptRecord = z.infer<typeof ScriptRecord>;
