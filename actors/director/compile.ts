/**
 * A task submitted in words (`prompt`) is compiled before it runs: the Director asks the Compiler, stores the
 * template in the task record under its claim (a resumed task does not compile again), and announces it as a
 * `task.compiled` event, so the user sees what runs.
 */
import { CompileReply, Requests, taskFailure, xmlParseFailure, type CompileRequest, type TaskResult } from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import { writeClaimed, type Claim } from "./records.js";
import { ask, RemoteError } from "../ask.js";

/** What {@link compilePrompt} needs besides the claim. */
export interface CompileOptions {
  /** How long the Compiler may take (all attempts). */
  timeoutMs: number;
  /** Aborts the request when the task is cancelled. */
  signal: AbortSignal;
  /** Publishes a task event. */
  announce(type: string, message: string, data: Record<string, unknown>): void;
}

/** The template to run, or the failed result that ends the task. */
export type CompileOutcome = { ok: true; xml: string } | { ok: false; result: TaskResult };

/** Compiles the claimed task's prompt, stores the template under the claim, and announces it. */
export async function compilePrompt(
  deps: ActorDeps,
  store: TaskStore,
  claim: Claim,
  prompt: string,
  options: CompileOptions,
): Promise<CompileOutcome> {
  const { record } = claim;
  // A task compiles its prompt once: a Director resuming it after a crash asks the same occurrence again, and the
  // Compiler joins or replays the compilation instead of calling the model again (actors/compiler/records.ts).
  const request: CompileRequest = {
    type: "compiler.compile",
    prompt,
    taskId: record.taskId,
    inputNames: Object.keys(record.inputs),
    occurrence: 1,
  };
  let reply: CompileReply;
  try {
    reply = await ask(deps, Requests.compile, request, { timeoutMs: options.timeoutMs, signal: options.signal });
  } catch (err) {
    if (!(err instanceof RemoteError) || options.signal.aborted) throw err;
    const message = `could not compile the prompt into a task template: ${err.message}`;
    const result: TaskResult =
      err.code === "INVALID_TEMPLATE"
        ? xmlParseFailure(message)
        : taskFailure(err.code === "UNAVAILABLE" ? "model_error" : "unexpected_error", message, { code: err.code });
    return { ok: false, result };
  }
  const written = await writeClaimed(store, claim, (current) => ({ ...current, xml: reply.xml, updatedAt: deps.now().toISOString() }));
  if (written === "lost") throw new Error(`task '${record.taskId}': claim lost while compiling`);
  const tries = `${reply.attempts} attempt${reply.attempts === 1 ? "" : "s"}`;
  options.announce("task.compiled", `compiled the prompt into a template (${tries})`, {
    xml: reply.xml,
    attempts: reply.attempts,
    ...(reply.errors ? { errors: reply.errors } : {}),
    ...(reply.usage ? { usage: reply.usage } : {}),
  });
  return { ok: true, xml: reply.xml };
}
