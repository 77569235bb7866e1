/**
 * The model call of a Handler session (its `callModel` effect): the request built from the task's settings, the
 * models of its `<model fallback>` tried in turn while one is unavailable (machines/handler/model-fallback.ts),
 * each retry and switch reported as progress, and streamed text published as `model.delta` events with any secret
 * split across pieces held back until it can be masked whole.
 */
import { modelsToTry, nextModel, unavailableStatus } from "../../machines/handler/model-fallback.js";
import type { CallModelInput, ModelReply } from "../../machines/handler/session.js";
import type { SessionSettings } from "../../protocol/index.js";
import { ModelCallError, type CallModel, type ModelRequest, type RetryInfo } from "../model.js";
import { createStreamMasker } from "../secrets.js";
import type { ToolDefinition } from "./toolset.js";

/** Whether a failed model call says the model is unavailable, so another may answer ({@link unavailableStatus}). */
export function modelUnavailable(error: unknown): error is ModelCallError {
  return error instanceof ModelCallError && unavailableStatus(error.status);
}

/**
 * Calls `first`, then each of `fallbacks` in order while the previous is unavailable ({@link modelUnavailable});
 * `onFallback` hears of each switch. The last failure is thrown when none answers.
 */
export async function withFallback<T>(
  first: string,
  fallbacks: readonly string[],
  call: (model: string) => Promise<T>,
  onFallback: (from: string, to: string, error: ModelCallError) => void,
  aborted: () => boolean,
): Promise<T> {
  const models = modelsToTry(first, fallbacks);
  // Each call waits with a promise callback, not in an async frame: a frame suspended on it would be held for as long
  // as the model takes.
  const attempt = (index: number): Promise<T> => {
    const model = models[index];
    if (model === undefined) return Promise.reject(new Error("no model to call"));
    let called: Promise<T>;
    try {
      called = call(model);
    } catch (error) {
      called = Promise.reject(error);
    }
    return called.catch((error: unknown) => {
      const unavailable = modelUnavailable(error);
      const next = nextModel(models, index, { unavailable, aborted: aborted() });
      if (next === undefined || !unavailable) throw error;
      onFallback(model, next, error);
      return attempt(index + 1);
    });
  };
  return attempt(0);
}

/** How one session calls its model. */
export interface SessionModel {
  /** The model client (traced). */
  call: CallModel;
  /** The task's settings: fallback models, temperature, provider. */
  settings: SessionSettings;
  /** The tools offered to the model. */
  tools: readonly ToolDefinition[];
  /** The output limit sent with each call, if one is. */
  maxOutputTokens: number | undefined;
  /** Stream the completion, publishing its text as `model.delta` events. */
  stream: boolean;
  /** Secrets masked in streamed text. */
  secrets: readonly string[];
  /** Publishes a progress event of the task. */
  progress: (event: string, message: string, data: Record<string, unknown>) => void;
  /** Hears of each answer, with the time it took and the retries it needed. */
  answered: (input: CallModelInput, reply: ModelReply, timing: { durationMs: number; retries: number }) => void;
}

const retryMessage = (retry: RetryInfo) =>
  `retry ${retry.attempt}/${retry.maxRetries} in ${retry.delayMs} ms${retry.fromRetryAfter ? " (retry-after)" : ""}: ${retry.message}`;

/** The `callModel` effect of one session. */
export function sessionModelCall(session: SessionModel): (input: CallModelInput, signal: AbortSignal) => Promise<ModelReply> {
  const { settings, maxOutputTokens, progress } = session;
  // Object.assign, not a literal that starts with `...input`: in this V8 (Node 20) such a literal gets a hidden class of
  // its own, about 0.3 KB more for each call in flight. The keys come out in the same order.
  const request = (input: CallModelInput, model: string): ModelRequest =>
    Object.assign({}, input, {
      model,
      tools: session.tools,
      ...(maxOutputTokens ? { maxTokens: maxOutputTokens } : {}),
      ...(settings.temperature === undefined ? {} : { temperature: settings.temperature }),
      ...(settings.provider === undefined ? {} : { provider: settings.provider }),
    });
  return async (input, signal) => {
    const started = Date.now();
    let retries = 0;
    // Returned with a promise callback, not awaited: a frame suspended here would be held while the model runs.
    return withFallback(
      input.model,
      settings.fallbackModels ?? [],
      (model) => {
        // One stream per model call: a secret split across its pieces is held back until it can be masked whole.
        const deltas = session.stream ? createStreamMasker(session.secrets) : undefined;
        const delta = (text: string) => void (text === "" || progress("model.delta", text, { text }));
        const call = session.call(request(input, model), signal, {
          onRetry: (retry) => {
            retries++;
            progress("model.retry", retryMessage(retry), { ...retry, model });
          },
          ...(deltas ? { onDelta: (text: string) => delta(deltas.push(text)) } : {}),
        });
        return deltas ? call.finally(() => delta(deltas.end())) : call;
      },
      (from, to, error) =>
        progress("model.fallback", `model '${from}' is unavailable (${error.message}): trying '${to}'`, {
          from,
          to,
          ...(error.status === undefined ? {} : { status: error.status }),
        }),
      () => signal.aborted,
    ).then((reply) => {
      session.answered(input, reply, { durationMs: Date.now() - started, retries });
      return reply;
    });
  };
}
