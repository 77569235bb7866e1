/**
 * The Compiler: turns a request in words into a validated task template through the model, and decomposes a node
 * that ran out of resources into a `sequential` or `reduce` sub-tree. Each model answer is checked with the
 * template parser; its errors are fed back as a user message and the model answers again, a bounded number of
 * times. Serves `<root>.compiler.compile` in queue group `compiler`; reports retries of a task's compilation as
 * `compile.retry` progress, and aborts the model request when the task is cancelled.
 */
import {
  CancelBroadcast,
  CompileRequest,
  decode,
  errorReply,
  Requests,
  type CompileReply,
  type ErrorReply,
  type Usage,
} from "../../protocol/index.js";
import { checkTemplate, extractXml, initialMessages, retryMessage } from "./prompt.js";
import { messageOf, type ActorDeps, type RoleHandle } from "../deps.js";
import { publishProgress } from "../local.js";
import type { CallModel } from "../model.js";
import { RemoteError } from "../ask.js";
import { serve } from "../serve.js";

/** Compiler configuration. */
export interface CompilerConfig {
  /** Model used when the request names none. */
  defaultModel: string;
  /** Compilations run at once in this process. */
  concurrency: number;
  /** Model answers per request when the request does not say; default 3. */
  maxAttempts?: number;
}

/** The default number of model answers per compilation. */
export const DEFAULT_COMPILE_ATTEMPTS = 3;

/** Observers of one compilation. */
export interface CompileHooks {
  /** Hears about each invalid answer that is followed by another attempt. */
  onRetry?: (info: { attempt: number; maxAttempts: number; errors: string[] }) => void;
}

/**
 * Runs one compilation: asks the model, validates, feeds errors back, up to `maxAttempts` answers.
 * @returns the reply, or an `INVALID_TEMPLATE` error reply (with `details: {attempts, errors}`) when no answer
 *   was valid.
 * @throws {RemoteError} `UNAVAILABLE` when the model request fails for good.
 */
export async function compileWithModel(
  request: CompileRequest,
  callModel: CallModel,
  options: { defaultModel: string; maxAttempts: number },
  signal: AbortSignal,
  hooks: CompileHooks = {},
): Promise<CompileReply | ErrorReply> {
  const maxAttempts = request.maxAttempts ?? options.maxAttempts;
  const messages = initialMessages(request);
  const usage: Usage = { promptTokens: 0, completionTokens: 0 };
  const seen: string[] = [];
  let last: { errors: string[]; line?: number; col?: number } = { errors: [] };
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    let answer: Awaited<ReturnType<CallModel>>;
    try {
      answer = await callModel({ model: request.model ?? options.defaultModel, messages }, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      throw new RemoteError("UNAVAILABLE", `compiler: ${messageOf(err)}`, { cause: err });
    }
    usage.promptTokens += answer.usage.promptTokens;
    usage.completionTokens += answer.usage.completionTokens;
    const xml = extractXml(answer.content);
    const check = checkTemplate(xml, request.mode);
    if (check.ok) {
      return { type: "compiler.result", xml, attempts: attempt, ...(seen.length > 0 ? { errors: seen } : {}), usage };
    }
    last = check;
    seen.push(...check.errors.map((e) => `attempt ${attempt}: ${e}`));
    if (attempt < maxAttempts) {
      hooks.onRetry?.({ attempt, maxAttempts, errors: check.errors });
      messages.push({ role: "assistant", content: answer.content }, { role: "user", content: retryMessage(check.errors) });
    }
  }
  const what = request.mode === "decompose" ? "decomposition" : "template";
  return errorReply(
    "INVALID_TEMPLATE",
    `compiler: no valid ${what} after ${maxAttempts} attempt${maxAttempts === 1 ? "" : "s"}: ${last.errors.join("; ")}`,
    {
      ...(last.line ? { line: last.line } : {}),
      ...(last.col ? { col: last.col } : {}),
      details: { attempts: maxAttempts, errors: seen },
    },
  );
}

/** Starts the Compiler role on the same model client as the Handler. */
export function startCompiler(deps: ActorDeps, config: CompilerConfig, callModel: CallModel): RoleHandle {
  const live = new Map<string, Set<AbortController>>();
  const options = { defaultModel: config.defaultModel, maxAttempts: config.maxAttempts ?? DEFAULT_COMPILE_ATTEMPTS };

  const compile = async (request: CompileRequest): Promise<CompileReply | ErrorReply> => {
    const controller = new AbortController();
    const key = request.taskId ?? "";
    const mine = live.get(key) ?? new Set();
    live.set(key, mine.add(controller));
    const { taskId } = request;
    const onRetry: CompileHooks["onRetry"] =
      taskId === undefined
        ? undefined
        : ({ attempt, maxAttempts, errors }) =>
            publishProgress(deps, {
              type: "task.progress",
              taskId,
              event: "compile.retry",
              message: `compile attempt ${attempt}/${maxAttempts} was not a valid template; retrying: ${errors[0] ?? ""}`,
              data: { attempt, maxAttempts, errors },
            });
    try {
      return await compileWithModel(request, callModel, options, controller.signal, onRetry ? { onRetry } : {});
    } finally {
      mine.delete(controller);
      if (mine.size === 0) live.delete(key);
    }
  };

  const subscriptions = [
    serve(deps, Requests.compile, {
      queue: deps.subjects.queue("compiler"),
      concurrency: config.concurrency,
      local: true,
      handle: (request) => compile(request),
    }),
    deps.bus.subscribe(deps.subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (!decoded.ok) return;
      for (const controller of live.get(decoded.value.taskId) ?? []) controller.abort();
    }),
  ];

  return {
    role: "compiler",
    async stop() {
      await Promise.all(subscriptions.map((s) => s.unsubscribe()));
      for (const set of live.values()) for (const controller of set) controller.abort();
    },
  };
}
