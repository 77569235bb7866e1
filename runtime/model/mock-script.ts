/**
 * The script format of the scripted mock model server (`dirigent mock-llm`), and the pure
 * logic that picks an answer for a chat request. No I/O happens here except in {@link loadMockScript}.
 */
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { validate } from "../../protocol/codec.js";
import type { DecodeIssue } from "../../protocol/errors.js";
import { messageOf } from "../../protocol/errors.js";

/** A substring to look for, or a regular expression (`{"regex": "^plan", "flags": "i"}`). */
export const TextMatch = z.union(
  [
    z.string(),
    z
      .strictObject({ regex: z.string(), flags: z.string().optional() })
      .refine((m) => compiles(m.regex, m.flags), { message: "invalid regular expression", path: ["regex"] }),
  ],
  { error: 'expected a string or {"regex": "..."}' },
);
export type TextMatch = z.infer<typeof TextMatch>;

/** The conditions of a rule; every condition given must hold. */
export const RuleMatch = z.strictObject({
  /** The text of the last user message. */
  lastUser: TextMatch.optional(),
  /** The text of any message, of any role. */
  anyMessage: TextMatch.optional(),
  /** The text of any system (or developer) message. */
  system: TextMatch.optional(),
  /** The requested model id, exactly. */
  model: z.string().optional(),
  /** `true`: the last message is a tool result; text: a tool result containing it; `false`: not a tool result. */
  hasToolResult: z.union([z.boolean(), TextMatch], { error: 'expected a boolean, a string or {"regex": "..."}' }).optional(),
  /** The number of assistant messages so far, plus one. */
  turn: z.int().positive().optional(),
});
export type RuleMatch = z.infer<typeof RuleMatch>;

/** A tool call the mock model makes. */
export const ToolCallSpec = z.strictObject({
  /** The function name. */
  name: z.string().min(1),
  /** The arguments: an object (sent as JSON) or a raw string sent verbatim, even if it is not JSON. */
  arguments: z.union([z.record(z.string(), z.unknown()), z.string()], { error: "expected an object or a string" }),
  /** The tool-call id; generated (`call_mock_<n>`) when absent. */
  id: z.string().min(1).optional(),
});
export type ToolCallSpec = z.infer<typeof ToolCallSpec>;

/** An HTTP header name (an RFC 9110 token). */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

const replyFields = {
  /** The assistant text; `{{lastUser}}` is replaced by the last user message, `{{lastTool}}` by the last tool result. */
  reply: z.string().optional(),
  /**
   * The assistant text as the pieces it is streamed in (`stream: true`), exactly, instead of a word at a time: the
   * text is their concatenation, as is the answer of a request that does not stream. Not together with `reply`.
   */
  chunks: z.array(z.string().min(1)).min(1).optional(),
  /** Tool calls the assistant makes. */
  toolCalls: z.array(ToolCallSpec).optional(),
  /** Token counts to report; a missing count is estimated from the text (characters / 4). */
  usage: z
    .strictObject({ prompt_tokens: z.int().nonnegative().optional(), completion_tokens: z.int().nonnegative().optional() })
    .optional(),
  /** Milliseconds to wait before answering; a client that disconnects meanwhile gets nothing. */
  delayMs: z.int().nonnegative().optional(),
  /**
   * Hold the answer until `count` requests have reached the gate `name` (from any rule naming it), then answer them
   * all; later requests at an open gate pass at once. Proves requests run at the same time, without timing.
   */
  gate: z.strictObject({ name: z.string().min(1).max(200), count: z.int().min(1).max(1000) }).optional(),
  /**
   * In a streamed answer, send the first `after` pieces of text, then hold the rest until the gate `name` is opened
   * (`openGate`, `POST /gates/<name>/open`): a test sees an answer streaming, mid-way, without timing.
   */
  streamGate: z.strictObject({ name: z.string().min(1).max(200), after: z.int().min(1) }).optional(),
  /** Answer with this HTTP error status and an OpenAI-style error body instead of a completion. */
  status: z.int().min(400).max(599).optional(),
  /** The error message; with no `status` it means status 500. */
  error: z.string().optional(),
  /** The finish reason; defaults to `tool_calls` when there are tool calls, else `stop`. */
  finishReason: z.enum(["stop", "length", "tool_calls", "content_filter", "function_call"]).optional(),
  /** The assistant's refusal (the message's `refusal` field); the content is then null unless `reply` is given. */
  refusal: z.string().min(1).optional(),
  /**
   * Extra response headers, e.g. `{"retry-after": "2"}` on a 429. Giving `retry-after` or `retry-after-ms` replaces
   * both of the `0` ones every 429 carries otherwise.
   */
  headers: z
    .record(z.string(), z.string().regex(/^[^\r\n]*$/, "must not contain a line break"))
    .superRefine((headers, ctx) => {
      for (const name of Object.keys(headers)) {
        if (!HEADER_NAME.test(name)) ctx.addIssue({ code: "custom", path: [name], message: "must be an HTTP header name" });
      }
    })
    .optional(),
};

/** `reply` and `chunks` both give the text: one of them at most. */
const oneText = (r: { reply?: string | undefined; chunks?: string[] | undefined }) => r.reply === undefined || r.chunks === undefined;
const ONE_TEXT = { message: "give 'reply' or 'chunks', not both", path: ["chunks"] };

/** What to answer, without conditions: the `default` of a script. */
export const MockReply = z.strictObject(replyFields).refine(oneText, ONE_TEXT);
export type MockReply = z.infer<typeof MockReply>;

/** One scripted rule: conditions and what to answer when they hold. */
export const MockRule = z
  .strictObject({
    ...replyFields,
    /** Conditions; a rule without them matches every request. */
    match: RuleMatch.optional(),
    /** Apply the rule this many times, then skip it (e.g. three 429s, then a later rule answers). */
    times: z.int().positive().optional(),
  })
  .refine(oneText, ONE_TEXT);
export type MockRule = z.infer<typeof MockRule>;

/**
 * A mock model script. The first rule that matches (and is not used up) answers; else `default`;
 * else an echo of the last user message (`mock: <first 200 chars>`).
 * @example {"rules": [{"match": {"lastUser": "haiku"}, "reply": "old pond..."}], "default": {"reply": "you said {{lastUser}}"}}
 */
export const MockScript = z.strictObject({
  rules: z.array(MockRule),
  default: MockReply.optional(),
});
export type MockScript = z.infer<typeof MockScript>;

/** One message of a chat request, as far as the mock model looks at it. */
export const ChatMessage = z.looseObject({
  role: z.string(),
  content: z.union([z.string(), z.array(z.unknown()), z.null()]).optional(),
});
export type ChatMessage = z.infer<typeof ChatMessage>;

/** The body of `POST /v1/chat/completions`; fields the mock ignores are kept as sent. */
export const ChatRequestBody = z.looseObject({
  model: z.string().min(1),
  messages: z.array(ChatMessage).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  /** Largest completion: a longer planned answer is cut to it, with `finish_reason: "length"`. */
  max_tokens: z.number().nullish(),
  /** The same, by its newer name; wins over `max_tokens`. */
  max_completion_tokens: z.number().nullish(),
});
export type ChatRequestBody = z.infer<typeof ChatRequestBody>;

/** A script file that cannot be read, is not JSON or does not match {@link MockScript}. */
export class MockScriptError extends Error {
  override name = "MockScriptError";
  constructor(
    message: string,
    /** The script file as given. */
    readonly file: string,
    /** Each schema problem, located by a JSON pointer (empty when the file is unreadable or not JSON). */
    readonly issues: DecodeIssue[],
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * Reads and validates a script file.
 * @throws {MockScriptError} naming the file and the JSON pointer of each problem,
 *   e.g. `script.json: /rules/0/delayMs: expected number, received string`.
 */
export async function loadMockScript(path: string): Promise<MockScript> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (cause) {
    throw new MockScriptError(`${path}: cannot read script: ${reasonOf(cause)}`, path, [], { cause });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw new MockScriptError(`${path}: not JSON: ${reasonOf(cause)}`, path, [], { cause });
  }
  return parseMockScript(value, path);
}

/** Validates an already-parsed script; `source` names it in errors. @throws {MockScriptError} */
export function parseMockScript(value: unknown, source = "script"): MockScript {
  const result = validate(MockScript, value);
  if (result.ok) return result.value;
  const issues = result.error.issues.map((i) => ({ path: i.path || "/", message: tidy(i.message) }));
  const lines = issues.map((i) => `${source}: ${i.path}: ${i.message}`);
  throw new MockScriptError(lines.join("\n"), source, issues, { cause: result.error });
}

/** Who answered a request: a rule's index, the script's default, or the built-in echo. */
export type AnsweredBy = number | "default" | "echo";

/** A tool call ready to send, its arguments already a string. @internal */
export interface PlannedToolCall {
  id: string | undefined;
  name: string;
  arguments: string;
}

/** A gate an answer waits at (`gate` of a rule). */
export type MockGate = NonNullable<MockReply["gate"]>;

/** The answer chosen for one request. @internal */
export type MockAnswer =
  | {
      kind: "error";
      answeredBy: AnsweredBy;
      delayMs: number;
      gate?: MockGate;
      status: number;
      message: string;
      headers: Record<string, string>;
    }
  | {
      kind: "completion";
      answeredBy: AnsweredBy;
      delayMs: number;
      gate?: MockGate;
      headers: Record<string, string>;
      content: string | null;
      /** The pieces `content` is streamed in (`chunks` of the rule); absent: a word at a time. */
      chunks?: string[];
      /** Hold the stream after this many pieces until the gate opens (`streamGate` of the rule). */
      streamGate?: NonNullable<MockReply["streamGate"]>;
      refusal: string | null;
      toolCalls: PlannedToolCall[];
      finishReason: NonNullable<MockReply["finishReason"]>;
      usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
    };

/**
 * Picks the answer for `request`. `uses` counts how often each rule has answered so far;
 * it is updated for the rule chosen, so `times` limits hold across requests.
 * @internal
 */
export function answerFor(script: MockScript | undefined, request: ChatRequestBody, uses: Map<number, number>): MockAnswer {
  const facts = factsOf(request);
  const rules = script?.rules ?? [];
  for (const [index, rule] of rules.entries()) {
    const used = uses.get(index) ?? 0;
    if (rule.times !== undefined && used >= rule.times) continue;
    if (rule.match !== undefined && !matches(rule.match, facts)) continue;
    uses.set(index, used + 1);
    return plan(rule, index, facts);
  }
  if (script?.default !== undefined) return plan(script.default, "default", facts);
  return plan({}, "echo", facts);
}

/** Every model id a script names in its rules. @internal */
export function modelsOf(script: MockScript | undefined): string[] {
  return (script?.rules ?? []).flatMap((r) => (r.match?.model === undefined ? [] : [r.match.model]));
}

interface Facts {
  model: string;
  lastUser: string;
  texts: string[];
  systems: string[];
  lastToolResult: string | undefined;
  turn: number;
  promptChars: number;
  maxTokens: number | undefined;
}

function factsOf(request: ChatRequestBody): Facts {
  const { messages } = request;
  const texts = messages.map((m) => textOf(m.content));
  const lastUserIndex = messages.findLastIndex((m) => m.role === "user");
  const last = messages.at(-1);
  return {
    model: request.model,
    lastUser: texts[lastUserIndex] ?? "",
    texts,
    systems: messages.flatMap((m, i) => (m.role === "system" || m.role === "developer" ? [texts[i] ?? ""] : [])),
    lastToolResult: last?.role === "tool" ? textOf(last.content) : undefined,
    turn: messages.filter((m) => m.role === "assistant").length + 1,
    promptChars: texts.reduce((n, t) => n + t.length, 0),
    maxTokens: request.max_completion_tokens ?? request.max_tokens ?? undefined,
  };
}

function matches(match: RuleMatch, facts: Facts): boolean {
  if (match.model !== undefined && match.model !== facts.model) return false;
  if (match.turn !== undefined && match.turn !== facts.turn) return false;
  const { lastUser, anyMessage, system, hasToolResult: tool } = match;
  if (lastUser !== undefined && !hit(lastUser, facts.lastUser)) return false;
  if (anyMessage !== undefined && !facts.texts.some((t) => hit(anyMessage, t))) return false;
  if (system !== undefined && !facts.systems.some((t) => hit(system, t))) return false;
  if (tool === true && facts.lastToolResult === undefined) return false;
  if (tool === false && facts.lastToolResult !== undefined) return false;
  if (typeof tool !== "boolean" && tool !== undefined) {
    if (facts.lastToolResult === undefined || !hit(tool, facts.lastToolResult)) return false;
  }
  return true;
}

function hit(pattern: TextMatch, text: string): boolean {
  return typeof pattern === "string" ? text.includes(pattern) : new RegExp(pattern.regex, pattern.flags).test(text);
}

function plan(reply: MockReply, answeredBy: AnsweredBy, facts: Facts): MockAnswer {
  const delayMs = reply.delayMs ?? 0;
  const gated = reply.gate ? { gate: reply.gate } : {};
  const headers = Object.fromEntries(Object.entries(reply.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
  if (reply.status !== undefined || reply.error !== undefined) {
    const status = reply.status ?? 500;
    return { kind: "error", answeredBy, delayMs, ...gated, headers, status, message: reply.error ?? `mock error with status ${status}` };
  }
  const toolCalls = (reply.toolCalls ?? []).map((c) => ({
    id: c.id,
    name: c.name,
    arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments),
  }));
  // A rule that only sets usage, delay or finish reason still needs some text to send.
  const text =
    reply.reply ??
    reply.chunks?.join("") ??
    (toolCalls.length > 0 || reply.refusal !== undefined ? null : `mock: ${facts.lastUser.slice(0, 200)}`);
  const refusal = reply.refusal ?? null;
  // A function replacer, so `$&` and friends in the user's text are not interpreted.
  const content =
    text === null
      ? null
      : text.replaceAll("{{lastUser}}", () => facts.lastUser).replaceAll("{{lastTool}}", () => facts.lastToolResult ?? "");
  const completionChars =
    (content?.length ?? 0) + (refusal?.length ?? 0) + toolCalls.reduce((n, c) => n + c.name.length + c.arguments.length, 0);
  const prompt = reply.usage?.prompt_tokens ?? estimateTokens(facts.promptChars);
  const completion = reply.usage?.completion_tokens ?? estimateTokens(completionChars);
  const cap = facts.maxTokens;
  if (cap !== undefined && completion > cap) {
    // Cut where a real server stops: the text at about 4 characters a token, no (half-written) tool calls.
    const cut = Math.max(0, Math.floor(cap));
    return {
      kind: "completion",
      answeredBy,
      delayMs,
      ...gated,
      headers,
      content: (content ?? "").slice(0, cut * 4),
      refusal: refusal?.slice(0, cut * 4) ?? null,
      toolCalls: [],
      finishReason: "length",
      usage: { prompt_tokens: prompt, completion_tokens: cut, total_tokens: prompt + cut },
    };
  }
  return {
    kind: "completion",
    answeredBy,
    delayMs,
    ...gated,
    headers,
    content,
    ...(reply.chunks ? { chunks: reply.chunks } : {}),
    ...(reply.streamGate ? { streamGate: reply.streamGate } : {}),
    refusal,
    toolCalls,
    finishReason: reply.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
  };
}

function estimateTokens(chars: number): number {
  return Math.max(1, Math.ceil(chars / 4));
}

function textOf(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => {
      const parsed = TextPart.safeParse(part);
      return parsed.success ? parsed.data.text : "";
    })
    .join("");
}

const TextPart = z.object({ type: z.literal("text"), text: z.string() });

function compiles(regex: string, flags: string | undefined): boolean {
  try {
    new RegExp(regex, flags);
    return true;
  } catch {
    return false;
  }
}

function tidy(message: string): string {
  const bare = message.replace(/^Invalid input: /, "");
  return bare.charAt(0).toLowerCase() + bare.slice(1);
}

function reasonOf(cause: unknown): string {
  return messageOf(cause);
}
