/**
 * The model client: chat completions through the `openai` SDK. The API key lives in the client only;
 * it never enters machine context, messages, events or logs.
 *
 * The SDK's own retries are off (`maxRetries: 0`): this client retries 429, 408, 409, 5xx, connection errors and
 * timeouts itself, so that each retry is reported (`onRetry`) and a cancel aborts a backoff wait as well as a request.
 * It waits what the server asks (`retry-after-ms`, `retry-after` in seconds or as an HTTP date), else an exponential
 * backoff with full jitter; retries stop at `maxRetries` or when the waits would pass `retryBudgetMs`, and a server
 * asking for more than is left of that budget fails the call at once.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type OpenAI from "openai";
import type { ModelReply } from "../../machines/handler/session.js";
import { ModelCallError, type CallModel, type ModelRequest } from "../../actors/model.js";
import { messageOf } from "../../protocol/errors.js";
import { createHttpFetch } from "./http-fetch.js";
import { createHttp1Fetch } from "./http1.js";

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
  /** Cap of one wait, a server's retry-after included. Default 30 s. */
  retryMaxMs?: number;
  /** Most time spent waiting between attempts over one call, all retries together. Default 60 s. */
  retryBudgetMs?: number;
  /**
   * The HTTP client: dirigent's own keep-alive HTTP/1.1 client by default ({@link createHttp1Fetch}); `"node"` is
   * keep-alive `node:http` ({@link createHttpFetch}); `"global"` is Node's `fetch`.
   */
  http?: "http1" | "node" | "global";
}

/** The `openai` SDK's client class, which also carries its error classes. */
type Sdk = typeof OpenAI;

/** Whether a failed attempt may be retried, and its HTTP status, by the SDK's error classes. */
export function classify(error: unknown, sdk: Sdk): { retryable: boolean; status?: number } {
  if (error instanceof sdk.APIUserAbortError) return { retryable: false };
  if (error instanceof sdk.APIConnectionError) return { retryable: true };
  if (error instanceof sdk.APIError && error.status !== undefined) {
    const status = error.status;
    return { retryable: status === 408 || status === 409 || status === 429 || status >= 500, status };
  }
  return { retryable: false };
}

/** Full-jitter exponential backoff: a random wait in [0, min(max, base × 2^(attempt-1))]. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.round(random() * Math.min(maxMs, baseMs * 2 ** (attempt - 1)));
}

/**
 * The wait a failed response asks for, in ms: `retry-after-ms` (milliseconds), else `retry-after` (seconds, or an
 * HTTP date, counted from `now`). A date in the past asks for 0; a missing, empty or unreadable value asks for nothing.
 */
export function retryAfterMs(headers: Headers | undefined, now: number = Date.now()): number | undefined {
  const ms = headers?.get("retry-after-ms")?.trim();
  if (ms && isNumber(ms)) return Math.ceil(Number(ms));
  const after = headers?.get("retry-after")?.trim();
  if (!after) return undefined;
  if (isNumber(after)) return Math.ceil(Number(after) * 1000);
  // Only a date with a weekday or month name: Date.parse would read "-1" or "12" as years.
  const date = /[a-z]/i.test(after) ? Date.parse(after) : Number.NaN;
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

const isNumber = (text: string): boolean => /^\d+(\.\d+)?$/.test(text);

/** How the retries of one call are bounded. */
export interface RetryPolicy {
  maxRetries: number;
  baseMs: number;
  maxMs: number;
  budgetMs: number;
}

/** What to do after a retryable failure: wait and try again, or give up and why. */
export type RetryDecision = { retry: true; delayMs: number; fromRetryAfter: boolean } | { retry: false; why: string };

/**
 * Chooses what follows the failed `attempt` (from 1), `waitedMs` having been waited already in this call: the
 * server's `serverMs` (capped at `maxMs`) when it asked for a wait, else a full-jitter backoff (cut to what is left of
 * the budget). No retry once `maxRetries` are used, the budget is spent, or the server asks for more than is left.
 */
export function nextRetry(
  policy: RetryPolicy,
  attempt: number,
  waitedMs: number,
  serverMs: number | undefined,
  random: () => number = Math.random,
): RetryDecision {
  if (attempt > policy.maxRetries)
    return { retry: false, why: `${policy.maxRetries} ${policy.maxRetries === 1 ? "retry" : "retries"} used up` };
  const left = policy.budgetMs - waitedMs;
  if (serverMs !== undefined) {
    if (serverMs > left) {
      const leftText = waitedMs > 0 ? `the ${seconds(Math.max(0, left))} s left of ` : "";
      return {
        retry: false,
        why: `not retried: the server asked to wait ${seconds(serverMs)} s (retry-after), more than ${leftText}the model retry budget of ${seconds(policy.budgetMs)} s`,
      };
    }
    return { retry: true, delayMs: Math.min(serverMs, policy.maxMs), fromRetryAfter: true };
  }
  if (left <= 0) return { retry: false, why: `the model retry budget of ${seconds(policy.budgetMs)} s is used up` };
  return { retry: true, delayMs: Math.min(left, backoffMs(attempt, policy.baseMs, policy.maxMs, random)), fromRetryAfter: false };
}

const seconds = (ms: number): string => String(Math.round(ms / 100) / 10);

/**
 * Creates a {@link CallModel} over the `openai` SDK. The SDK (about 150 modules) starts loading here, not when this
 * module is imported: a command that calls no model does not load it, and a Handler's first call does not wait for it.
 */
export function createModelClient(config: ModelConfig): CallModel {
  const loading = import("openai").then(({ default: Sdk }) => ({
    Sdk,
    client: new Sdk({
      apiKey: config.apiKey ?? "not-set",
      timeout: config.timeoutMs,
      maxRetries: 0,
      ...(config.http === "global" ? {} : { fetch: config.http === "node" ? createHttpFetch() : createHttp1Fetch() }),
      ...(config.baseURL ? { baseURL: config.baseURL } : {}),
    }),
  }));
  // A load that fails is reported by the call that awaits it, not as an unhandled rejection before one.
  loading.catch(() => undefined);
  const policy: RetryPolicy = {
    maxRetries: config.maxRetries,
    baseMs: config.retryBaseMs ?? 500,
    maxMs: config.retryMaxMs ?? 30_000,
    budgetMs: config.retryBudgetMs ?? 60_000,
  };
  const once = async (
    client: OpenAI,
    { model, messages, tools, maxTokens, temperature }: ModelRequest,
    signal: AbortSignal,
    onDelta?: (text: string) => void,
  ): Promise<ModelReply> => {
    const body = {
      model,
      messages,
      ...(tools && tools.length > 0 ? { tools: [...tools] } : {}),
      ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
      ...(temperature === undefined ? {} : { temperature }),
    };
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
      call.type === "function"
        ? [{ id: call.id, type: "function" as const, function: { name: call.function.name, arguments: call.function.arguments } }]
        : [],
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
      ...(choice.message.refusal ? { refusal: choice.message.refusal } : {}),
    };
  };
  return async (request, signal, hooks = {}) => {
    const { Sdk, client } = await loading;
    let waitedMs = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        return await once(client, request, signal, hooks.onDelta);
      } catch (error) {
        if (signal.aborted) throw error;
        const { retryable, status } = classify(error, Sdk);
        // A server that cannot be reached is named: which one was tried is the first thing to check.
        const message = error instanceof Sdk.APIConnectionError ? `${messageOf(error)} (model server ${client.baseURL})` : messageOf(error);
        const tries = attempt > 1 ? ` after ${attempt} attempts` : "";
        if (!retryable) throw new ModelCallError(`model request failed${tries}: ${message}`, attempt, status, { cause: error });
        const next = nextRetry(policy, attempt, waitedMs, error instanceof Sdk.APIError ? retryAfterMs(error.headers) : undefined);
        if (!next.retry)
          throw new ModelCallError(`model request failed${tries}: ${message}; ${next.why}`, attempt, status, { cause: error });
        waitedMs += next.delayMs;
        hooks.onRetry?.({
          attempt,
          maxRetries: policy.maxRetries,
          delayMs: next.delayMs,
          fromRetryAfter: next.fromRetryAfter,
          message,
          ...(status !== undefined ? { status } : {}),
        });
        await sleep(next.delayMs, undefined, { signal });
      }
    }
  };
}
