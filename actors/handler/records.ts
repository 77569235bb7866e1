/**
 * The Handler's records (at most one repeated model call per crash). Each session of a node is keyed by task,
 * node path, occurrence and what it was asked. Its state is written as soon as the model answers with tool calls
 * (before any runs) and again once they ran; each tool call's answer once it finished (a call of a tool that is not
 * idempotent is marked before it runs too); its reply when it
 * ends. A re-run of the same call (the task resumed by another Director) replays a finished session or continues
 * one from its last recorded answer, using the recorded answers of its scripts. Script commands are recorded too.
 */
import { recordDigest } from "../record-digest.js";
import type { ChatMessage, CallModelInput, ModelReply } from "../../machines/handler/session.js";
import {
  cutText,
  RECORD_TEXT_MAX,
  type Conversation,
  type SessionMessage,
  type SessionTrace,
  type ToolCallTrace,
  type TurnTrace,
  CompileRecord,
  decode,
  encode,
  RECORD_VERSION,
  ScriptRecord,
  ToolRecord,
  TurnRecord,
  type ExecuteRequest,
  type ScriptRequest,
} from "../../protocol/index.js";
import type { z } from "zod";
import type { TaskStore } from "../bus.js";
import { messageOf, type Logger } from "../deps.js";

/** The record key of a session call, or undefined when the call asks for no record (no `occurrence`). */
export function turnKey(request: ExecuteRequest): string | undefined {
  if (request.occurrence === undefined) return undefined;
  const resume = request.resume
    ? [request.resume.session.toolCallId, request.resume.session.turns, recordDigest([request.resume.answer])]
    : null;
  return `${request.taskId}.t${recordDigest([request.nodePath, request.occurrence, request.prompt, request.system ?? "", request.model ?? "", request.files ?? [], request.context ?? "", resume])}`;
}

/** The record key of a script command. */
export function scriptKey(request: ScriptRequest): string | undefined {
  if (request.occurrence === undefined) return undefined;
  return `${request.taskId}.s${recordDigest([request.nodePath, request.occurrence, request.argv, request.cwd ?? "", request.env ?? {}, request.inheritEnv ?? true])}`;
}

/**
 * The record key of the `index`th tool call (id `toolCallId`) asked for by turn `turn` of the session recorded at
 * `sessionKey`. The turn is part of the key because a server may reuse tool-call ids from one answer to the next.
 */
export function toolKey(sessionKey: string, turn: number, index: number, toolCallId: string): string {
  return `${sessionKey}.c${recordDigest([turn, index, toolCallId])}`;
}

/**
 * Tools with side effects, whose answers a session records and replays rather than running them again, when the
 * toolset does not say (a toolset with `info` has every call of its tools recorded; actors/handler/tool-calls.ts).
 */
export const RECORDED_TOOLS: ReadonlySet<string> = new Set(["run_script"]);

/** The schemas of the records kept in the turns bucket by the Handler and its Compiler. */
export type RecordSchema = typeof TurnRecord | typeof ScriptRecord | typeof ToolRecord | typeof CompileRecord;

/** Largest record read back (a long session's messages). */
const MAX_RECORD_BYTES = 16 * 1024 * 1024;

/**
 * Reads a record; an unreadable one, or one of another version, reads as absent (the work runs again) with a
 * warning. A store that fails reads as absent too: recording makes a re-run cheaper, it is never required.
 */
export async function readSessionRecord<S extends RecordSchema>(
  store: TaskStore,
  key: string,
  schema: S,
  log: Logger,
): Promise<z.infer<S> | undefined> {
  try {
    const bytes = await store.get(key);
    if (!bytes) return undefined;
    const decoded = decode(schema, bytes, MAX_RECORD_BYTES);
    if (decoded.ok) return decoded.value as z.infer<S>;
    log.warn(
      { key, version: RECORD_VERSION, problem: decoded.error.message },
      "record ignored: not a record of this version; the work runs again",
    );
  } catch (err) {
    log.warn({ key, err: messageOf(err) }, "record unreadable; the work runs again");
  }
  return undefined;
}

/**
 * Records one Handler writes without waiting for the store (a session's reply: the answer goes out at once, on the
 * same connection after the write), by key: a read of one of them through {@link RecordsBehind.read} waits for its
 * write. A request elsewhere waits until the record is final (or the in-flight marker released: a run with no final record).
 */
export interface RecordsBehind {
  /**
   * Writes a record behind the reply; the returned promise resolves true once stored and never rejects (as with
   * {@link writeRecord}, a failure is logged).
   */
  write<S extends RecordSchema>(key: string, schema: S, value: z.infer<S>): Promise<boolean>;
  /** {@link readSessionRecord}, once a write of `key` still under way has resolved. */
  read<S extends RecordSchema>(key: string, schema: S): Promise<z.infer<S> | undefined>;
}

/** The {@link RecordsBehind} of one Handler writing to `store`. */
export function recordsBehind(store: TaskStore, log: Logger): RecordsBehind {
  const writing = new Map<string, Promise<boolean>>();
  return {
    write(key, schema, value) {
      const written: Promise<boolean> = writeRecord(store, key, schema, value, log).finally(() => {
        if (writing.get(key) === written) writing.delete(key);
      });
      writing.set(key, written);
      return written;
    },
    async read(key, schema) {
      await writing.get(key);
      return readSessionRecord(store, key, schema, log);
    },
  };
}

/** Writes a record; true once stored. A failure (a session too large for the store, an outage) is logged, never fatal. */
export async function writeRecord<S extends RecordSchema>(
  store: TaskStore,
  key: string,
  schema: S,
  value: z.infer<S>,
  log: Logger,
): Promise<boolean> {
  try {
    await store.put(key, encode(schema, value));
    return true;
  } catch (err) {
    log.warn({ key, err: messageOf(err) }, "record not written; a re-run would repeat this work");
    return false;
  }
}

/** Most messages a conversation record keeps. */
const MAX_MESSAGES = 400;

/**
 * The conversation of one Handler session, kept in its records: each model call with the messages it sent, its own
 * usage, duration and retries, and each tool call with its arguments and result. The session's running records keep
 * the calls so far ({@link ConversationLog.trace}), so a session continued after a crash keeps them too; its final
 * record keeps the whole conversation ({@link ConversationLog.conversation}), bounded: each text cut to
 * {@link RECORD_TEXT_MAX} characters, at most {@link MAX_MESSAGES} messages (the first and the last).
 */
export interface ConversationLog {
  /** A model call answered: `input` is what was sent. */
  turn(input: CallModelInput, reply: ModelReply, timing: { durationMs: number; retries: number; cost?: number | undefined }): void;
  /** A tool call answered. */
  toolCall(trace: ToolCallTrace): void;
  /** The model calls and tool calls so far, for a running record. */
  trace(): SessionTrace;
  /** The whole conversation, bounded; `last` is the session's messages when it ended, if known (a suspended session's). */
  conversation(last?: readonly ChatMessage[]): Conversation;
}

/** A {@link ConversationLog}, continuing `restored` (the trace of the running record the session continues from). */
export function conversationLog(restored?: SessionTrace): ConversationLog {
  const turns: TurnTrace[] = [...(restored?.turns ?? [])];
  const toolCalls: ToolCallTrace[] = [...(restored?.toolCalls ?? [])];
  let messages: readonly ChatMessage[] = [];
  return {
    turn(input, reply, timing) {
      const assistant: ChatMessage = {
        role: "assistant",
        content: reply.content === "" && reply.toolCalls.length > 0 ? null : reply.content,
        ...(reply.toolCalls.length > 0 ? { tool_calls: reply.toolCalls } : {}),
      };
      messages = [...input.messages, assistant];
      const turn = input.messages.filter((m) => m.role === "assistant").length + 1;
      turns.push({
        turn,
        model: reply.model,
        sent: input.messages.length,
        usage: reply.usage,
        ...(timing.cost === undefined ? {} : { cost: timing.cost }),
        durationMs: timing.durationMs,
        finishReason: reply.finishReason,
        retries: timing.retries,
      });
    },
    toolCall(trace) {
      toolCalls.push({ ...trace, arguments: cutText(trace.arguments, RECORD_TEXT_MAX), result: cutText(trace.result, RECORD_TEXT_MAX) });
    },
    trace: () => ({ turns: [...turns], toolCalls: [...toolCalls] }),
    conversation(last) {
      const all = last && last.length >= messages.length ? last : messages;
      const kept = all.length <= MAX_MESSAGES ? all : [...all.slice(0, MAX_MESSAGES / 2), ...all.slice(all.length - MAX_MESSAGES / 2)];
      return {
        messages: kept.map(boundMessage),
        turns: [...turns],
        toolCalls: [...toolCalls],
        ...(kept.length < all.length ? { omittedMessages: all.length - kept.length } : {}),
      };
    },
  };
}

function boundMessage(message: ChatMessage): SessionMessage {
  switch (message.role) {
    case "assistant":
      return {
        role: "assistant",
        content: message.content === null ? null : cutText(message.content, RECORD_TEXT_MAX),
        ...(message.tool_calls
          ? {
              tool_calls: message.tool_calls.map((c) => ({
                ...c,
                function: { name: c.function.name, arguments: cutText(c.function.arguments, RECORD_TEXT_MAX) },
              })),
            }
          : {}),
      };
    case "tool":
      return { role: "tool", tool_call_id: message.tool_call_id, content: cutText(message.content, RECORD_TEXT_MAX) };
    default:
      return { role: message.role, content: cutText(message.content, RECORD_TEXT_MAX) };
  }
}
