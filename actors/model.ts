/**
 * The model client: chat completions through the `openai` SDK. The API key lives in the client only;
 * it never enters machine context, messages, events or logs.
 */
import OpenAI from "openai";
import type { ChatMessage, ModelReply } from "../machines/handler-session.js";

/** How to reach the model. */
export interface ModelConfig {
  /** OpenAI-compatible base URL (`OPENAI_BASE_URL`); the SDK default (api.openai.com) otherwise. */
  baseURL?: string;
  /** API key (`OPENAI_API_KEY`). Local servers accept any value. */
  apiKey?: string;
  /** Per-request timeout. */
  timeoutMs: number;
  /** Retries of the SDK for connection errors, 408, 409, 429 and 5xx. */
  maxRetries: number;
}

/** Calls one chat completion. */
export type CallModel = (request: { model: string; messages: ChatMessage[] }, signal: AbortSignal) => Promise<ModelReply>;

/** Creates a {@link CallModel} over the `openai` SDK. */
export function createModelClient(config: ModelConfig): CallModel {
  const client = new OpenAI({
    apiKey: config.apiKey ?? "not-set",
    timeout: config.timeoutMs,
    maxRetries: config.maxRetries,
    ...(config.baseURL ? { baseURL: config.baseURL } : {}),
  });
  return async ({ model, messages }, signal) => {
    const completion = await client.chat.completions.create({ model, messages }, { signal });
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
}
