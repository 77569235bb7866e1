// One node of a task as its record tells it (/api/tasks/<id>/node, docs/protocol.md "Node records"): what it is and
// what it cost, its inputs, its conversations message by message (roles, text, JSON pretty-printed, the tool calls
// with their arguments, results and durations, each model call's tokens), its output, notes, error and retries.
// Every text is set as text, never parsed as HTML: it is what a model or a tool wrote.
import { el } from "./dom.js";
import { cost, duration, tokens } from "./nodes.js";

/** A text shown as written; JSON (an object or array) pretty-printed. */
export function textBlock(text, cls = "text") {
  let shown = text ?? "";
  const trimmed = shown.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      shown = JSON.stringify(JSON.parse(trimmed), null, 2);
      cls += " json";
    } catch {
      // Not JSON after all: shown as written.
    }
  }
  return el("pre", { class: cls }, shown);
}

/** A value of a record (inputs, notes, parsed content) as pretty JSON. */
const valueBlock = (value) => el("pre", { class: "text json" }, typeof value === "string" ? value : JSON.stringify(value, null, 2));

function facts(pairs) {
  const list = el("dl", { class: "facts" });
  for (const [k, v] of pairs) if (v !== undefined && v !== "") list.append(el("dt", {}, k), el("dd", {}, String(v)));
  return list;
}

function toolCallBlock(call, trace) {
  const head = `${call.function.name}${trace ? ` · ${trace.source ?? "?"} · ${duration(trace.durationMs)}${trace.malformed ? " · malformed" : ""}${trace.replayed ? " · replayed" : ""}${trace.unknownOutcome ? " · unknown outcome" : ""}` : ""}`;
  return el(
    "div",
    { class: "tool-call", "data-tool": call.function.name },
    el("div", { class: "head" }, `tool call ${head}`),
    el("div", { class: "label" }, "arguments"),
    textBlock(call.function.arguments, "text args"),
  );
}

/** One conversation: its messages in order, the turns' usage under the assistant messages, tools by their call id. */
export function conversationView(conversation, index) {
  const traces = new Map(conversation.toolCalls.map((t) => [t.id, t]));
  // The answer of turn k is message number `sent` of that turn.
  const turnAt = new Map(conversation.turns.map((t) => [t.sent, t]));
  const box = el("div", { class: "conversation", "data-session": String(index + 1) });
  conversation.messages.forEach((m, i) => {
    const turn = turnAt.get(i);
    const head = el("div", { class: "head" }, el("span", { class: "role" }, m.role));
    if (turn)
      head.append(
        ` · turn ${turn.turn} · ${turn.model} · ${tokens(turn.usage)} tokens (${turn.usage.promptTokens} in, ${turn.usage.completionTokens} out)${turn.cost !== undefined ? ` · ${cost(turn.cost)}` : ""} · ${duration(turn.durationMs)} · ${turn.finishReason}${turn.retries ? ` · ${turn.retries} retries` : ""}`,
      );
    const trace = m.role === "tool" ? traces.get(m.tool_call_id) : undefined;
    if (m.role === "tool") head.append(` · ${trace ? `${trace.tool} · ${duration(trace.durationMs)}` : m.tool_call_id}`);
    const message = el("div", { class: "message", "data-role": m.role }, head);
    if (m.content !== null && m.content !== undefined && (m.content !== "" || m.role !== "assistant")) message.append(textBlock(m.content));
    for (const call of m.tool_calls ?? []) message.append(toolCallBlock(call, traces.get(call.id)));
    box.append(message);
    if (conversation.omittedMessages && i === Math.floor(conversation.messages.length / 2) - 1)
      box.append(el("p", { class: "hint" }, `… ${conversation.omittedMessages} messages left out …`));
  });
  return box;
}

/** The whole detail of one node. */
export function nodeDetail(reply) {
  const n = reply.node;
  const box = el("div", { class: "node-detail", "data-path": n.path, "data-occurrence": String(n.occurrence) });
  box.append(el("h3", { class: "node-name" }, n.name));
  box.append(
    facts([
      ["path", n.path],
      ["evaluation", n.occurrence > 1 ? n.occurrence : undefined],
      ["kind", n.kind],
      ["state", n.state],
      ["started", n.startedAt],
      ["duration", duration(n.durationMs)],
      ["tokens", n.usage ? `${tokens(n.usage)} (${n.usage.promptTokens} in, ${n.usage.completionTokens} out)` : undefined],
      ["cost", cost(n.cost)],
      ["models", n.models?.join(", ")],
      ["replayed from", n.replayedFrom],
      ["retries", reply.retries || undefined],
    ]),
  );
  if (n.error)
    box.append(
      el("h4", {}, "error"),
      el("div", { class: "error" }, `${n.error.type}${n.error.reason ? ` (${n.error.reason})` : ""}: ${n.error.message}`),
    );
  if (n.inputs && Object.keys(n.inputs).length > 0) box.append(el("h4", {}, "inputs"), valueBlock(n.inputs));
  reply.conversations.forEach((c, i) => {
    box.append(
      el("h4", {}, reply.conversations.length > 1 ? `conversation ${i + 1} of ${reply.conversations.length}` : "conversation"),
      conversationView(c, i),
    );
  });
  const out = n.output;
  box.append(el("h4", {}, `output · ${out.status}`), textBlock(out.content, "text output"));
  if (out.contentTruncated) box.append(el("p", { class: "hint" }, "cut to the record's 16 KiB"));
  if (out.parsedContent !== undefined) box.append(el("h4", {}, "parsed content"), valueBlock(out.parsedContent));
  if (out.notes && Object.keys(out.notes).length > 0) box.append(el("h4", {}, "notes"), valueBlock(out.notes));
  if (reply.truncated)
    box.append(el("p", { class: "hint" }, "this answer was cut to fit one message: texts shortened, middle messages left out"));
  return box;
}
