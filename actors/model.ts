/**
 * The model client: chat completions through the `openai` SDK. The API key lives in the client only;
 * it never enters machine context, messages, events or logs.
 *
 * The SDK's own retries are off (`maxRetries: 0`): this client retries 429, 408, 409, 5xx, connection errors and
 * timeouts itself, with exponential backoff and full jitter, so that each retry is reported (`onRetry`) and a
 * cancel aborts a backoff wait as well as a request.
 */
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import type { ChatMessage, ModelReply } from "../machines/handler-session.js";
import type { ToolDefinition } from "./tools/toolset.js";

/** How to reach the model. */
export interface ModelConfig {
  /** OpenAI-compatible base URL (`OPENAI_BASE_URL`); the SDK default (api.openai.com) otherwise. */
  baseURL?: string;
  /** API key (`OPENAI_API_KEY`). Local servers accept any value. */
  apiKey?: string;
  /** Per-request timeout. */
  timeoutMs: number;
  /** Retries after a failed attempt (connection errors, timeouts, 408, 409, 429, 5xx). */
  maxRetries: number;
  /** Backoff before the first retry; doubled each retry (before jitter). Default 500 ms. */
  retryBaseMs?: number;
  /** Cap of one backoff wait. Default 30 s. */
  retryMaxMs?: number;
}

/** One retry about to happen. */
export interface RetryInfo {
  /** The attempt that failed, from 1. */
  attempt: number;
  /** Retries allowed in total. */
  maxRetries: number;
  /** The wait before the next attempt. */
  delayMs: number;
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

/** The model failed for good: a non-retryable error, or retries used up. */
export class ModelCallError extends Error {
  override name = "ModelCallError";
  constructor(
    message: string,
    /** Attempts made. */
    readonly attempts: number,
    /** HTTP status of the last failure, if any. */
    readonly status: number | undefined,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Whether a failed attempt may be retried, and its HTTP status. */
export function classify(error: unknown): { retryable: boolean; status?: number } {
  if (error instanceof OpenAI.APIUserAbortError) return { retryable: false };
  if (error instanceof OpenAI.APIConnectionError) return { retryable: true };
  if (error instanceof OpenAI.APIError && error.status !== undefined) {
    const status = error.status;
    return { retryable: status === 408 || status === 409 || status === 429 || status >= 500, status };
  }
  return { retryable: false };
}

/** Full-jitter exponential backoff: a random wait in [0, min(max, base × 2^(attempt-1))]. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.round(random() * Math.min(maxMs, baseMs * 2 ** (attempt - 1)));
}

/** Creates a {@link CallModel} over the `openai` SDK. */
export function createModelClient(config: ModelConfig): CallModel {
  const client = new OpenAI({
    apiKey: config.apiKey ?? "not-set",
    timeout: config.timeoutMs,
    maxRetries: 0,
    ...(config.baseURL ? { baseURL: config.baseURL } : {}),
  });
  const base = config.retryBaseMs ?? 500;
  const max = config.retryMaxMs ?? 30_000;
  const once = async ({ model, messages, tools, maxTokens }: ModelRequest, signal: AbortSignal, onDelta?: (text: string) => void): Promise<ModelReply> => {
    const body = { model, messages, ...(tools && tools.length > 0 ? { tools: [...tools] } : {}), ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }) };
    let completion: OpenAI.ChatCompletion;
    if (onDelta) {
      const stream = client.chat.completions.stream({ ...body, stream_options: { include_usage: true } }, { signal });
      stream.on("content", (delta) => onDelta(delta));
      completion = await stream.finalChatCompletion();
    } else {
      completion = await client.chat.completions.create(body, { signal });
    }
    const choice = completion.choices[0];
    if (!choice) throw new Error(`model '${model}' returned no choices`);
    const toolCalls = (choice.message.tool_calls ?? []).flatMap((call) =>
      call.type === "function" ? [{ id: call.id, type: "function" as const, function: { name: call.function.name, arguments: call.function.arguments } }] : [],
    );
    return {
      content: choice.message.content ?? "",
      toolCalls,
      usage: {
        promptTokens: completion.usage?.prompt_tokens ?? 0,
        completionTokens: completion.usage?.completion_tokens ?? 0,
      },
      model: completion.model || model,
      finishReason: choice.finish_reason ?? "stop",
    };
  };
  return async (request, signal, hooks = {}) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await once(request, signal, hooks.onDelta);
      } catch (error) {
        if (signal.aborted) throw error;
        const { retryable, status } = classify(error);
        const message = error instanceof Error ? error.message : String(error);
        if (!retryable || attempt > config.maxRetries) {
          const tries = attempt > 1 ? ` after ${attempt} attempts` : "";
          throw new ModelCallError(`model request failed${tries}: ${message}`, attempt, status, { cause: error });
        }
        const delayMs = backoffMs(attempt, base, max);
        hooks.onRetry?.({ attempt, maxRetries: config.maxRetries, delayMs, message, ...(status !== undefined ? { status } : {}) });
        await sleep(delayMs, undefined, { signal });
      }
    }
  };
}
