/**
 * The Director's answers to `<root>.tasks.<id>.get` and `.cancel`, for any task: from its record, from the task's
 * live machine when this Director runs it, or from the intake queue when it is only queued there (not claimed yet, or
 * running under a pending claim in another Director: then its last event says how far it got).
 */
import { fitOutcome } from "./message-fit.js";
import { reportedState } from "../../machines/director/task.js";
import {
  CancelBroadcast,
  encode,
  errorReply,
  parseTaskId,
  Requests,
  TaskOutcome,
  type CancelReply,
  type TaskRecord,
  type TaskState,
  type TaskStatusReply,
  type TaskId,
} from "../../protocol/index.js";
import type { BusMessage, LastPublished, TaskStore, WorkQueue } from "../bus.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { respond } from "../serve.js";
import { readTaskRecord, requestCancel } from "./records.js";
import { queuedRecord } from "./intake.js";
import { lastStoredEvent } from "./results.js";

/** What the requests need of the Director that serves them. */
export interface TaskRequestHooks {
  /** The state of the task's machine when this Director runs it. */
  liveState(taskId: TaskId): TaskState | undefined;
  /** Publishes a task event. */
  publishEvent(taskId: TaskId, seq: number, type: string, state: TaskState, message?: string): void;
  /** The last message stored on `subject` (the events stream), when events are stored. */
  lastPublished?: LastPublished;
  /** The type of a template's entry task, for metrics (see RunEnv). */
  taskType?: (xml: string) => string;
}

/** The `get` and `cancel` handlers of a Director. */
export function taskRequests(deps: ActorDeps, store: TaskStore, queue: WorkQueue, hooks: TaskRequestHooks) {
  const { bus, subjects, log } = deps;

  /** The record queued under `taskId` in the intake queue, with the queue item's sequence. */
  const queuedUnder = async (taskId: TaskId): Promise<{ record: TaskRecord; seq: number } | undefined> => {
    const item = await queue.peek(taskId);
    if (item === undefined) return undefined;
    const queued = queuedRecord(item.data);
    return queued.ok && queued.record !== undefined ? { record: queued.record, seq: item.seq } : undefined;
  };

  /**
   * The state of a task that has no record but its queue item: `queued`, or, when a Director started it under a pending
   * claim (its first second), the state its last event announced. An unreadable event counts as none.
   */
  const stateOfQueued = async (taskId: TaskId): Promise<TaskState> =>
    (await lastStoredEvent(hooks.lastPublished, subjects, taskId))?.state ?? "queued";

  const get = async (msg: BusMessage) => {
    const taskId = parseTaskId(subjects.taskIdOf(msg.subject));
    if (!taskId) return void respond(msg, Requests.taskGet, errorReply("INVALID_ID", `illegal task id in subject '${msg.subject}'`));
    const live = hooks.liveState(taskId);
    const stored = (await readTaskRecord(store, taskId))?.record;
    const record = stored ?? (await queuedUnder(taskId))?.record;
    const state = reportedState(live, stored === undefined && record !== undefined ? await stateOfQueued(taskId) : record?.state);
    if (state === undefined) return void respond(msg, Requests.taskGet, errorReply("NOT_FOUND", `no task '${taskId}'`));
    // A result too large for one message is cut to fit (actors/director/message-fit.ts); the record keeps it whole.
    const result = record?.result && fitOutcome(record.result, deps.bus.maxMessageBytes, 256);
    const reply: TaskStatusReply = { taskId, state, ...(result ? { result } : {}) };
    respond(msg, Requests.taskGet, reply);
  };

  const cancel = async (msg: BusMessage) => {
    const taskId = parseTaskId(subjects.taskIdOf(msg.subject));
    if (!taskId) return void respond(msg, Requests.taskCancel, errorReply("INVALID_ID", `illegal task id in subject '${msg.subject}'`));
    const outcome = await requestCancel(store, taskId, deps.now, () => queuedUnder(taskId));
    if (outcome.kind === "missing") return void respond(msg, Requests.taskCancel, errorReply("NOT_FOUND", `no task '${taskId}'`));
    if (outcome.kind === "final") {
      const reply: CancelReply = { taskId, state: outcome.record.state, cancelled: false };
      return void respond(msg, Requests.taskCancel, reply);
    }
    if (outcome.kind === "cancelled") {
      // Cancelled while queued: stored final above, announced here; its queue item goes (a Director that started it
      // meanwhile is told below, and finds the record final).
      const { record } = outcome;
      hooks.publishEvent(taskId, record.seq ?? 2, "task.cancelled", "cancelled", "cancelled");
      if (record.result) bus.publish(subjects.taskResult(taskId), encode(TaskOutcome, record.result));
      deps.metrics?.taskEnded({
        state: "cancelled",
        type: hooks.taskType?.(record.xml) ?? "unknown",
        seconds: Math.max(0, deps.now().getTime() - Date.parse(record.submittedAt)) / 1000,
      });
      await queue
        .discard(taskId, outcome.seq)
        .catch((err: unknown) => log.warn({ taskId, err: messageOf(err) }, "could not remove the cancelled task's queue item"));
    }
    bus.publish(subjects.cancelBroadcast, encode(CancelBroadcast, { type: "task.cancel", taskId }));
    const reply: CancelReply = { taskId, state: "cancelled", cancelled: true };
    respond(msg, Requests.taskCancel, reply);
  };

  return { get, cancel };
}
