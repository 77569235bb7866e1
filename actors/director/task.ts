/**
 * One task as its Director runs it under a claim: the public state of its machine, its outcome, and the heartbeat
 * that keeps its intake message and checkpoints its seq and snapshot.
 */
import { createActor, fromPromise, type Actor, type InspectionEvent, type Snapshot } from "xstate";
import { taskMachine, type Announcement, type TaskContext, type TaskInput } from "../../machines/director/task.js";
import { TaskState as TaskStateSchema, type TaskId, type TaskOutcome, type TaskRecord, type TaskResult, type TaskState } from "../../protocol/index.js";
import { isPermanentStoreError, type StoreRefusedError, type TaskStore, type WorkItem } from "../bus.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { PENDING_CLAIM_MS, writeClaimed, type Claim } from "./records.js";
import { persisted } from "./snapshot.js";
import { systemScope } from "../system-scope.js";

/** The effects of one task's machine, as its Director provides them. */
export interface TaskEffects {
  evaluate(input: TaskInput, signal: AbortSignal): Promise<TaskResult>;
  announce(announcement: Announcement): void;
}

/** The effects of each task actor, by its actor system (a task actor and its evaluation share one). */
const tasks = systemScope<TaskEffects>("a task actor runs without its effects");
const effectsOf = (system: unknown) => tasks.of(system);

/** The task machine with its effects provided once per process: they act for the task whose actor system runs them. */
let provided: ReturnType<typeof provideTaskMachine> | undefined;
const provideTaskMachine = () =>
  taskMachine.provide({
    actors: { evaluate: fromPromise<TaskResult, TaskInput>(({ input, signal, system }) => effectsOf(system).evaluate(input, signal)) },
    actions: { announce: ({ system }, a) => effectsOf(system).announce(a) },
  });

/** The task machine as the Director runs it. */
export type TaskActor = Actor<ReturnType<typeof provideTaskMachine>>;

/** Creates the actor of one task with `effects` (a restored snapshot, when given, is not started yet). */
export function createTaskActor(
  effects: TaskEffects,
  options: { input: TaskInput; snapshot?: Snapshot<unknown>; inspect?: (event: InspectionEvent) => void },
): TaskActor {
  return tasks.create(effects, () => createActor((provided ??= provideTaskMachine()), options));
}

/** A task this process runs under a claim. */
export interface RunningTask {
  readonly claim: Claim;
  /** The intake delivery to signal progress on and to ack; a redelivery to this process replaces it. */
  item: WorkItem;
  /** The last event seq published. */
  seq: number;
  /** The last seq stored in the record. */
  checkpointed: number;
  /** Set when another Director took the claim over. */
  lost: boolean;
  actor: TaskActor | undefined;
  /** Hands the task back (the process is draining): its intake message is naked for another Director. */
  release?: () => void;
}

/** Progress signals go out three times per ack wait, so one late signal does not cost the task its claim. */
export const heartbeatMs = (ackWaitMs: number): number => Math.max(100, Math.floor(ackWaitMs / 3));

/** The outcome published and stored for a task that ended in `state`. */
export function outcomeOf(taskId: TaskId, context: TaskContext, state: TaskState): TaskOutcome {
  const result = context.result;
  return {
    taskId,
    status: state === "completed" ? "COMPLETE" : state === "cancelled" ? "CANCELLED" : "FAILED",
    content: result?.content ?? "",
    notes: result?.notes ?? {},
    ...(result?.parsedContent === undefined ? {} : { parsedContent: result.parsedContent }),
    ...(result?.error ? { error: result.error } : {}),
  };
}

/** The public state a task machine snapshot is in (its tag); a snapshot without tags (one in error) counts as running. */
export function stateOf(snapshot: { readonly tags?: Iterable<string> | undefined }): TaskState {
  for (const tag of snapshot.tags ?? []) {
    const state = TaskStateSchema.safeParse(tag);
    if (state.success) return state.data;
  }
  return "running";
}

/** The context of a task that fails with `message` without its machine (it could not be restored, or it broke). */
export function failedContext(record: TaskRecord, message: string): TaskContext {
  const result: TaskResult = { content: "", status: "FAILED", notes: {}, error: { type: "TASK_FAILURE", reason: "unexpected_error", message } };
  return { taskId: record.taskId, xml: record.xml, inputs: record.inputs, result, cancelled: false };
}

/** The message of a task that fails because its record cannot be stored (`what`: the checkpoint, the outcome). */
export function unstorableMessage(what: string, err: StoreRefusedError): string {
  return `the task's ${what} (${err.bytes} bytes) cannot be stored: ${err.message}`;
}

/**
 * Signals progress on the intake item below its ack wait and checkpoints the event seq under the claim; a
 * checkpoint that finds the claim gone means another Director owns the task now. A checkpoint the store refuses for
 * good (too large: {@link isPermanentStoreError}) is not retried: `refused` resolves once, and no checkpoint follows.
 */
export function startHeartbeat(deps: ActorDeps, store: TaskStore, ackWaitMs: number, task: RunningTask, onLost: () => void) {
  let resolveLost: () => void = () => undefined;
  const lost = new Promise<void>((resolve) => (resolveLost = resolve));
  let resolveRefused: (err: StoreRefusedError) => void = () => undefined;
  const refused = new Promise<StoreRefusedError>((resolve) => (resolveRefused = resolve));
  let refusal: StoreRefusedError | undefined;
  let busy: Promise<void> | undefined;
  // A pending claim is stored by the first checkpoint once it is due (or by the final record of a task that ends sooner).
  let claimDue = task.claim.pending !== true;
  const dueTimer = claimDue ? undefined : setTimeout(() => ((claimDue = true), checkpoint()), PENDING_CLAIM_MS);
  const checkpoint = () => {
    if (busy || refusal || (task.claim.pending === true ? !claimDue : task.seq === task.checkpointed)) return;
    // Written once what the change set off went out (the evaluation request first). A task that ended meanwhile is
    // not: its final record follows at once.
    busy = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => (ended() ? undefined : write()))
      .finally(() => (busy = undefined));
  };
  const ended = () => {
    const status = task.actor?.getSnapshot().status;
    return status === "done" || status === "error";
  };
  // The timer signals progress; a checkpoint on a change of state does not need to (the timer's next one comes in time).
  const beat = () => {
    task.item.working();
    claimDue = true;
    checkpoint();
  };
  const write = async () => {
    const seq = task.seq;
    if (refusal) return;
    try {
      const machine = task.actor ? { machine: persisted(task.actor) } : {};
      const written = await writeClaimed(store, task.claim, (current) => ({ ...current, ...machine, seq, updatedAt: deps.now().toISOString() }));
      if (written === "lost") {
        onLost();
        resolveLost();
      } else task.checkpointed = seq;
    } catch (err) {
      if (isPermanentStoreError(err)) {
        refusal = err;
        deps.log.error({ taskId: task.claim.taskId, bytes: err.bytes, err: err.message }, "checkpoint refused by the store; the task fails");
        resolveRefused(err);
      } else deps.log.warn({ taskId: task.claim.taskId, err: messageOf(err) }, "checkpoint failed; retried at the next heartbeat");
    }
  };
  const timer = setInterval(beat, heartbeatMs(ackWaitMs));
  return {
    lost,
    /** Resolves with the store's refusal of a checkpoint (permanent: the task is to fail). */
    refused,
    stop: () => {
      clearInterval(timer);
      clearTimeout(dueTimer);
    },
    checkpoint,
    /** Writes a checkpoint now, after the one in flight (a task handed back is resumed from it). */
    flush: async (): Promise<void> => {
      await busy;
      await write();
    },
    /** Resolves once no checkpoint is being written (the final write then follows it instead of racing it). */
    idle: (): Promise<void> => busy ?? Promise.resolve(),
  };
}
