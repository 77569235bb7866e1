/**
 * Runs the tool calls of one assistant message for a Handler session (its `runTools` effect). A continuation call
 * is not run: the session suspends on it. Every call of a tool the toolset knows (and `run_script`,
 * {@link RECORDED_TOOLS}) is recorded once it finished, before the next call runs; when the session was restored
 * from a record taken right after that answer, a call with a record is answered from it and not run again. A call
 * that started but left no answer runs again only when its tool is idempotent: any other is marked `started` before
 * it runs, and a re-run finding only that marker answers the model with an error saying the outcome is unknown.
 * Each call is a `tool.call` progress event with the tool's source and the call's duration.
 */
import type { ChatMessage, PendingContinuation, RunToolsInput, ToolCall, ToolResults } from "../../machines/handler/session.js";
import {
  cutText,
  EVENT_TEXT_MAX,
  RECORD_VERSION,
  ToolRecord,
  type ContinuationKind,
  type TemplateTool,
  type ToolCallEventData,
  type ToolCallTrace,
} from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { Logger } from "../deps.js";
import { readContinuation } from "./continuation.js";
import { readTemplateCall } from "./template-tools.js";
import { readSessionRecord, RECORDED_TOOLS, toolKey, writeRecord } from "./records.js";
import type { ToolAnswer, Toolset } from "./toolset.js";
import { inToolSpan, type SessionTrace } from "./traces.js";

/** Where a session's tool answers are recorded. */
export interface ToolRecords {
  store: TaskStore;
  /** The session's record key. */
  key: string;
  /** The turn the session was restored at from a record, if it was: only that turn's calls may have records. */
  restoredTurn?: number;
}

/** What {@link runToolCalls} works with. */
export interface ToolRunEnv {
  toolset: Toolset;
  /** Continuation tools offered to the session. */
  kinds: readonly ContinuationKind[];
  /** The toolset's tools offered to the session (its `<tools>` selection); absent: all of them. */
  offered?: ReadonlySet<string>;
  /** Library templates offered as tools: a call of one suspends the session like `run_subtask`. */
  templateTools?: readonly TemplateTool[];
  records?: ToolRecords;
  log: Logger;
  /** Publishes a progress event of the task. */
  progress: (event: string, message: string, data: Record<string, unknown>) => void;
  /** The session's trace: each call runs in its span. */
  trace?: SessionTrace;
  /** Milliseconds now (the duration of a call); `Date.now` by default. */
  now?: () => number;
  /** Told each call once answered, for the session's conversation record. */
  onCall?: (trace: ToolCallTrace) => void;
}

type Answered = ToolAnswer & { replayed?: boolean; unknownOutcome?: boolean };

/** Runs the calls in order, one `tool` message each (none for the continuation taken). */
export async function runToolCalls(input: RunToolsInput, signal: AbortSignal, env: ToolRunEnv): Promise<ToolResults> {
  const messages: ChatMessage[] = [];
  let malformed = 0;
  let continuation: PendingContinuation | undefined;
  const now = env.now ?? Date.now;
  for (const [index, call] of input.calls.entries()) {
    // A cancelled session has gone: nothing more runs for it.
    if (signal.aborted) break;
    const continued = readContinuation(call, env.kinds);
    const asked = continued ?? readTemplateCall(call, env.templateTools ?? []);
    const kind = continued ? "continuation" : "template";
    if (asked && "continuation" in asked && !continuation) {
      continuation = asked.continuation;
      const args = call.function.arguments;
      env.progress(
        "tool.call",
        call.function.name,
        event({ tool: call.function.name, source: kind, malformed: false, arguments: cutText(args, EVENT_TEXT_MAX) }),
      );
      env.onCall?.({
        turn: input.turn,
        id: call.id,
        tool: call.function.name,
        source: kind,
        arguments: args,
        result: "",
        durationMs: 0,
        malformed: false,
      });
      continue;
    }
    const started = now();
    const answer: Answered = asked
      ? "problem" in asked
        ? { malformed: true, content: asked.problem }
        : { malformed: false, content: "error: one continuation per message; call it again after the first one has answered" }
      : env.offered && !env.offered.has(call.function.name)
        ? { malformed: true, content: notOffered(call.function.name, env.offered) }
        : await inToolSpan(call, env.trace, env.toolset.info?.(call.function.name)?.source, () =>
            runRecorded(call, index, input.turn, signal, env),
          );
    if (answer.malformed) malformed++;
    const note = answer.malformed
      ? " (malformed)"
      : answer.replayed
        ? " (replayed: not run again)"
        : answer.unknownOutcome
          ? " (outcome unknown: not run again)"
          : "";
    const source = asked ? kind : env.toolset.info?.(call.function.name)?.source;
    const durationMs = answer.replayed || answer.unknownOutcome ? 0 : now() - started;
    env.progress(
      "tool.call",
      `${call.function.name}${source ? ` (${source})` : ""}${note}${answer.malformed || durationMs === 0 ? "" : ` in ${durationMs} ms`}`,
      event({
        tool: call.function.name,
        ...(source ? { source } : {}),
        durationMs,
        malformed: answer.malformed,
        ...(answer.replayed ? { replayed: true } : {}),
        ...(answer.unknownOutcome ? { unknownOutcome: true } : {}),
        arguments: cutText(call.function.arguments, EVENT_TEXT_MAX),
        result: cutText(answer.content, EVENT_TEXT_MAX),
      }),
    );
    env.onCall?.({
      turn: input.turn,
      id: call.id,
      tool: call.function.name,
      ...(source ? { source } : {}),
      arguments: call.function.arguments,
      result: answer.content,
      durationMs,
      malformed: answer.malformed,
      ...(answer.replayed ? { replayed: true } : {}),
      ...(answer.unknownOutcome ? { unknownOutcome: true } : {}),
    });
    messages.push({ role: "tool", tool_call_id: call.id, content: answer.content });
  }
  return { messages, malformed, ...(continuation ? { continuation } : {}) };
}

// A tool of this Handler the task did not select is no tool of the session: the model is told the ones it has.
const notOffered = (name: string, offered: ReadonlySet<string>) =>
  `error: no tool named '${name}' is available; available: ${offered.size === 0 ? "none" : [...offered].join(", ")}`;

const event = (data: ToolCallEventData): Record<string, unknown> => data;

async function runRecorded(call: ToolCall, index: number, turn: number, signal: AbortSignal, env: ToolRunEnv): Promise<Answered> {
  const name = call.function.name;
  const info = env.toolset.info?.(name);
  const records = env.records && (info !== undefined || RECORDED_TOOLS.has(name)) ? env.records : undefined;
  if (!records) return env.toolset.run(call, signal);
  const idempotent = info ? info.idempotent : !RECORDED_TOOLS.has(name);
  const key = toolKey(records.key, turn, index, call.id);
  if (records.restoredTurn === turn) {
    const recorded = await readSessionRecord(records.store, key, ToolRecord, env.log);
    if (recorded && recorded.status !== "started") return { content: recorded.content, malformed: recorded.malformed, replayed: true };
    if (recorded && !idempotent) {
      return {
        malformed: false,
        unknownOutcome: true,
        content:
          `error: the outcome of this call of '${name}' is unknown: it was running in a Handler that stopped before it answered, and it is not ` +
          "declared idempotent, so it was not run again. Check its effect before calling it again.",
      };
    }
  }
  if (!idempotent)
    await writeRecord(
      records.store,
      key,
      ToolRecord,
      { v: RECORD_VERSION, status: "started", tool: name, content: "", malformed: false },
      env.log,
    );
  const answer = await env.toolset.run(call, signal);
  // A malformed call ran nothing; a run cut short by a cancel is no answer to replay.
  if (!signal.aborted && (!answer.malformed || !idempotent)) {
    await writeRecord(
      records.store,
      key,
      ToolRecord,
      { v: RECORD_VERSION, status: "done", tool: name, content: answer.content, malformed: answer.malformed },
      env.log,
    );
  }
  return answer;
}
