/**
 * The Compiler's records (no repeated model call when a Director or Evaluator crashes mid-compile). A compilation
 * that names its task and occurrence is keyed by them and by what it asks; it runs once at a time across the Compiler
 * processes under the Handler's in-flight markers (actors/handler/lease.ts), records each invalid answer before the
 * next attempt asks the model, and records its answer when it ends. The same compilation asked again (the task resumed
 * by another Director, a reparse asked by another Evaluator) joins the one still running, continues after the answers
 * recorded, or replays the recorded answer.
 */
import { recordDigest } from "../record-digest.js";
import { CompileRecord, type CompileReply, type CompileRequest, type ErrorReply } from "../../protocol/index.js";
import type { TaskStore } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import { publishProgress } from "../local.js";
import { readSessionRecord, writeRecord } from "../handler/records.js";
import type { JoinedAt, RunGate } from "../handler/lease.js";
import type { CompileHooks } from "./compilation.js";

/** The record key of a compilation, or undefined when it asks for no record (no task id or no `occurrence`). */
export function compileKey(request: CompileRequest): string | undefined {
  if (request.taskId === undefined || request.occurrence === undefined) return undefined;
  const asked = [
    request.nodePath ?? "",
    request.occurrence,
    request.mode ?? "compile",
    request.prompt,
    request.failed ?? null,
    request.inputNames ?? [],
    request.model ?? "",
    request.maxAttempts ?? 0,
  ];
  return `${request.taskId}.k${recordDigest(asked)}`;
}

/** Runs a compilation from the hooks it is given (`answered`: continue after those answers; `onAnswers`: record). */
export type Compile = (hooks: CompileHooks) => Promise<CompileReply | ErrorReply>;

/**
 * Runs `compile` as the one run of the request's record, or joins the run of it going on (`model.joined`); replays a
 * finished record (`model.replayed`, no model call) or continues an unfinished one after its recorded answers.
 * A compilation asking for no record ({@link compileKey}) just runs.
 */
export function recordedCompile(
  deps: ActorDeps,
  records: TaskStore,
  gate: RunGate,
  request: CompileRequest,
  compile: Compile,
  hooks: CompileHooks,
): Promise<CompileReply | ErrorReply> {
  const key = compileKey(request);
  const taskId = request.taskId;
  if (key === undefined || taskId === undefined) return compile(hooks);
  const progress = (event: string, message: string, data: Record<string, unknown> = {}) =>
    publishProgress(deps, {
      type: "task.progress",
      taskId,
      event,
      message,
      data: { compile: request.mode ?? "compile", ...(request.nodePath === undefined ? {} : { nodePath: request.nodePath }), ...data },
    });
  const joined = (at: JoinedAt) =>
    progress(
      "model.joined",
      `joined the compilation in flight ${at === "here" ? "in this Compiler" : "in another Compiler"}: it is not started again`,
      { at },
    );
  return gate.run(
    taskId,
    key,
    async (_before, stored) => {
      const recorded = await readSessionRecord(records, key, CompileRecord, deps.log);
      if (recorded?.status === "done") {
        progress("model.replayed", "replayed the recorded compilation: no model call");
        return recorded.reply;
      }
      if (recorded)
        progress("model.replayed", `continuing the recorded compilation after attempt ${recorded.answers.length}`, {
          attempts: recorded.answers.length,
        });
      const reply = await compile({
        ...hooks,
        ...(recorded ? { answered: { answers: recorded.answers, usage: recorded.usage } } : {}),
        onAnswers: async (answers, usage) => {
          await writeRecord(records, key, CompileRecord, { v: 1, status: "running", answers: [...answers], usage }, deps.log);
        },
      });
      // Written before this returns: a request waiting elsewhere reads it once stored.
      const written = writeRecord(records, key, CompileRecord, { v: 1, status: "done", reply }, deps.log);
      stored(written);
      await written;
      return reply;
    },
    joined,
    async () => (await readSessionRecord(records, key, CompileRecord, deps.log))?.status === "done",
  );
}
