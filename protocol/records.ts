/**
 * Records the Handler keeps in the turns bucket (`<ROOT>_TURNS`), so a task re-run after a crash continues a
 * session from its last recorded answer or turn, does not run a recorded `run_script` call again, and does not run
 * a finished session or script again. Versioned: a record of another version is not used (the work runs again)
 * and is reported.
 */
import { z } from "zod";
import { SessionCheckpoint, SessionState } from "./continuation.js";
import { TaskResult, Usage } from "./result.js";
import { CompileReply } from "./compiler.js";
import { ErrorReply } from "./errors.js";
import { Conversation, ToolCallTrace, TurnTrace } from "./node-records.js";

/** What a running session record keeps of its model calls and tool calls so far (its messages are the session's). */
export const SessionTrace = z.object({ turns: z.array(TurnTrace), toolCalls: z.array(ToolCallTrace) });
export type SessionTrace = z.infer<typeof SessionTrace>;

/**
 * Version of the records written. Version 2 records a session right after the model's answer too, so a running
 * record may end with tool calls still to run; a release that reads only version 1 ignores such a record rather
 * than sending the model a call left unanswered. Version 1 records read the same in version 2.
 */
export const RECORD_VERSION = 2;

/** Versions of the records read: version 1's are a subset of version 2's. */
const ReadVersion = z.literal([1, RECORD_VERSION]);

/**
 * A Handler session's record: in progress (its state after the model's last answer, which may end with tool calls
 * still to run, or after that answer's tools ran), or finished (its reply).
 */
export const TurnRecord = z.discriminatedUnion("status", [
  z.object({ v: ReadVersion, status: z.literal("running"), session: SessionCheckpoint, trace: SessionTrace.optional() }),
  z.object({
    v: ReadVersion,
    status: z.literal("done"),
    result: TaskResult,
    session: SessionState.optional(),
    /** The session's conversation, bounded and masked (protocol/node-records.ts); absent in records of older releases. */
    conversation: Conversation.optional(),
  }),
]);
export type TurnRecord = z.infer<typeof TurnRecord>;

/** A script command's record: what it produced. */
export const ScriptRecord = z.object({
  v: ReadVersion,
  exitCode: z.int().nullable(),
  timedOut: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  error: z.string().optional(),
});
export type ScriptRecord = z.infer<typeof ScriptRecord>;

/**
 * A tool call's record, keyed by session, turn and tool-call id: the answer the model was given, written once the
 * tool finished and before the next model call. A tool that is not idempotent is marked `started` before it runs:
 * a re-run that finds only the marker does not call it again (its outcome is unknown).
 */
export const ToolRecord = z.object({
  v: z.literal(RECORD_VERSION),
  /** `started`: the call began and has no answer yet (`content` is empty); absent or `done`: `content` is its answer. */
  status: z.enum(["started", "done"]).optional(),
  /** The tool's name, as the model called it. */
  tool: z.string(),
  /** The text of the `tool` message. */
  content: z.string(),
  /** The call was malformed (it counts against the session's malformed-call limit). */
  malformed: z.boolean(),
});
export type ToolRecord = z.infer<typeof ToolRecord>;

/**
 * A compilation's record (the Compiler, actors/compiler/records.ts), kept in the turns bucket under
 * `<task>.k<digest of what is asked and its occurrence>`: in progress, the model's answers so far, each of which failed
 * validation (the next attempt feeds its errors back), and the tokens they used; finished, the answer (a template,
 * or `INVALID_TEMPLATE` once no attempt was valid). A re-run continues after the recorded answers, or replays the
 * finished one, without asking the model again.
 */
export const CompileRecord = z.discriminatedUnion("status", [
  z.object({ v: z.literal(1), status: z.literal("running"), answers: z.array(z.string()), usage: Usage }),
  z.object({ v: z.literal(1), status: z.literal("done"), reply: z.union([CompileReply, ErrorReply]) }),
]);
export type CompileRecord = z.infer<typeof CompileRecord>;

/**
 * The in-flight marker of a session, script command or compilation (`<record key>.run`): which Handler process runs it and until
 * when its lease holds (renewed while it runs). A run whose final record is stored leaves it as it is (the record says
 * the run ended); one that stopped without one (a cancel, a shutdown) releases it. A request for the same key meanwhile
 * joins the run instead of starting it.
 */
export const RunMarker = z.object({
  v: z.literal(1),
  /** The Handler process running it (host, pid and a per-process nonce). */
  owner: z.string(),
  /** Epoch milliseconds the lease holds until, unless renewed. */
  until: z.number(),
  /** The run ended without a final record stored: the next request for the key reads what it left or runs it. */
  released: z.boolean().optional(),
});
export type RunMarker = z.infer<typeof RunMarker>;

/**
 * The outcome of a wait for the user's input (`request_user_input`, a checkmate question or gate), kept by the
 * Evaluator in the turns bucket under `<task>.i<digest of the question and its occurrence>`: the answer, or that no
 * answer came in time. A re-run of the task (a Director takeover) that asks the same question again gets it at once,
 * so the user is not asked twice.
 */
export const InputRecord = z.union([
  z.object({ v: z.literal(1), answer: z.string() }),
  z.object({ v: z.literal(1), timedOut: z.string() }),
]);
export type InputRecord = z.infer<typeof InputRecord>;
