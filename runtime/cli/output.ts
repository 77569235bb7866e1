/** How the CLI shows events, results and node records to people. */
import {
  BranchFinishedEventData,
  BranchStartedEventData,
  branchMapPath,
  MapStartedEventData,
  type Conversation,
  type NodeDetailReply,
  type NodeListReply,
  type NodeSummary,
  type TaskEvent,
  type TaskOutcome,
  type Usage,
} from "../../protocol/index.js";

/** One line per event: `[seq] state  type  message`; a map's progress as {@link mapProgressText} words it. */
export function formatEvent(event: TaskEvent): string {
  const text = mapProgressText(event) ?? event.message;
  const message = text ? `  ${text}` : "";
  // A prompt's compiled template is shown once, so the user sees what runs.
  const xml = event.type === "task.compiled" && typeof event.data?.["xml"] === "string" ? `\n${event.data["xml"]}` : "";
  return `[${String(event.seq).padStart(3)}] ${event.state.padEnd(19)} ${event.type}${message}${xml}`;
}

/**
 * The result block printed after the events. An answer already printed as it streamed (`streamed`, the text of the
 * last run of `model.delta` events) is not printed again.
 */
export function formatOutcome(outcome: TaskOutcome, options: { streamed?: string | undefined } = {}): string {
  const lines = [`result: ${outcome.status}`];
  if (outcome.error) {
    const e = outcome.error;
    const reason = e.type === "TASK_FAILURE" ? ` (${e.reason})` : e.type === "RESOURCE_EXHAUSTION" ? ` (${e.resource})` : "";
    lines.push(`error: ${e.type}${reason}: ${e.message}`);
  }
  const usage = outcome.notes["usage"];
  if (usage && typeof usage === "object") lines.push(`usage: ${JSON.stringify(usage)}`);
  const task = outcome.notes["task_usage"];
  const cost = outcome.notes["task_cost"];
  if (task && typeof task === "object")
    lines.push(`task usage: ${JSON.stringify(task)}${typeof cost === "number" ? `, cost ${cost}` : ""}`);
  const streamed = options.streamed !== undefined && options.streamed.trim() === outcome.content.trim();
  if (outcome.content && streamed) lines.push("(the answer is the one streamed above)");
  else if (outcome.content) lines.push("", outcome.content);
  return lines.join("\n");
}

/** What {@link createEventPrinter} returns. */
export interface EventPrinter {
  /** Prints one event. */
  event(event: TaskEvent): void;
  /** Closes an open line of streamed text. */
  end(): void;
  /** The text of the last run of `model.delta` events (the streamed answer), if any. */
  streamed(): string | undefined;
}

/**
 * Prints events as they arrive. A run of `model.delta` events is shown as one: a line for its first event
 * (`[  4] running  model.delta  streaming the answer:`), then their text as it arrives, so the numbers of the events
 * that follow (`[ 15]`) skip the pieces; a newline closes it before the next other event.
 */
export function createEventPrinter(write: (text: string) => void): EventPrinter {
  let inline = false;
  let last: string | undefined;
  const end = () => {
    if (inline) write("\n");
    inline = false;
  };
  return {
    event(event) {
      const text = event.data?.["text"];
      if (event.type === "model.delta" && typeof text === "string") {
        if (!inline) {
          write(formatEvent({ ...event, message: "streaming the answer:" }) + "\n");
          last = "";
        }
        write(text);
        last += text;
        inline = true;
        return;
      }
      end();
      write(formatEvent(event) + "\n");
    },
    end,
    streamed: () => last,
  };
}

/** The task's root node: a map there is named `map`, any other `map <path>:`. */
const ROOT_PATH = "0";

/** A node path as printed: without control characters (it comes from an event). */
const printable = (path: string) => path.replace(/[\u0000-\u001f\u007f-\u009f]/g, "?");

/**
 * How the progress of a `map` node reads, or undefined for another event (or one whose data is malformed: it is then
 * printed as sent). `branch.finished` says how far the map is, `map 5/8 done`, and names a branch that did not
 * complete, `map 5/8 done (branch 3 FAILED)`. A map that is not the task's root node is named by its path, so
 * nested maps whose branches interleave stay apart: `map 0.steps.1: 5/8 done`; a branch's map is the one its
 * (scoped) node path names, so the maps at the step of a map over a list read `map 0/map:1:0.steps.0: 1/2 done`.
 */
export function mapProgressText(event: TaskEvent): string | undefined {
  const named = (path: string) => (path === ROOT_PATH ? "map" : `map ${printable(path)}`);
  if (event.type === "map.started") {
    const data = MapStartedEventData.safeParse(event.data);
    if (!data.success) return undefined;
    const { nodePath, total, maxParallel, onFailure } = data.data;
    const failures = onFailure === "collect" ? ", failures collected" : "";
    return `${named(nodePath)} started: ${total} branch${total === 1 ? "" : "es"}, ${Math.min(maxParallel, total)} at once${failures}`;
  }
  if (event.type === "branch.started") {
    const data = BranchStartedEventData.safeParse(event.data);
    if (!data.success) return undefined;
    const { branch, total } = data.data;
    const mapPath = branchMapPath(data.data);
    return mapPath === ROOT_PATH ? `branch ${branch}/${total}` : `${named(mapPath)}: branch ${branch}/${total}`;
  }
  if (event.type === "branch.finished") {
    const data = BranchFinishedEventData.safeParse(event.data);
    if (!data.success) return undefined;
    const { branch, total, status, finished } = data.data;
    const mapPath = branchMapPath(data.data);
    const failed = status === "COMPLETE" ? "" : ` (branch ${branch} ${status})`;
    return `${named(mapPath)}${mapPath === ROOT_PATH ? "" : ":"} ${finished}/${total} done${failed}`;
  }
  return undefined;
}

const tokens = (usage: Usage | undefined) => (usage ? usage.promptTokens + usage.completionTokens : 0);
const seconds = (ms: number) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`);
const money = (cost: number | undefined) => (cost === undefined ? "" : ` $${cost.toFixed(4)}`);

/** The parent of each listed node: the longest other listed path its own path starts with. */
function depthOf(nodes: readonly NodeSummary[]): Map<NodeSummary, number> {
  const paths = new Set(nodes.map((n) => n.path));
  const depth = new Map<NodeSummary, number>();
  for (const node of nodes) {
    let d = 0;
    for (const other of paths) if (other !== node.path && /^[./]/.test(node.path.slice(other.length)) && node.path.startsWith(other)) d++;
    depth.set(node, d);
  }
  return depth;
}

/** What `nodes` used, tokens and cost (none when no node was priced). */
function spent(nodes: readonly NodeSummary[]): { tokens: number; cost: number | undefined } {
  return {
    tokens: nodes.reduce((sum, n) => sum + tokens(n.usage), 0),
    cost: nodes.reduce<number | undefined>((sum, n) => (n.cost === undefined ? sum : (sum ?? 0) + n.cost), undefined),
  };
}

/**
 * The node tree as text, one line per node, children indented under their parent. In a fork, a node answered from
 * another task's record ran nothing: its tokens and cost, that task's, are marked so and left out of the total.
 */
export function formatTree(reply: NodeListReply): string {
  const depth = depthOf(reply.nodes);
  const lines = reply.nodes.map((n) => {
    const indent = "  ".repeat(depth.get(n) ?? 0);
    const again = n.occurrence > 1 ? ` #${n.occurrence}` : "";
    const used = n.usage ? `  ${tokens(n.usage)} tokens${money(n.cost)}` : "";
    const error = n.error ? `  (${n.error})` : "";
    const state = n.replayedFrom === undefined ? `${n.state} in ${seconds(n.durationMs)}` : `${n.state}, replayed from ${n.replayedFrom}`;
    const paid = n.replayedFrom !== undefined && n.usage ? " (paid there)" : "";
    return `${indent}${n.path}${again}  ${n.name}  [${n.kind}] ${state}${used}${paid}${error}`;
  });
  const replayed = reply.nodes.filter((n) => n.replayedFrom !== undefined);
  const live = spent(reply.nodes.filter((n) => n.replayedFrom === undefined));
  const before = spent(replayed);
  const fork =
    replayed.length === 0
      ? ""
      : ` (${replayed.length} replayed${before.tokens > 0 ? `, ${before.tokens} tokens${money(before.cost)} paid by the task they came from, not counted` : ""})`;
  const tail = reply.truncated ? "\n(more nodes than one answer holds: the first are listed)" : "";
  return `task ${reply.taskId}: ${counted(reply.nodes.length, "node")}, ${live.tokens} tokens${money(live.cost)}${fork}\n${lines.join("\n")}${tail}\n`;
}

/** `count` and `noun`, plural unless one: "1 node", "3 nodes", "0 tool calls". */
export const counted = (count: number, noun: string): string => `${count} ${noun}${count === 1 ? "" : "s"}`;

/** JSON text pretty-printed; any other text as it is. */
function pretty(text: string): string {
  const trimmed = text.trim();
  if (!trimmed.startsWith("{") && !trimmed.startsWith("[")) return text;
  try {
    return JSON.stringify(JSON.parse(trimmed), null, 2);
  } catch {
    return text;
  }
}

const indented = (text: string) =>
  text
    .split("\n")
    .map((line) => `    ${line}`)
    .join("\n");

function formatConversation(conversation: Conversation, index: number): string[] {
  const out = [
    `conversation ${index + 1}: ${counted(conversation.turns.length, "model call")}, ${counted(conversation.toolCalls.length, "tool call")}`,
  ];
  const calls = new Map(conversation.toolCalls.map((c) => [c.id, c]));
  const turnAt = new Map(conversation.turns.map((t) => [t.sent, t]));
  conversation.messages.forEach((m, i) => {
    if (m.role === "assistant") {
      const turn = turnAt.get(i);
      const about = turn ? ` (turn ${turn.turn}, ${turn.model}, ${tokens(turn.usage)} tokens, ${seconds(turn.durationMs)})` : "";
      out.push(`  [assistant]${about}`);
      if (m.content) out.push(indented(m.content));
      for (const call of m.tool_calls ?? [])
        out.push(`    → ${call.function.name}\n${indented(indented(pretty(call.function.arguments)))}`);
    } else if (m.role === "tool") {
      const call = calls.get(m.tool_call_id);
      const about = call ? ` ${call.tool}${call.source ? ` (${call.source})` : ""} in ${seconds(call.durationMs)}` : "";
      out.push(`  [tool]${about}`, indented(pretty(m.content)));
    } else {
      out.push(`  [${m.role}]`, indented(m.content));
    }
  });
  if (conversation.omittedMessages) out.push(`  (${conversation.omittedMessages} messages left out in the middle)`);
  return out;
}

/** One node's record and conversations as text. */
export function formatNode(reply: NodeDetailReply): string {
  const n = reply.node;
  const out = [
    `${n.path}  ${n.name}  [${n.kind}] ${n.state}`,
    `started ${n.startedAt}, took ${seconds(n.durationMs)}`,
    ...(n.usage ? [`usage: ${n.usage.promptTokens} prompt + ${n.usage.completionTokens} completion tokens${money(n.cost)}`] : []),
    ...(n.models ? [`models: ${n.models.join(", ")}`] : []),
    ...(reply.retries > 0 ? [`retries: ${reply.retries}`] : []),
    ...(n.inputs ? ["inputs:", indented(JSON.stringify(n.inputs, null, 2))] : []),
    ...reply.conversations.flatMap(formatConversation),
    `output (${n.output.status}):`,
    indented(pretty(n.output.content)),
    ...(n.error ? ["error:", indented(JSON.stringify(n.error, null, 2))] : []),
    ...(reply.truncated ? ["(cut to fit one message: texts shortened)"] : []),
  ];
  return `${out.join("\n")}\n`;
}
