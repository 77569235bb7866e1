/**
 * Token accounting of Handler sessions with `gpt-tokenizer`: counts everything sent to the model (messages,
 * tool calls, tool definitions), knows the context window of OpenAI models, and prices usage from a table.
 */
import { countTokens as countText } from "gpt-tokenizer";
import * as models from "gpt-tokenizer/models";
import type { ChatMessage, TokenCount } from "../machines/handler-session.js";
import type { Usage } from "../protocol/index.js";

/** Tokens the chat format adds per message (role markers), as OpenAI documents for its chat models. */
const PER_MESSAGE = 4;
/** Tokens that prime the assistant's reply. */
const REPLY_PRIMER = 3;

/** Per-1M-token prices of one model, in any currency unit. */
export interface ModelPrice {
  /** Price of 1M prompt tokens. */
  input: number;
  /** Price of 1M completion tokens. */
  output: number;
}

interface ModelSpec {
  context_window?: number;
}

const SPECS = new Map<string, ModelSpec | undefined>();

function specOf(model: string): ModelSpec | undefined {
  if (SPECS.has(model)) return SPECS.get(model);
  const found: unknown = Object.hasOwn(models, model) ? Reflect.get(models, model) : undefined;
  const spec = typeof found === "object" && found !== null ? (found as ModelSpec) : undefined;
  if (SPECS.size < 256) SPECS.set(model, spec);
  return spec;
}

/** A token counter that keeps the counts of the last texts it counted, at most `max` (emptied when full). */
function keptCounts(max: number): (text: string) => number {
  const kept = new Map<string, number>();
  return (text) => {
    let count = kept.get(text);
    if (count === undefined) {
      count = countText(text);
      if (kept.size >= max) kept.clear();
      kept.set(text, count);
    }
    return count;
  };
}

/** Texts seen lately: every session of a task sends the same system prompt, and a session counts its earlier messages again every turn. */
const countCached = keptCounts(4096);

/** The context window of a model the tokenizer knows, else `fallback`. */
export function contextWindowOf(model: string, fallback: number): number {
  return specOf(model)?.context_window ?? fallback;
}

/** Counts the tokens of a request: every message, tool call and tool definition. */
export function countRequestTokens(model: string, messages: readonly ChatMessage[], tools: readonly object[]): TokenCount {
  let tokens = REPLY_PRIMER;
  for (const message of messages) {
    tokens += PER_MESSAGE + countCached(message.role);
    if (message.content) tokens += countCached(message.content);
    if (message.role === "assistant") {
      for (const call of message.tool_calls ?? []) tokens += countCached(call.function.name) + countCached(call.function.arguments);
    }
  }
  if (tools.length > 0) tokens += countToolSet(tools);
  return { tokens, exact: specOf(model) !== undefined };
}

/** Token counts by tool-set array: a Handler passes the same array with every turn of its sessions. */
const TOOL_SET_TOKENS = new WeakMap<readonly object[], number>();

function countToolSet(tools: readonly object[]): number {
  let count = TOOL_SET_TOKENS.get(tools);
  if (count === undefined) TOOL_SET_TOKENS.set(tools, (count = countTools(JSON.stringify(tools))));
  return count;
}

/** Tool definitions: the same few sets are sent with every turn of every session. */
const countTools = keptCounts(64);

/** The cost of `usage` with `price`, rounded to 1e-6. */
export function costOf(usage: Usage, price: ModelPrice | undefined): number | undefined {
  if (!price) return undefined;
  const cost = (usage.promptTokens * price.input + usage.completionTokens * price.output) / 1_000_000;
  return Math.round(cost * 1e6) / 1e6;
}
