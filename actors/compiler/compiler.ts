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
  Requests,
  type CompileReply,
  type ErrorReply,
  type TaskId,
} from "../../protocol/index.js";
import type { ActorDeps, RoleHandle } from "../deps.js";
import { publishProgress } from "../local.js";
import type { CallModel } from "../model.js";
import { serve } from "../serve.js";
import type { TaskStore } from "../bus.js";
import { createLeases, createRunGate } from "../handler/lease.js";
import { recordedCompile } from "./records.js";
import { compileWithModel, DEFAULT_COMPILE_ATTEMPTS, type CompileHooks } from "./compilation.js";

/** Compiler configuration. */
export interface CompilerConfig {
  /** Model used when the request names none. */
  defaultModel: string;
  /** Compilations run at once in this process. */
  concurrency: number;
  /** Model answers per request when the request does not say; default 3. */
  maxAttempts?: number;
}

/**
 * Starts the Compiler role on the same model client as the Handler. With `records` (the turns bucket), compilations
 * that carry a task id and an `occurrence` are recorded and joined (actors/compiler/records.ts).
 */
export function startCompiler(deps: ActorDeps, config: CompilerConfig, callModel: CallModel, records?: TaskStore): RoleHandle {
  /** The compilations running, by task (`undefined`: those of no task), for a cancel of the task to abort. */
  const live = new Map<TaskId | undefined, Set<AbortController>>();
  const options = { defaultModel: config.defaultModel, maxAttempts: config.maxAttempts ?? DEFAULT_COMPILE_ATTEMPTS };
  // One run per record key: a compilation asked again while it runs (here or in another Compiler) joins it.
  const gate = records ? createRunGate(createLeases(records, deps.log)) : undefined;

  const compile = async (request: CompileRequest): Promise<CompileReply | ErrorReply> => {
    const controller = new AbortController();
    const key = request.taskId;
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
