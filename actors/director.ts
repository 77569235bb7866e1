/**
 * The Director role: accepts submissions, owns one {@link taskMachine} actor per task, publishes lifecycle
 * events and the result, and answers `get` and `cancel` for any task.
 *
 * Subjects: `<root>.tasks.submit`, `<root>.tasks.*.get`, `<root>.tasks.*.cancel` (queue group `director`),
 * the intake work queue, `<root>.progress.*` and `<root>.control.cancel` (every Director; each acts only on the
 * tasks it owns).
 */
import { createActor, fromPromise, type Actor } from "xstate";
import { taskMachine, type TaskContext } from "../machines/task.js";
import {
  CancelBroadcast,
  decode,
  encode,
  encodeJson,
  errorReply,
  EvaluateReply,
  FINAL_STATES,
  parseTaskId,
  Progress,
  TaskEvent,
  TaskOutcome,
  TaskRecord,
  TaskState as TaskStateSchema,
  type CancelReply,
  type EvaluateRequest,
  type TaskId,
  type TaskState,
  type TaskStatusReply,
} from "../protocol/index.js";
import type { BusMessage, TaskStore, WorkItem, WorkQueue } from "./bus.js";
import { messageOf, type ActorDeps, type RoleHandle } from "./deps.js";
import { handleSubmit } from "./intake.js";
import { ask } from "./serve.js";

/** Director configuration. */
export interface DirectorConfig {
  /** Tasks run at once by this process. */
  concurrency: number;
  /** Longest a task may run before it fails with a timeout. */
  taskTimeoutMs: number;
}

type TaskActor = Actor<typeof taskMachine>;

/** Starts the Director role. */
export function startDirector(deps: ActorDeps, store: TaskStore, queue: WorkQueue, config: DirectorConfig): RoleHandle {
  const { bus, subjects, log } = deps;
  const owned = new Map<string, TaskActor>();

  const publishEvent = (taskId: string, seq: number, type: string, state: TaskState, message?: string, data?: Record<string, unknown>) => {
    const event: TaskEvent = {
      taskId: taskId as TaskId,
      seq,
      type,
      state,
      at: deps.now().toISOString(),
      ...(message === undefined ? {} : { message }),
      ...(data === undefined ? {} : { data }),
    };
    bus.publish(subjects.taskEvents(taskId), encode(TaskEvent, event));
  };

  const readRecord = async (taskId: string): Promise<TaskRecord | undefined> => {
    const bytes = await store.get(taskId);
    if (!bytes) return undefined;
    const decoded = decode(TaskRecord, bytes);
    if (!decoded.ok) throw new Error(`stored record of task '${taskId}' is unreadable: ${decoded.error.message}`);
    return decoded.value;
  };

  const stateOf = (actor: TaskActor): TaskState => {
    for (const tag of actor.getSnapshot().tags) {
      const state = TaskStateSchema.safeParse(tag);
      if (state.success) return state.data;
    }
    return "running";
  };

  /** Records the final state, then publishes the last event and the result: stored before announced. */
  const finish = async (record: TaskRecord, context: TaskContext, state: TaskState, seq: number) => {
    const result = context.result;
    const outcome: TaskOutcome = {
      taskId: record.taskId,
      status: state === "completed" ? "COMPLETE" : state === "cancelled" ? "CANCELLED" : "FAILED",
      content: result?.content ?? "",
      notes: result?.notes ?? {},
      ...(result?.parsedContent === undefined ? {} : { parsedContent: result.parsedContent }),
      ...(result?.error ? { error: result.error } : {}),
    };
    await store.put(record.taskId, encode(TaskRecord, { ...record, state, result: outcome, updatedAt: deps.now().toISOString() }));
    publishEvent(record.taskId, seq, `task.${state}`, state, state === "failed" ? result?.error?.message : undefined);
    bus.publish(subjects.taskResult(record.taskId), encode(TaskOutcome, outcome));
  };

  const run = async (item: WorkItem) => {
    const record = await readRecord(item.id);
    if (!record) {
      log.warn({ taskId: item.id }, "queued task has no record; dropped");
      await item.ack();
      return;
    }
    if (FINAL_STATES.has(record.state)) {
      await item.ack();
      return;
    }
    let seq = 1;
    const actor = createActor(
      taskMachine.provide({
        actors: {
          evaluate: fromPromise(async ({ input, signal }) => {
            const request: EvaluateRequest = { type: "evaluator.evaluate", taskId: record.taskId, xml: input.xml, inputs: input.inputs };
            const reply = await ask(deps, subjects.evaluate, request, EvaluateReply, { timeoutMs: config.taskTimeoutMs, signal });
            return reply.result;
          }),
        },
        actions: {
          announce: (_, a) => publishEvent(record.taskId, ++seq, a.event, a.state, a.message, a.data),
        },
      }),
      { input: { taskId: record.taskId, xml: record.xml, inputs: record.inputs } },
    );
    owned.set(record.taskId, actor);
    const done = new Promise<void>((resolve) => actor.subscribe({ complete: resolve, error: () => resolve() }));
    try {
      actor.start();
      if (record.cancelRequested) {
        actor.send({ type: "task.cancel" });
      } else {
        await store.put(record.taskId, encode(TaskRecord, { ...record, state: "running", updatedAt: deps.now().toISOString() }));
        await item.ack();
        actor.send({ type: "task.start" });
      }
      await done;
      const snapshot = actor.getSnapshot();
      await finish(record, snapshot.context, stateOf(actor), ++seq);
      if (record.cancelRequested) await item.ack();
    } catch (err) {
      log.error({ taskId: record.taskId, err: messageOf(err) }, "task handling failed");
      actor.stop();
      item.nak();
    } finally {
      owned.delete(record.taskId);
    }
  };

  const get = async (msg: BusMessage) => {
    const taskId = parseTaskId(subjects.taskIdOf(msg.subject));
    if (!taskId) return void msg.respond(encodeJson(errorReply("INVALID_ID", `illegal task id in subject '${msg.subject}'`)));
    const record = await readRecord(taskId);
    if (!record) return void msg.respond(encodeJson(errorReply("NOT_FOUND", `no task '${taskId}'`)));
    const live = owned.get(taskId);
    const reply: TaskStatusReply = {
      taskId,
      state: live ? stateOf(live) : record.state,
      ...(record.result ? { result: record.result } : {}),
    };
    msg.respond(encodeJson(reply));
  };

  const cancel = async (msg: BusMessage) => {
    const taskId = parseTaskId(subjects.taskIdOf(msg.subject));
    if (!taskId) return void msg.respond(encodeJson(errorReply("INVALID_ID", `illegal task id in subject '${msg.subject}'`)));
    const record = await readRecord(taskId);
    if (!record) return void msg.respond(encodeJson(errorReply("NOT_FOUND", `no task '${taskId}'`)));
    if (FINAL_STATES.has(record.state)) {
      const reply: CancelReply = { taskId, state: record.state, cancelled: false };
      return void msg.respond(encodeJson(reply));
    }
    await store.put(taskId, encode(TaskRecord, { ...record, cancelRequested: true, updatedAt: deps.now().toISOString() }));
    bus.publish(subjects.cancelBroadcast, encode(CancelBroadcast, { type: "task.cancel", taskId }));
    const reply: CancelReply = { taskId, state: "cancelled", cancelled: true };
    msg.respond(encodeJson(reply));
  };

  const guarded = (name: string, fn: (msg: BusMessage) => Promise<void>) => async (msg: BusMessage) => {
    try {
      await fn(msg);
    } catch (err) {
      log.error({ subject: msg.subject, err: messageOf(err) }, `${name} failed`);
      msg.respond(encodeJson(errorReply("INTERNAL", messageOf(err))));
    }
  };

  const queueGroup = { queue: subjects.queue("director") };
  const subscriptions = [
    bus.subscribe(
      subjects.submit,
      async (msg) => {
        const reply = await handleSubmit(deps, store, queue, msg);
        if (reply?.status === "accepted") publishEvent(reply.taskId, 1, "task.queued", "queued", "queued");
      },
      queueGroup,
    ),
    bus.subscribe(subjects.anyTaskGet, guarded("get", get), queueGroup),
    bus.subscribe(subjects.anyTaskCancel, guarded("cancel", cancel), queueGroup),
    bus.subscribe(subjects.anyProgress, (msg) => {
      const decoded = decode(Progress, msg.data);
      if (decoded.ok) owned.get(decoded.value.taskId)?.send(decoded.value);
    }),
    bus.subscribe(subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (decoded.ok) owned.get(decoded.value.taskId)?.send({ type: "task.cancel" });
    }),
    queue.consume(run, { concurrency: config.concurrency }),
  ];

  return {
    role: "director",
    async stop() {
      await Promise.all(subscriptions.map((s) => s.unsubscribe()));
      for (const actor of owned.values()) actor.stop();
    },
  };
}
