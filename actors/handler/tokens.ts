/**
 * Token accounting of Handler sessions with `gpt-tokenizer`: counts everything sent to the model (messages,
 * tool calls, tool definitions), and knows the context window of OpenAI models.
 * Each text is counted by `token-count.ts`: exactly, or above a size an upper bound, in linear time.
 */
import * as models from "gpt-tokenizer/models";
import { countTextTokens, EXACT_COUNT_MAX_CHARS, loadTokenizer, type TextCount } from "./token-count.js";
import type { ChatMessage, TokenCount } from "../../machines/handler/session.js";

/** Tokens the chat format adds per message (role markers), as OpenAI documents for its chat models. */
const PER_MESSAGE = 4;
/** Tokens that prime the assistant's reply. */
const REPLY_PRIMER = 3;

interface ModelSpec {
  context_window?: number;
}

function specOf(model: string): ModelSpec | undefined {
  const found: unknown = Object.hasOwn(models, model) ? Reflect.get(models, model) : undefined;
  return typeof found === "object" && found !== null ? (found as ModelSpec) : undefined;
}

/**
 * Longest text kept in a Map: V8 hashes longer strings by their length alone, so a Map of many long texts of one
 * length degrades to comparing them one by one (measured: 2,000 lookups among 17,000-character keys took 26 s).
 */
const MAP_KEY_MAX_CHARS = 16_383;
/** Characters a counter keeps in its Map at most (emptied when over): bounded memory whatever the texts. */
const KEPT_CHARS_MAX = 8_000_000;
/**
 * Characters of longer texts (up to the exact-count limit) a counter keeps, compared one by one (the oldest dropped
 * first): a session's big tool results are counted once, not once a turn.
 */
const LONG_KEPT_CHARS = 4_000_000;

/**
 * A token counter that keeps the counts of the last texts it counted, at most `max` (emptied when full). Texts over
 * the exact-count limit are not kept: their bound (the UTF-8 length) costs no more than a lookup.
 */
function keptCounts(max: number): (text: string) => TextCount {
  const kept = new Map<string, TextCount>();
  let keptChars = 0;
  const long: { text: string; count: TextCount }[] = [];
  let longChars = 0;
  return (text) => {
    if (text.length > EXACT_COUNT_MAX_CHARS) return countTextTokens(text);
    if (text.length > MAP_KEY_MAX_CHARS) {
      const found = long.find((entry) => entry.text === text);
      if (found) return found.count;
      const count = countTextTokens(text);
      long.push({ text, count });
      longChars += text.length;
      while (longChars > LONG_KEPT_CHARS) longChars -= long.shift()?.text.length ?? longChars;
      return count;
    }
    let count = kept.get(text);
    if (count === undefined) {
      count = countTextTokens(text);
      if (kept.size >= max || keptChars + text.length > KEPT_CHARS_MAX) {
        kept.clear();
        keptChars = 0;
      }
      kept.set(text, count);
      keptChars += text.length;
    }
    return count;
  };
}

/** The context window of a model the tokenizer knows. */
export function contextWindowOf(model: string): number | undefined {
  return specOf(model)?.context_window;
}

/** Counts the tokens of a request: every message, tool call and tool definition. */
export type CountRequestTokens = (model: string, messages: readonly ChatMessage[], tools: readonly object[]) => TokenCount;

/** A {@link CountRequestTokens} that keeps the counts of the texts and tool sets it saw lately: one per Handler. */
export function tokenCounter(): CountRequestTokens {
  // The encoder's tables load as the Handler starts, not in its first session.
  loadTokenizer();
  /** Texts seen lately: every session of a task sends the same system prompt, and a session counts its earlier messages again every turn. */
  const countCached = keptCounts(4096);
  /** Tool definitions: the same few sets are sent with every turn of every session. */
  const countTools = keptCounts(64);
  /** Token counts by tool-set array: a Handler passes the same array with every turn of its sessions. */
  const toolSetTokens = new WeakMap<readonly object[], TextCount>();
  const countToolSet = (tools: readonly object[]): TextCount => {
    let count = toolSetTokens.get(tools);
    if (count === undefined) toolSetTokens.set(tools, (count = countTools(JSON.stringify(tools))));
    return count;
  };
  return (model, messages, tools) => countRequest(countCached, countToolSet, model, messages, tools);
}

function countRequest(
  countCached: (text: string) => TextCount,
  countToolSet: (tools: readonly object[]) => TextCount,
  model: string,
  messages: readonly ChatMessage[],
  tools: readonly object[],
): TokenCount {
  let tokens = REPLY_PRIMER;
  let exact = specOf(model) !== undefined;
  const add = (count: TextCount) => {
    tokens += count.tokens;
    exact &&= count.exact;
  };
  for (const message of messages) {
    tokens += PER_MESSAGE;
    add(countCached(message.role));
    if (message.content) add(countCached(message.content));
    if (message.role === "assistant") {
      for (const call of message.tool_calls ?? []) {
        add(countCached(call.function.name));
        add(countCached(call.function.arguments));
      }
    }
  }
  if (tools.length > 0) add(countToolSet(tools));
  return { tokens, exact };
}
