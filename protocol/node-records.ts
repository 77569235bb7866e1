/**
 * Node records: what each node of a task did, kept in the turns bucket (`<ROOT>_TURNS`) so that anyone can read it
 * after the fact. The Evaluator writes one {@link NodeRecord} per evaluation of a node (`<task>.node.<digest>`) before
 * the node's parent goes on; an atomic node's conversation is the {@link Conversation} the Handler keeps in its
 * session records, which the node record names (`sessions`). Read through `<root>.tasks.<id>.nodes` (the list) and
 * `<root>.tasks.<id>.node` (one node, conversation included). Every string is bounded and masked of the secrets the
 * writing process knows.
 */
import { z } from "zod";
import { SessionMessage } from "./continuation.js";
import { Notes, ReturnStatus, TaskError, Usage } from "./result.js";
import { TaskId } from "./ids.js";

/** Longest text a record keeps of one value (a message, an output, a tool's arguments or result): 16 KiB of characters. */
export const RECORD_TEXT_MAX = 16 * 1024;

/** Longest JSON a record keeps of one bound input value, or of a result's notes: 4 KiB of characters. */
export const RECORD_VALUE_MAX = 4 * 1024;

/** Longest text an event keeps of a tool call's arguments or result, or of a node's output preview. */
export const EVENT_TEXT_MAX = 1024;

/** How a node ended: `running` (its record is written when it ends, so only seen in a live view), or final. */
export const NodeState = z.enum(["running", "completed", "failed", "cancelled", "suspended"]);
export type NodeState = z.infer<typeof NodeState>;

/** A value cut to its bound: its first characters and its size. */
export const CutValue = z.object({
  /** The value was larger than the record keeps. */
  truncated: z.literal(true),
  /** Size of the whole value (UTF-16 characters of its JSON or text). */
  chars: z.int().nonnegative(),
  /** Its first characters. */
  preview: z.string(),
});
export type CutValue = z.infer<typeof CutValue>;

/** One tool call of a session: what the model asked and what it was answered. */
export const ToolCallTrace = z.object({
  /** The assistant turn (from 1) that asked for it. */
  turn: z.int().positive(),
  /** The tool-call id the model gave. */
  id: z.string(),
  /** The tool's name, as the model called it. */
  tool: z.string(),
  /** Where the tool comes from (`builtin`, `mcp`, `nats`, `typescript`, `continuation`, `template`); absent for a malformed call. */
  source: z.string().optional(),
  /** The arguments as the model sent them (JSON text), cut to {@link RECORD_TEXT_MAX}. */
  arguments: z.string(),
  /** The answer the model was given (the `tool` message), cut to {@link RECORD_TEXT_MAX}; empty for a continuation. */
  result: z.string(),
  /** Milliseconds the call took (0 when replayed or malformed). */
  durationMs: z.number().nonnegative(),
  /** The call was malformed (unknown tool, arguments not JSON or not matching); `result` says why. */
  malformed: z.boolean(),
  /** Answered from the session's record: not run again. */
  replayed: z.boolean().optional(),
  /** The call was in flight in a Handler that stopped, and is not idempotent: answered with an error, not run again. */
  unknownOutcome: z.boolean().optional(),
});
export type ToolCallTrace = z.infer<typeof ToolCallTrace>;

/** One model call of a session (one assistant message). */
export const TurnTrace = z.object({
  /** The turn, from 1. */
  turn: z.int().positive(),
  /** The model that answered. */
  model: z.string(),
  /** How many messages of {@link Conversation.messages} were sent with this call (its answer is the next one). */
  sent: z.int().nonnegative(),
  /** Tokens of this call alone. */
  usage: Usage,
  /** Cost of this call alone, when the price table prices the model. */
  cost: z.number().nonnegative().optional(),
  /** Milliseconds from the request to the whole answer, retries included. */
  durationMs: z.number().nonnegative(),
  /** Why the model stopped (`stop`, `tool_calls`, `length`, …). */
  finishReason: z.string(),
  /** Retries of this call after a retryable fault. */
  retries: z.int().nonnegative(),
});
export type TurnTrace = z.infer<typeof TurnTrace>;

/**
 * The conversation of one Handler session, as the Handler recorded it: every message as sent (system, user,
 * assistant with its tool calls, tool results) and the last answer, each text cut to {@link RECORD_TEXT_MAX}; each
 * model call with its own usage; each tool call with its arguments and result. A resumed session (after a subtask, an
 * evaluation, the user's answer) is a session of its own, whose messages start with those of the first.
 */
export const Conversation = z.object({
  /** The messages, in order. */
  messages: z.array(SessionMessage).max(10_000),
  /** The model calls, in order. */
  turns: z.array(TurnTrace).max(10_000),
  /** The tool calls, in order. */
  toolCalls: z.array(ToolCallTrace).max(10_000),
  /** Messages left out in the middle of a very long conversation (the first and last are kept). */
  omittedMessages: z.int().nonnegative().optional(),
});
export type Conversation = z.infer<typeof Conversation>;

/** The output of a node, bounded. */
export const NodeOutput = z.object({
  /** How it ended. */
  status: ReturnStatus,
  /** The output text, cut to {@link RECORD_TEXT_MAX}. */
  content: z.string(),
  /** Whether `content` was cut. */
  contentTruncated: z.boolean().optional(),
  /** The result's notes (a value over {@link RECORD_VALUE_MAX} as JSON is kept as a {@link CutValue}). */
  notes: Notes,
  /** The parsed JSON output, when the template asked for JSON (a {@link CutValue} when large). */
  parsedContent: z.unknown().optional(),
});
export type NodeOutput = z.infer<typeof NodeOutput>;

/** The version of {@link NodeRecord} written. */
export const NODE_RECORD_VERSION = 1;

/**
 * The durable record of one evaluation of one node: written by the Evaluator when the node ends, before its parent
 * goes on, under `<task>.node.<digest of path and occurrence>` in the turns bucket.
 */
export const NodeRecord = z.object({
  v: z.literal(NODE_RECORD_VERSION),
  /** The task. */
  taskId: TaskId,
  /**
   * The node's path: indexes and fields of the template (`0`, `0.steps.1`, `0.steps.1.inputs.0.task`), scoped for a
   * subtask, a library template, a call or a map branch over a list (`0/map:2:0.steps.0`, `0.steps.1/subtask1:0`).
   */
  path: z.string(),
  /** Which evaluation of the path this is, from 1 (a loop's director runs once per iteration). */
  occurrence: z.int().positive(),
  /** The node's name: its place (`step 2`, `input 1`, `branch 3`) and its `name`/`id` or first words: `step 2 · summarise the notes`. */
  name: z.string(),
  /** What the node is: the task type (`atomic`, `sequential`, `map`, `reduce`, `script`, …), `call`, `cond`, or an element name. */
  kind: z.string(),
  /** How it ended. */
  state: NodeState,
  /** ISO-8601 time it started. */
  startedAt: z.string(),
  /** ISO-8601 time it ended. */
  endedAt: z.string(),
  /** Milliseconds it took. */
  durationMs: z.number().nonnegative(),
  /** The values bound to its declared `<inputs>` (each over {@link RECORD_VALUE_MAX} as JSON kept as a {@link CutValue}). */
  inputs: z.record(z.string(), z.unknown()).optional(),
  /** Its output. */
  output: NodeOutput,
  /** Why it failed. */
  error: TaskError.optional(),
  /** Tokens of the model calls of this node alone (its own sessions; a composite's children have their own records). */
  usage: Usage.optional(),
  /** Cost of this node alone, when priced. */
  cost: z.number().nonnegative().optional(),
  /** The models that answered this node's sessions. */
  models: z.array(z.string()).optional(),
  /** The Handler session records of this node (keys in the turns bucket), in order: their conversations. */
  sessions: z.array(z.string()).optional(),
  /** A fork's node answered from the record of the task it was forked from (that task's id): nothing ran. */
  replayedFrom: TaskId.optional(),
});
export type NodeRecord = z.infer<typeof NodeRecord>;

/** A node as listed: its record without output, inputs and sessions. */
export const NodeSummary = NodeRecord.pick({
  path: true,
  occurrence: true,
  name: true,
  kind: true,
  state: true,
  startedAt: true,
  endedAt: true,
  durationMs: true,
  usage: true,
  cost: true,
  models: true,
  replayedFrom: true,
}).extend({
  /** The error's message, when it failed. */
  error: z.string().optional(),
});
export type NodeSummary = z.infer<typeof NodeSummary>;

/** Body of `<root>.tasks.<id>.nodes` (any body reads as `{}`). */
export const NodeListRequest = z.object({});
export type NodeListRequest = z.infer<typeof NodeListRequest>;

/** Answer of `<root>.tasks.<id>.nodes`: the task's nodes that have ended, in the order they started. */
export const NodeListReply = z.object({
  /** The task. */
  taskId: TaskId,
  /** Its nodes. */
  nodes: z.array(NodeSummary),
  /** More nodes than one answer holds (the first are listed). */
  truncated: z.boolean().optional(),
});
export type NodeListReply = z.infer<typeof NodeListReply>;

/** Body of `<root>.tasks.<id>.node`: which node. */
export const NodeGetRequest = z.strictObject({
  /** The node's path, as listed. */
  path: z.string().min(1).max(4096),
  /** Which evaluation of it; the last one when absent. */
  occurrence: z.int().positive().optional(),
});
export type NodeGetRequest = z.infer<typeof NodeGetRequest>;

/** Answer of `<root>.tasks.<id>.node`: the node's record and the conversations of its sessions. */
export const NodeDetailReply = z.object({
  /** The task. */
  taskId: TaskId,
  /** The node's record. */
  node: NodeRecord,
  /** One conversation per session of the node, in order (absent for a session whose record holds none, or expired). */
  conversations: z.array(Conversation),
  /** Retries of the node's model calls, over its sessions. */
  retries: z.int().nonnegative(),
  /** The answer was cut to fit one message: texts shortened, middle messages left out. */
  truncated: z.boolean().optional(),
});
export type NodeDetailReply = z.infer<typeof NodeDetailReply>;

/** `data` of a `node.finished` event. */
export const NodeFinishedEventData = z.object({
  /** The node. */
  nodePath: z.string(),
  /** Which evaluation of the path, from 1. */
  occurrence: z.int().positive(),
  /** Its name, as in its record. */
  name: z.string(),
  /** What it is (as {@link NodeRecord.kind}). */
  kind: z.string(),
  /** How it ended: `COMPLETE`, `FAILED` or `CONTINUATION`. */
  status: ReturnStatus,
  /** Milliseconds it took. */
  durationMs: z.number().nonnegative(),
  /** Tokens of this node alone. */
  usage: Usage.optional(),
  /** Cost of this node alone, when priced. */
  cost: z.number().nonnegative().optional(),
  /** The first characters of its output, or of its error's message ({@link EVENT_TEXT_MAX}). */
  preview: z.string(),
  /** Answered from the record of the task this one was forked from: no model call, tool call or program ran. */
  replayed: z.literal(true).optional(),
});
export type NodeFinishedEventData = z.infer<typeof NodeFinishedEventData>;

/** `data` of a `model.turn` event: one assistant message of a session. */
export const ModelTurnEventData = z.object({
  /** The node of the session. */
  nodePath: z.string(),
  /** The turn, from 1. */
  turn: z.int().positive(),
  /** The session's turn limit. */
  maxTurns: z.int().positive(),
  /** Tokens of this assistant message alone. */
  usage: Usage,
  /** Tokens of the session so far, this message included. */
  sessionUsage: Usage,
  /** Cost of this message alone, when priced. */
  cost: z.number().nonnegative().optional(),
  /** Cost of the session so far, when priced. */
  sessionCost: z.number().nonnegative().optional(),
  /** Tool calls the message asks for. */
  toolCalls: z.int().nonnegative(),
  /** The model that answered. */
  model: z.string(),
});
export type ModelTurnEventData = z.infer<typeof ModelTurnEventData>;

/** `text` cut to `max` characters, `…` marking a cut. */
export function cutText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

/** `value` as it is when its JSON has at most `max` characters, else a {@link CutValue} of its first characters. */
export function boundValue(value: unknown, max: number): unknown {
  if (value === undefined || value === null || typeof value === "number" || typeof value === "boolean") return value;
  if (typeof value === "string") return value.length <= max ? value : cut(value, max);
  let json: string;
  try {
    json = JSON.stringify(value) ?? "";
  } catch {
    return cut(String(value), max);
  }
  return json.length <= max ? value : cut(json, max);
}

/** Each value of `record` bounded by {@link boundValue}. */
export function boundValues(record: Record<string, unknown>, max: number): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, boundValue(v, max)]));
}

function cut(text: string, max: number): CutValue {
  return { truncated: true, chars: text.length, preview: text.slice(0, max) };
}
