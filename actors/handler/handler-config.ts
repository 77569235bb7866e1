/**
 * The Handler's configuration ({@link HandlerConfig}), fixed for the life of every session it starts, and the system
 * prompt it builds from it (actors/handler/handler.ts).
 */
import type { ModelPrice } from "./tokens.js";

/** Handler configuration, immutable for the life of every session it starts. */
export interface HandlerConfig {
  /** Model used when the template names none. */
  defaultModel: string;
  /** Hard limit on assistant messages per session. */
  maxTurns: number;
  /** The base system prompt; the template's `<system>` is appended to it. */
  baseSystemPrompt: string;
  /** Sessions run at once in this process. */
  concurrency: number;
  /** Context window of models the tokenizer does not know. Default 128000. */
  contextWindowTokens?: number;
  /** Share of the model's context window a session may use. Default 0.8. */
  maxContextWindowFraction?: number;
  /** Share of the context limit at which a `context.warning` event is sent. Default 0.8. */
  warningThreshold?: number;
  /** Malformed tool calls answered with an error before the session fails. Default 3. */
  maxMalformedToolCalls?: number;
  /** Largest completion of one model call, sent to the model as `max_tokens`. Default: none sent. */
  maxOutputTokens?: number;
  /**
   * The tools (names and globs) offered to a session whose task names none (`DIRIGENT_TOOLS`); default: every tool
   * of the toolset. A task's `<tools>` chooses among all of the toolset's tools.
   */
  defaultTools?: readonly string[];
  /** Per-1M-token prices by model id; usage of a listed model gets a `cost`. */
  prices?: Readonly<Record<string, ModelPrice>>;
  /**
   * Stream completions and publish each piece of assistant text as a `model.delta` event. A request's own
   * `stream` field wins. Default false.
   */
  streamDeltas?: boolean;
  /**
   * Secret values the process knows (API key, NATS password, …): masked as `[redacted]` in every reply before it
   * leaves the Handler (results, program outputs), besides the toolset's own masking of tool answers.
   */
  secrets?: readonly string[];
}

/** Joins the base system prompt and the template's system prompt (base first, as the Python original joins them). */
export function buildSystemPrompt(base: string, template: string | undefined): string {
  return template ? `${base}\n\n===\n\n${template}` : base;
}
