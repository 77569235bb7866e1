/**
 * The Handler's replay policy (pure): whether a session call reads its record, what a record found means (the
 * finished session's reply again, or the session continued from its last recorded turn, with no model call asked
 * twice), and which outcomes are recorded as done for a re-run to replay.
 */
import type { ExecuteRequest, SessionState, TaskResult, TurnRecord } from "../../protocol/index.js";

/** The record of a session still running when it was written: its last checkpoint. */
export type RunningTurnRecord = Extract<TurnRecord, { status: "running" }>;

/** What a session call does with its record. */
export type Replay =
  | { kind: "run" }
  /** The session finished: its recorded reply is the answer, without a model call. */
  | { kind: "replay"; result: TaskResult; session?: SessionState; message: string; turns: unknown }
  /** The session stopped while running: it goes on from `record`'s checkpoint. */
  | { kind: "continue"; record: RunningTurnRecord; message: string; turns: number };

/**
 * Whether a session call reads its record. A fresh call (its task's first evaluation, first request) has none to
 * replay, unless a run of it came first (`before`: its in-flight marker was there). `fresh` rests on the intake's
 * delivery count, which a nats-server before 2.10.16 can report as 1 on a redelivery (a delivery to a pull of a
 * client gone rewinds the consumer).
 */
export function readsRecord(request: Pick<ExecuteRequest, "fresh">, before: boolean): boolean {
  return request.fresh !== true || before;
}

/** What the record found for a session call (`undefined`: none) makes it do. */
export function replayOf(recorded: TurnRecord | undefined): Replay {
  if (recorded === undefined) return { kind: "run" };
  if (recorded.status === "done") {
    const message = "replayed the recorded session: no model call";
    const { result, session } = recorded;
    return { kind: "replay", result, ...(session ? { session } : {}), message, turns: result.notes["turns"] };
  }
  const { turns, messages } = recorded.session;
  const last = messages.at(-1);
  const where = last?.role === "assistant" && last.tool_calls?.length ? `with the tool calls of turn` : `after turn`;
  return { kind: "continue", record: recorded, message: `continuing the recorded session ${where} ${turns}`, turns };
}

/** Whether a session's result is recorded as its answer: a session stopped by a cancel or a shutdown is not one to replay. */
export function replayable(result: TaskResult): boolean {
  return !(result.error?.type === "TASK_FAILURE" && result.error.reason === "execution_halted");
}
