/**
 * What the actors need of the model: one chat completion call ({@link CallModel}) with its request, hooks and
 * failure. The runtime provides the implementation (runtime/model/openai.ts, over the `openai` SDK).
 */
import type { ChatMessage, ModelReply } from "../machines/handler/session.js";
import type { ToolDefinition } from "./handler/toolset.js";

/** One retry about to happen. */
export interface RetryInfo {
  /** The attempt that failed, from 1. */
  attempt: number;
  /** Retries allowed in total. */
  maxRetries: number;
  /** The wait before the next attempt. */
  delayMs: number;
  /** The wait is the server's (`retry-after-ms` or `retry-after`), not a backoff. */
  fromRetryAfter: boolean;
  /** HTTP status of the failure, when there was a response. */
  status?: number;
  /** What went wrong. */
  message: string;
}

/** One chat completion request. */
export interface ModelRequest {
  model: string;
  messages: ChatMessage[];
  /** Tools offered to the model. */
  tools?: readonly ToolDefinition[];
  /** Largest completion, sent as `max_tokens`; the server's own limit otherwise. */
  maxTokens?: number;
  /** Sampling temperature (0–2), sent as `temperature`; the server's default otherwise. */
  temperature?: number;
  /** The OpenAI-compatible server to ask, by name (`<provider>`, `DIRIGENT_PROVIDERS`); the default one otherwise. */
  provider?: string;
}

/** Observers of one model call. */
export interface CallHooks {
  /** Hears about each retry before its wait. */
  onRetry?: (info: RetryInfo) => void;
  /** When given, the completion is streamed and each piece of assistant text is passed here as it arrives. */
  onDelta?: (text: string) => void;
}

/** Calls one chat completion, with retries. */
export type CallModel = (request: ModelRequest, signal: AbortSignal, hooks?: CallHooks) => Promise<ModelReply>;

/**
 * The model failed for good: a non-retryable error, or retries used up. Its message may quote what the server
 * answered, which may quote the request (the prompt, an `Authorization` header): spans record `contentFree` instead.
 */
export class ModelCallError extends Error {
  override name = "ModelCallError";
  /** What may be said of the failure without its content: the HTTP status and the attempts (see actors/tracing.ts). */
  readonly contentFree: string;
  constructor(
    message: string,
    /** Attempts made. */
    readonly attempts: number,
    /** HTTP status of the last failure, if any. */
    readonly status: number | undefined,
    options?: ErrorOptions & { contentFree?: string },
  ) {
    super(message, options);
    this.contentFree =
      options?.contentFree ??
      `model request failed${status === undefined ? "" : `: HTTP ${status}`} after ${attempts} attempt${attempts === 1 ? "" : "s"}`;
  }
}

/**
 * Why a reply is no answer: the server's content filter blocked it, or the model refused. `undefined` for an answer.
 * Handler sessions decide this in their machine; the other callers (the Compiler, Memory's model calls) use
 * {@link answersOnly}.
 */
export function unanswered(reply: ModelReply): string | undefined {
  if (reply.finishReason === "content_filter")
    return "the model's output was blocked by the server's content filter (finish_reason 'content_filter')";
  if (reply.refusal !== undefined && reply.refusal.trim() !== "") return `the model refused: ${reply.refusal}`;
  return undefined;
}

/** A {@link CallModel} that fails with a {@link ModelCallError} naming the reason when the reply is no answer. */
export function answersOnly(call: CallModel): CallModel {
  // A promise callback, not an await: a frame suspended here would be held for as long as the model takes.
  return async (request, signal, hooks) =>
    call(request, signal, hooks).then((reply) => {
      const reason = unanswered(reply);
      if (reason !== undefined)
        throw new ModelCallError(reason, 1, undefined, { contentFree: "the model's reply was no answer (content filter or refusal)" });
      return reply;
    });
}
