/**
 * The effects of a task's machine (machines/director/task.ts) as its Director provides them for one claimed task: its
 * evaluation, asked of an Evaluator (a task submitted in words compiled first), and its events, published while this
 * Director still owns the task.
 */
import { Requests, type EvaluateRequest, type TaskState } from "../../protocol/index.js";
import { askRetrying } from "../ask.js";
import { inSpan, ROOT_CONTEXT } from "../tracing.js";
import { compilePrompt } from "./compile.js";
import { claimLostBy, readTaskRecord } from "./records.js";
import type { RunEnv } from "./run-env.js";
import type { RunningTask, TaskEffects } from "./task.js";

/** The effects of a task's machine: its evaluation (compiling a task submitted in words first) and its events. */
export function taskEffects(env: RunEnv, task: RunningTask): TaskEffects {
  const { deps, owner } = env;
  const { claim } = task;
  const record = claim.record;
  // Once another Director owns the task, nothing of it is published here.
  const emit = (type: string, state: TaskState, message?: string, data?: Record<string, unknown>) => {
    if (!task.lost) env.publishEvent(record.taskId, ++task.seq, type, state, message, data);
  };
  return {
    evaluate: async (input, signal) => {
      // The compiled template is in the record (stored before the evaluation is asked for); the machine's
      // input, restored from a snapshot taken before the compile, still holds the empty one.
      let xml = record.xml;
      if (xml === "" && record.prompt !== undefined) {
        const compiled = await compilePrompt(deps, env.store, claim, record.prompt, {
          timeoutMs: env.taskTimeoutMs,
          signal,
          announce: (type, message, data) => emit(type, "running", message, data),
        });
        if (!compiled.ok) return compiled.result;
        xml = compiled.xml;
      }
      const request = (attempt: number): EvaluateRequest => ({
        type: "evaluator.evaluate",
        taskId: record.taskId,
        // A new attempt (the Evaluator went silent) supersedes the old one, should it still run somewhere.
        owner: attempt === 1 ? owner : `${owner}~${attempt}`,
        // The first delivery's first request: nothing of this task ran before, so nothing is looked for or stopped.
        ...(attempt === 1 && task.fresh ? { fresh: true } : {}),
        xml,
        inputs: input.inputs,
        ...(record.budget ? { budget: record.budget } : {}),
        ...(record.stream === undefined ? {} : { stream: record.stream }),
        ...(record.replay ? { replay: record.replay } : {}),
      });
      const asked = { parent: task.span?.context ?? record.trace ?? ROOT_CONTEXT, attributes: { "dirigent.task_id": record.taskId } };
      // Returned with a promise callback, not awaited: a suspended frame would be held while the task's model runs.
      return inSpan("director.evaluate", asked, () =>
        askRetrying(deps, Requests.evaluate, request, {
          timeoutMs: env.taskTimeoutMs,
          signal,
          // Ask again only while this Director still holds the task: a stale retry would supersede the new owner.
          beforeRetry: async () => {
            // A read that fails or may be stale (around a leader election) does not stop it: the heartbeat notices a
            // lost claim for sure.
            const now = await readTaskRecord(env.store, record.taskId).catch(() => undefined);
            if (claimLostBy(now, claim)) throw new Error(`task '${record.taskId}': claim lost; not asking again`);
          },
        }),
      ).then((reply) => reply.result);
    },
    announce: (a) => emit(a.event, a.state, a.message, a.data),
  };
}
