/**
 * The Compiler: turns a request in words into a validated task template through the model, and decomposes a node
 * that ran out of resources into a `sequential` or `reduce` sub-tree. Each model answer is checked with the
 * template parser; its errors are fed back as a user message and the model answers again, a bounded number of
 * times. Serves `<root>.compiler.compile` in queue group `compiler`; reports retries of a task's compilation as
 * `compile.retry` progress, and aborts the model request when the task is cancelled. With the turns bucket, a
 * compilation that names its task and occurrence is recorded and runs once across crashes of its askers
 * (actors/compiler/records.ts).
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
import type { TaskStore } from "../bus.js";
import { createLeases, createRunGate } from "../handler/lease.js";
import { recordedCompile } from "./records.js";

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

/** Observers of one compilation, and where it starts. */
export interface CompileHooks {
  /** Hears about each invalid answer that is followed by another attempt. */
  onRetry?: (info: { attempt: number; maxAttempts: number; errors: string[] }) => void;
  /**
   * Hears about each invalid answer that is followed by another attempt, before that attempt asks the model: every
   * answer so far (all invalid) and the tokens they used, what {@link CompileHooks.answered} continues from.
   */
  onAnswers?: (answers: readonly string[], usage: Usage) => Promise<void>;
  /** Invalid answers of an earlier run of this compilation (its record) and their tokens: not asked for again. */
  answered?: { answers: readonly string[]; usage: Usage };
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
  const recorded = hooks.answered?.answers ?? [];
  const usage: Usage = { ...(hooks.answered?.usage ?? { promptTokens: 0, completionTokens: 0 }) };
  const answers: string[] = [];
  const seen: string[] = [];
  let last: { errors: string[]; line?: number; col?: number } = { errors: [] };
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    // A recorded answer is checked again (the check is pure) rather than asked for again.
    let content = recorded[attempt - 1];
    if (content === undefined) {
      let answer: Awaited<ReturnType<CallModel>>;
      try {
        answer = await callModel({ model: request.model ?? options.defaultModel, messages }, signal);
      } catch (err) {
        if (signal.aborted) throw err;
        throw new RemoteError("UNAVAILABLE", `compiler: ${messageOf(err)}`, { cause: err });
      }
      usage.promptTokens += answer.usage.promptTokens;
      usage.completionTokens += answer.usage.completionTokens;
      content = answer.content;
    }
    answers.push(content);
    const xml = extractXml(content);
    const check = checkTemplate(xml, request.mode);
    if (check.ok) {
      return { type: "compiler.result", xml, attempts: attempt, ...(seen.length > 0 ? { errors: seen } : {}), usage };
    }
    last = check;
    seen.push(...check.errors.map((e) => `attempt ${attempt}: ${e}`));
    if (attempt < maxAttempts) {
      if (attempt > recorded.length) {
        hooks.onRetry?.({ attempt, maxAttempts, errors: check.errors });
        await hooks.onAnswers?.(answers, usage);
      }
      messages.push({ role: "assistant", content }, { role: "user", content: retryMessage(check.errors) });
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

/**
 * Starts the Compiler role on the same model client as the Handler. With `records` (the turns bucket), compilations
 * that carry a task id and an `occurrence` are recorded and joined (actors/compiler/records.ts).
 */
export function startCompiler(deps: ActorDeps, config: CompilerConfig, callModel: CallModel, records?: TaskStore): RoleHandle {
  const live = new Map<string, Set<AbortController>>();
  const options = { defaultModel: config.defaultModel, maxAttempts: config.maxAttempts ?? DEFAULT_COMPILE_ATTEMPTS };
  // One run per record key: a compilation asked again while it runs (here or in another Compiler) joins it.
  const gate = records ? createRunGate(createLeases(records, deps.log)) : undefined;

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
    const hooks: CompileHooks = onRetry ? { onRetry } : {};
    const run = (given: CompileHooks) => compileWithModel(request, callModel, options, controller.signal, given);
    try {
      return await (records && gate ? recordedCompile(deps, records, gate, request, run, hooks) : run(hooks));
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
      gate?.cancel(decoded.value.taskId);
      for (const controller of live.get(decoded.value.taskId) ?? []) controller.abort();
    }),
  ];

  return {
    role: "compiler",
    async stop() {
      await Promise.all(subscriptions.map((s) => s.unsubscribe()));
      gate?.stop();
      for (const set of live.values()) for (const controller of set) controller.abort();
    },
  };
}
