/**
 * A task's outcome as a Director stores and publishes it: the final record under the claim, then the last event and
 * the result ({@link finish}); a final task's result its owner stored but never published ({@link publishLostResult});
 * the last event stored of a task, which the events of a run that resumes or finishes the task for another follow.
 */
import type { ActorDeps } from "../deps.js";
import { messageOf } from "../../protocol/errors.js";
import type { RunEnv } from "./run-env.js";
import type { FinishOutput } from "../../machines/director/run.js";
import type { TaskContext } from "../../machines/director/task.js";
import { decode, encode, TaskEvent, TaskOutcome, type TaskRecord, type TaskState, type TaskId } from "../../protocol/index.js";
import { isPermanentStoreError, type LastPublished, type PublishStored } from "../bus.js";
import { fitOutcome } from "./message-fit.js";
import { writeClaimed } from "./records.js";
import { failedContext, outcomeOf, unstorableMessage, type RunningTask } from "./task.js";

/**
 * Publishes a task's result: stored in the events stream with an acknowledgement and a message id where the
 * transport can, else sent. A result is never sent without being stored where it can be: when the store fails (a
 * clustered stream still without a leader after its patience), this throws, and the run hands its delivery back.
 * The redelivery finds the task final and publishes the result then ({@link publishLostResult}); should the failed
 * write have landed after all, it finds it there, and the stream keeps one copy of a repeat by its message id.
 */
export async function publishResult(
  deps: ActorDeps,
  publishStored: PublishStored | undefined,
  taskId: TaskId,
  body: Uint8Array,
): Promise<void> {
  const subject = deps.subjects.taskResult(taskId);
  if (publishStored === undefined) return deps.bus.publish(subject, body);
  try {
    await publishStored(subject, body, `${subject}.final`);
  } catch (err) {
    deps.log.warn({ taskId, err: messageOf(err) }, "result not stored in the events stream; the delivery is handed back to store it");
    throw new ResultNotStoredError(taskId, err);
  }
}

/** A task's result its events stream did not take: the run hands the delivery back, and the redelivery stores it. */
export class ResultNotStoredError extends Error {
  override name = "ResultNotStoredError";
  constructor(taskId: TaskId, cause: unknown) {
    super(`the result of task '${taskId}' was not stored in the events stream: ${messageOf(cause)}`, { cause });
  }
}

/**
 * Stores the final state under the claim, then publishes the last event and the result: stored before announced. An
 * outcome the store refuses for good (too large) is replaced by a failure saying so, stored and published once.
 */
export async function finish(env: RunEnv, task: RunningTask, context: TaskContext, state: TaskState): Promise<FinishOutput> {
  const { deps, store } = env;
  let outcome = outcomeOf(task.claim.record.taskId, context, state);
  const seq = task.seq + 1;
  const write = () =>
    writeClaimed(store, task.claim, (current) =>
      Object.assign({}, current, { state, result: outcome, seq, updatedAt: deps.now().toISOString() }),
    );
  let written: Awaited<ReturnType<typeof write>>;
  try {
    written = await write();
  } catch (err) {
    if (!isPermanentStoreError(err) || (state === "failed" && outcome.content === "")) throw err;
    deps.log.error({ taskId: task.claim.taskId, bytes: err.bytes, err: err.message }, "task outcome refused by the store; the task fails");
    context = failedContext(task.claim.record, unstorableMessage("outcome", err));
    state = "failed";
    outcome = outcomeOf(task.claim.record.taskId, context, state);
    written = await write();
  }
  if (written === "lost") return "lost";
  // Ended once its final record is stored, even should its result be stored only at a redelivery.
  const { record } = task.claim;
  deps.metrics?.taskEnded({
    state,
    type: env.taskType(record.xml),
    seconds: Math.max(0, deps.now().getTime() - Date.parse(record.submittedAt)) / 1000,
  });
  env.publishEvent(task.claim.taskId, seq, `task.${state}`, state, state === "failed" ? context.result?.error?.message : undefined);
  // The result follows the task's events into the events stream: a replay ends with it.
  const body = encode(TaskOutcome, fitOutcome(outcome, deps.bus.maxMessageBytes));
  await env.publishEvent.afterEvents(task.claim.taskId, () => publishResult(env.deps, env.publishStored, task.claim.taskId, body));
  return "written";
}

/**
 * A redelivered task is final: its owner stored the outcome, and usually published it and lost only the ack. When
 * it died between storing and publishing, or its result write failed ({@link ResultNotStoredError}), the result is
 * not in the events stream: publish it now, once.
 */
export async function publishLostResult(env: RunEnv, record: TaskRecord): Promise<void> {
  const { deps } = env;
  if (env.lastPublished === undefined || record.result === undefined) return;
  if ((await env.lastPublished(deps.subjects.taskResult(record.taskId))) !== undefined) return;
  deps.log.warn({ taskId: record.taskId }, "final task's result was never published; publishing it");
  // Its last event, unless stored already, right after the last one stored (the record's seq may count events its
  // owner never stored).
  const last = await lastStoredEvent(env.lastPublished, deps.subjects, record.taskId);
  const type = `task.${record.state}`;
  if (last?.type !== type)
    env.publishEvent(
      record.taskId,
      last === undefined ? (record.seq ?? 1) : last.seq + 1,
      type,
      record.state,
      record.state === "failed" ? record.result.error?.message : undefined,
    );
  const body = encode(TaskOutcome, fitOutcome(record.result, deps.bus.maxMessageBytes));
  await env.publishEvent.afterEvents(record.taskId, () => publishResult(env.deps, env.publishStored, record.taskId, body));
}

/**
 * The last event of `taskId` stored in the events stream, read with `lastPublished` (see DirectorConfig); `undefined`
 * when events are not stored, none is, or it cannot be read.
 */
export async function lastStoredEvent(
  lastPublished: LastPublished | undefined,
  subjects: ActorDeps["subjects"],
  taskId: TaskId,
): Promise<TaskEvent | undefined> {
  const last = await lastPublished?.(subjects.taskEvents(taskId)).catch(() => undefined);
  const event = last === undefined ? undefined : decode(TaskEvent, last);
  return event?.ok === true ? event.value : undefined;
}
