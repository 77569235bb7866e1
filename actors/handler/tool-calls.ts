/**
 * Runs the tool calls of one assistant message for a Handler session (its `runTools` effect). A continuation call
 * is not run: the session suspends on it. A call of a tool with side effects ({@link RECORDED_TOOLS}) is recorded
 * once it finished, before the next call runs; when the session was restored from a record taken right after that
 * answer, a call with a record is answered from it and not run again. A call that started but left no record runs
 * again: at most one repeated script per crash.
 */
import type { ChatMessage, PendingContinuation, RunToolsInput, ToolCall, ToolResults } from "../../machines/handler/session.js";
import { RECORD_VERSION, ToolRecord, type ContinuationKind } from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { Logger } from "../deps.js";
import { readContinuation } from "./continuation.js";
import { readRecord, RECORDED_TOOLS, toolKey, writeRecord } from "./records.js";
import type { ToolAnswer, Toolset } from "./toolset.js";

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
  records?: ToolRecords;
  log: Logger;
  /** Publishes a progress event of the task. */
  progress: (event: string, message: string, data: Record<string, unknown>) => void;
}

/** Runs the calls in order, one `tool` message each (none for the continuation taken). */
export async function runToolCalls(input: RunToolsInput, signal: AbortSignal, env: ToolRunEnv): Promise<ToolResults> {
  const messages: ChatMessage[] = [];
  let malformed = 0;
  let continuation: PendingContinuation | undefined;
  for (const [index, call] of input.calls.entries()) {
    // A cancelled session has gone: nothing more runs for it.
    if (signal.aborted) break;
    const asked = readContinuation(call, env.kinds);
    if (asked && "continuation" in asked && !continuation) {
      continuation = asked.continuation;
      env.progress("tool.call", call.function.name, { tool: call.function.name, malformed: false });
      continue;
    }
    const answer: ToolAnswer & { replayed?: boolean } = asked
      ? "problem" in asked
        ? { malformed: true, content: asked.problem }
        : { malformed: false, content: "error: one continuation per message; call it again after the first one has answered" }
      : await runRecorded(call, index, input.turn, signal, env);
    if (answer.malformed) malformed++;
    const note = answer.malformed ? " (malformed)" : answer.replayed ? " (replayed: not run again)" : "";
    env.progress("tool.call", `${call.function.name}${note}`, {
      tool: call.function.name,
      malformed: answer.malformed,
      ...(answer.replayed ? { replayed: true } : {}),
    });
    messages.push({ role: "tool", tool_call_id: call.id, content: answer.content });
  }
  return { messages, malformed, ...(continuation ? { continuation } : {}) };
}

async function runRecorded(
  call: ToolCall,
  index: number,
  turn: number,
  signal: AbortSignal,
  env: ToolRunEnv,
): Promise<ToolAnswer & { replayed?: boolean }> {
  const records = env.records && RECORDED_TOOLS.has(call.function.name) ? env.records : undefined;
  if (!records) return env.toolset.run(call, signal);
  const key = toolKey(records.key, turn, index, call.id);
  if (records.restoredTurn === turn) {
    const recorded = await readRecord(records.store, key, ToolRecord, env.log);
    if (recorded) return { content: recorded.content, malformed: recorded.malformed, replayed: true };
  }
  const answer = await env.toolset.run(call, signal);
  // A malformed call ran nothing; a run cut short by a cancel is no answer to replay.
  if (!answer.malformed && !signal.aborted) {
    await writeRecord(
      records.store,
      key,
      ToolRecord,
      { v: RECORD_VERSION, tool: call.function.name, content: answer.content, malformed: false },
      env.log,
    );
  }
  return answer;
}
