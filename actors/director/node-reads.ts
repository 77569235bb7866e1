/**
 * The Director's answers to `<root>.tasks.<id>.nodes` and `<root>.tasks.<id>.node`: a task's node records, read from
 * the turns bucket where the Evaluator wrote them (actors/evaluator/node-records.ts), and a node's conversations from
 * the Handler's session records it names. Every answer fits one message: a list is cut to its first nodes, a
 * conversation's texts are shortened and its middle messages left out.
 */
import {
  cutText,
  decode,
  encodeJson,
  errorReply,
  FINAL_STATES,
  NodeRecord,
  parseTaskId,
  Requests,
  TurnRecord,
  type Conversation,
  type ErrorReply,
  type NodeDetailReply,
  type NodeGetRequest,
  type NodeListReply,
  type NodeSummary,
  type TaskId,
} from "../../protocol/index.js";
import type { BusMessage, BusSubscription, TaskStore } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import { nodeKey, nodeKeys } from "../evaluator/node-records.js";
import { readTaskRecord } from "./records.js";
import { serve } from "../serve.js";

/** Node records read at once. */
const READS_AT_ONCE = 16;
/** Room left in a message for subject and headers. */
const MESSAGE_MARGIN = 16 * 1024;
/** Largest record read back. */
const MAX_RECORD_BYTES = 16 * 1024 * 1024;

/** Where the node records are and how long they are kept. */
export interface NodeReadsConfig {
  /** The turns bucket. */
  records: TaskStore;
  /** How long a record is kept (the bucket's age limit), for the message of an expired one. */
  maxAgeMs: number;
  /** Requests answered at once. */
  concurrency: number;
}

/** Serves `nodes` and `node` for a Director (queue group `director`). */
export function serveNodeReads(deps: ActorDeps, tasks: TaskStore, config: NodeReadsConfig): BusSubscription[] {
  const { subjects } = deps;
  const limit = (deps.bus.maxMessageBytes ?? Number.POSITIVE_INFINITY) - MESSAGE_MARGIN;
  const fits = (value: unknown) => encodeJson(value).byteLength <= limit;

  const taskOf = (msg: BusMessage): TaskId | ErrorReply =>
    parseTaskId(subjects.taskIdOf(msg.subject)) ?? errorReply("INVALID_ID", `illegal task id in subject '${msg.subject}'`);

  const readAll = (taskId: TaskId) => readNodeRecords(config.records, taskId);
  const readNode = (key: string) => readNodeRecord(config.records, key);

  const missing = (taskId: TaskId) => missingRecords(deps, tasks, config.maxAgeMs, taskId);

  const nodes = async (_: unknown, msg: BusMessage): Promise<NodeListReply | ErrorReply> => {
    const taskId = taskOf(msg);
    if (typeof taskId !== "string") return taskId;
    const records = await readAll(taskId);
    if (records.length === 0) {
      const why = await missing(taskId);
      if (why) return why;
    }
    const summaries = records.map(summaryOf);
    let shown = summaries;
    while (shown.length > 0 && !fits({ taskId, nodes: shown, truncated: true })) shown = shown.slice(0, Math.floor(shown.length / 2));
    return { taskId, nodes: shown, ...(shown.length < summaries.length ? { truncated: true } : {}) };
  };

  const node = async (request: NodeGetRequest, msg: BusMessage): Promise<NodeDetailReply | ErrorReply> => {
    const taskId = taskOf(msg);
    if (typeof taskId !== "string") return taskId;
    const record = await findNode(taskId, request);
    if (record === undefined) {
      const known = await readAll(taskId);
      const why = known.length === 0 ? await missing(taskId) : undefined;
      if (why) return why;
      const occurrence = request.occurrence === undefined ? "" : ` (occurrence ${request.occurrence})`;
      return errorReply("NOT_FOUND", `task '${taskId}' has no record of node '${request.path}'${occurrence}; ${pathsOf(known)}`);
    }
    const conversations = (await Promise.all((record.sessions ?? []).map(readConversation))).filter(
      (c): c is Conversation => c !== undefined,
    );
    const retries = conversations.reduce((sum, c) => sum + c.turns.reduce((n, t) => n + t.retries, 0), 0);
    return fitDetail({ taskId, node: record, conversations, retries });
  };

  /** The record of the node at `request.path`: the occurrence asked for, or the last one. */
  const findNode = async (taskId: TaskId, request: NodeGetRequest): Promise<NodeRecord | undefined> => {
    if (request.occurrence !== undefined) return readNode(nodeKey(taskId, request.path, request.occurrence));
    let last: NodeRecord | undefined;
    for (let occurrence = 1; ; occurrence++) {
      const found = await readNode(nodeKey(taskId, request.path, occurrence));
      if (found === undefined) return last;
      last = found;
    }
  };

  const readConversation = async (key: string): Promise<Conversation | undefined> => {
    const bytes = await config.records.get(key);
    const decoded = bytes && decode(TurnRecord, bytes, MAX_RECORD_BYTES);
    if (!decoded || !decoded.ok) return undefined;
    const record = decoded.value;
    if (record.status === "done") return record.conversation;
    // A session still running (or stopped mid-way): its messages so far and the calls its record keeps.
    return { messages: record.session.messages, turns: record.trace?.turns ?? [], toolCalls: record.trace?.toolCalls ?? [] };
  };

  /** `reply` cut to fit one message: texts shortened, then middle messages left out. */
  const fitDetail = (reply: NodeDetailReply): NodeDetailReply => {
    if (fits(reply)) return reply;
    for (const max of [4096, 512, 64]) {
      const cut = { ...reply, conversations: reply.conversations.map((c) => shorten(c, max)), truncated: true };
      if (fits(cut)) return cut;
    }
    const few = { ...reply, conversations: reply.conversations.map((c) => keepEnds(shorten(c, 64), 20)), truncated: true };
    return fits(few) ? few : { ...reply, conversations: [], truncated: true };
  };

  const common = { queue: subjects.queue("director"), concurrency: config.concurrency };
  return [serve(deps, Requests.taskNodes, { ...common, handle: nodes }), serve(deps, Requests.taskNode, { ...common, handle: node })];
}

/** Every node record of task `taskId`, in the order the nodes started. */
export async function readNodeRecords(records: TaskStore, taskId: TaskId): Promise<NodeRecord[]> {
  if (!records.keys) throw new Error("the turns store cannot list its keys");
  const keys = await records.keys(nodeKeys(taskId));
  const out: NodeRecord[] = [];
  for (let at = 0; at < keys.length; at += READS_AT_ONCE) {
    const batch = await Promise.all(keys.slice(at, at + READS_AT_ONCE).map((key) => readNodeRecord(records, key)));
    out.push(...batch.filter((r): r is NodeRecord => r !== undefined));
  }
  return out.sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.path.localeCompare(b.path) || a.occurrence - b.occurrence);
}

async function readNodeRecord(records: TaskStore, key: string): Promise<NodeRecord | undefined> {
  const bytes = await records.get(key);
  const decoded = bytes && decode(NodeRecord, bytes, MAX_RECORD_BYTES);
  return decoded && decoded.ok ? decoded.value : undefined;
}

/** Why task `taskId` has no node records: unknown, or expired (`undefined`: none yet). */
export async function missingRecords(deps: ActorDeps, tasks: TaskStore, maxAgeMs: number, taskId: TaskId): Promise<ErrorReply | undefined> {
  const task = (await readTaskRecord(tasks, taskId))?.record;
  if (task === undefined) return errorReply("NOT_FOUND", `no task '${taskId}'`);
  const age = deps.now().getTime() - Date.parse(task.updatedAt);
  if (FINAL_STATES.has(task.state) && age >= maxAgeMs) {
    const days = Math.round((maxAgeMs / 86_400_000) * 10) / 10;
    return errorReply(
      "EXPIRED",
      `the node records of task '${taskId}' have expired: they are kept ${days} days (DIRIGENT_RECORDS_MAX_AGE_MS)`,
    );
  }
  return undefined;
}

function summaryOf(record: NodeRecord): NodeSummary {
  const { path, occurrence, name, kind, state, startedAt, endedAt, durationMs, usage, cost, models, error, replayedFrom } = record;
  const message = error && "message" in error && typeof error.message === "string" ? error.message : undefined;
  return {
    path,
    occurrence,
    name,
    kind,
    state,
    startedAt,
    endedAt,
    durationMs,
    ...(usage ? { usage } : {}),
    ...(cost === undefined ? {} : { cost }),
    ...(models ? { models } : {}),
    ...(replayedFrom === undefined ? {} : { replayedFrom }),
    ...(message === undefined ? {} : { error: cutText(message, 512) }),
  };
}

function shorten(conversation: Conversation, max: number): Conversation {
  return {
    ...conversation,
    messages: conversation.messages.map((m) =>
      m.role === "assistant"
        ? {
            ...m,
            content: m.content === null ? null : cutText(m.content, max),
            ...(m.tool_calls
              ? {
                  tool_calls: m.tool_calls.map((c) => ({
                    ...c,
                    function: { ...c.function, arguments: cutText(c.function.arguments, max) },
                  })),
                }
              : {}),
          }
        : { ...m, content: cutText(m.content, max) },
    ),
    toolCalls: conversation.toolCalls.map((c) => ({ ...c, arguments: cutText(c.arguments, max), result: cutText(c.result, max) })),
  };
}

function keepEnds(conversation: Conversation, count: number): Conversation {
  const { messages } = conversation;
  if (messages.length <= count) return conversation;
  const half = Math.floor(count / 2);
  return {
    ...conversation,
    messages: [...messages.slice(0, half), ...messages.slice(messages.length - half)],
    omittedMessages: (conversation.omittedMessages ?? 0) + messages.length - 2 * half,
  };
}

/** How many node paths an error names at most. */
const NAMED_PATHS = 12;

/** The paths of a task's node records, as an error names them (the first {@link NAMED_PATHS}, each once). */
function pathsOf(records: readonly NodeRecord[]): string {
  const paths = [...new Set(records.map((r) => r.path))];
  const more = paths.length > NAMED_PATHS ? `, … (${paths.length} in all)` : "";
  return `its nodes: ${paths.slice(0, NAMED_PATHS).join(", ")}${more}`;
}
