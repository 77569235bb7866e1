/**
 * One task as its Director runs it under a claim: its actor (the machine provided once per Director), the public state
 * of its machine, its outcome, and the checkpoints of its seq and snapshot.
 */
import { fromPromise, type Actor, type Snapshot } from "xstate";
import type { CheckpointOutput } from "../../machines/director/run.js";
import { taskMachine, type Announcement, type TaskContext, type TaskInput } from "../../machines/director/task.js";
import {
  taskFailure,
  TaskState as TaskStateSchema,
  type TaskId,
  type TaskOutcome,
  type TaskRecord,
  type TaskResult,
  type TaskState,
} from "../../protocol/index.js";
import { isPermanentStoreError, type StoreRefusedError, type TaskItem, type TaskStore } from "../bus.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { writeClaimed, type Claim } from "./records.js";
import { persisted } from "./snapshot.js";
import type { TaskSpan } from "../tracing.js";

/** The effects of one task's machine, as its Director provides them. */
export interface TaskEffects {
  evaluate(input: TaskInput, signal: AbortSignal): Promise<TaskResult>;
  announce(announcement: Announcement): void;
}

/** The task machine as the Director runs it: the child of its delivery's run actor (actors/director/run-actors.ts). */
export type TaskActor = Actor<typeof taskMachine>;

/** Where a task's actor starts: from its input, or from its stored snapshot (a task taken over). */
export interface TaskLaunch {
  input: TaskInput;
  snapshot?: Snapshot<unknown>;
}

/** The task machine of a Director, and the effects each of its tasks acts through. */
export interface TaskActors {
  /** The task machine provided once per Director; each actor finds its task's {@link TaskEffects} by the task's id. */
  readonly machine: typeof taskMachine;
  /** Lets the actor of task `taskId` act through `effects`; returns their release, once its delivery has ended. */
  register(taskId: TaskId, effects: TaskEffects): () => void;
}

/**
 * The task machine provided once per Director (a machine built per task cost as much heap as the task itself): its
 * `evaluate` and `announce` find their task's {@link TaskEffects} in a map this Director owns, by the task's id. The id
 * is the scope's key, rather than a key made here: it is in the machine's context and in the evaluation's input
 * already, and a snapshot restored by the Director that takes the task over (./snapshot.ts) holds the same one, in its
 * context and in the input of its invoked evaluation, which restarts with it. A Director runs a task under one claim
 * at a time (its `owned` tasks, by id).
 */
export function taskActors(): TaskActors {
  const tasks = new Map<TaskId, TaskEffects>();
  const effectsOf = (taskId: TaskId): TaskEffects => {
    const effects = tasks.get(taskId);
    if (effects === undefined) throw new Error(`task '${taskId}': its actor runs without its effects`);
    return effects;
  };
  return {
    machine: taskMachine.provide({
      actors: { evaluate: fromPromise<TaskResult, TaskInput>(({ input, signal }) => effectsOf(input.taskId).evaluate(input, signal)) },
      actions: { announce: ({ context }, a) => effectsOf(context.taskId).announce(a) },
    }),
    register: (taskId, effects) => {
      tasks.set(taskId, effects);
      // A newer actor of the same task (a later delivery, once this one ended) keeps its own effects.
      return () => void (tasks.get(taskId) === effects && tasks.delete(taskId));
    },
  };
}

/** A task this process runs under a claim. */
export interface RunningTask {
  readonly claim: Claim;
  /** The intake delivery to signal progress on and to ack; a redelivery to this process replaces it. */
  item: TaskItem;
  /** The last event seq published. */
  seq: number;
  /** Set when another Director took the claim over: no event of the task is published any more. */
  lost: boolean;
  /** Nothing of the task ran before this claim (its first delivery): its evaluation looks for nothing earlier. */
  readonly fresh: boolean;
  /** The task's actor, once its run invoked it. */
  actor: TaskActor | undefined;
  /** Drops the task's effects from its Director's map of them (./task.ts: {@link taskActors}), once its delivery ended. */
  release?: () => void;
  /** This delivery's `director.run` span (docs/traces.md). */
  span?: TaskSpan;
  /**
   * Stops the task here: the Director that took it over said so (actors/director/takeover.ts). Resolves once no event
   * of it is in flight.
   */
  supersede?: () => Promise<void>;
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
  const result = taskFailure("unexpected_error", message);
  return { taskId: record.taskId, xml: record.xml, inputs: record.inputs, result, cancelled: false };
}

/** The message of a task that fails because its record cannot be stored (`what`: the checkpoint, the outcome). */
export function unstorableMessage(what: string, err: StoreRefusedError): string {
  return `the task's ${what} (${err.bytes} bytes) cannot be stored: ${err.message}`;
}

/**
 * Writes the checkpoints of a task's run: its event seq and its machine's snapshot, under the claim. When to write is
 * the run machine's (machines/director/run.ts: `running`'s `stored`, `writing` and `waiting`); this carries a write
 * out, one after another (a write waits for the one before it), and says what it came to. A write that finds the
 * claim gone marks the task `lost`; one the store refuses for good ({@link isPermanentStoreError}) is reported
 * `refused` with the reason, and the run fails the task.
 */
export function checkpointer(deps: ActorDeps, store: TaskStore, task: RunningTask) {
  let last: Promise<unknown> = Promise.resolve();
  // Ended, or stopped by its run (a stopped machine's snapshot is no state to resume from).
  const ended = () => {
    const status = task.actor?.getSnapshot().status;
    return status !== undefined && status !== "active";
  };
  const write = async (): Promise<CheckpointOutput> => {
    const seq = task.seq;
    try {
      const machine = task.actor ? { machine: persisted(task.actor) } : {};
      const written = await writeClaimed(store, task.claim, (current) => ({
        ...current,
        ...machine,
        seq,
        updatedAt: deps.now().toISOString(),
      }));
      if (written === "lost") {
        task.lost = true;
        deps.log.warn({ taskId: task.claim.taskId }, "another Director took the task over; stopping here");
        return { kind: "lost" };
      }
      return { kind: "written", seq };
    } catch (err) {
      if (isPermanentStoreError(err)) {
        deps.log.error(
          { taskId: task.claim.taskId, bytes: err.bytes, err: err.message },
          "checkpoint refused by the store; the task fails",
        );
        // The task's state cannot be stored (too large): retrying cannot help, and running on unstored would lose
        // it at the next takeover.
        return { kind: "refused", message: unstorableMessage("checkpoint (its state and template)", err) };
      }
      deps.log.warn({ taskId: task.claim.taskId, err: messageOf(err) }, "checkpoint failed; retried at the next heartbeat");
      return { kind: "failed" };
    }
  };
  const queued = <T>(next: () => Promise<T>): Promise<T> => {
    const done = last.then(next);
    last = done.catch(() => undefined);
    return done;
  };
  return {
    /**
     * Writes a checkpoint once what the change set off went out (the evaluation request first); a task that ended
     * meanwhile is not written (its final record follows at once), nor one its run stopped (the run has left it).
     */
    checkpoint: (): Promise<CheckpointOutput> =>
      queued(async () => {
        await new Promise<void>((resolve) => setImmediate(resolve));
        return ended() ? { kind: "skipped" } : write();
      }),
    /** Writes a checkpoint now, after the one in flight (a task handed back is resumed from it). */
    flush: async (): Promise<void> => void (await queued(write)),
    /** Resolves once no checkpoint is being written (the final write then follows it instead of racing it). */
    idle: (): Promise<unknown> => last,
  };
}
