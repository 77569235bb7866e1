/**
 * The events a Director sent without an acknowledgement, kept until a later acknowledged write on the same connection
 * vouches for them (actors/director/event-publisher.ts): the stream stores one connection's writes in the order sent,
 * so a write acknowledged with nothing lost since an event was sent tells that the event is stored too.
 */
import type { TaskId } from "../../protocol/index.js";

/** How long after an event sent without acknowledgement the next event is sent with one, to vouch for it. */
export const FENCE_MS = 50;

/** Writes to the events stream that it stores in the order one connection sends them. */
export interface OrderedWrites {
  /** Whether the stream does so now: true on a server in no cluster, with an events stream of one replica. */
  holds(): boolean;
  /**
   * Sends a write under message id `id`, asking for no acknowledgement. It may wait for the connection's next write
   * (a few ms at most) and go out just before it: it is never overtaken by a later write of the connection.
   */
  send(subject: string, data: Uint8Array, id: string): void;
  /**
   * Counts what can lose a write sent without acknowledgement: the connection lost, the stream made again. A write
   * sent before an acknowledged one, with this count the same at both, is stored.
   */
  losses(): number;
}

/** An event as it is written to the events stream. */
export interface EventWrite {
  readonly subject: string;
  readonly body: Uint8Array;
  /** Its message id: a repeat is kept once. */
  readonly id: string;
  readonly seq: number;
}

/** An event sent without acknowledgement, with {@link OrderedWrites.losses} when it was sent. */
interface Sent extends EventWrite {
  readonly losses: number;
}

/** One task's events sent without acknowledgement, in the order sent. */
export interface TaskSent {
  readonly events: Sent[];
  /** Nothing more to do for them: stored again already, or the task is another Director's now. */
  done: boolean;
}

/** Events of several tasks, taken together to be vouched for by one acknowledged write. */
export type Batch = Map<TaskId, TaskSent>;

/** The events one Director sent without acknowledgement that no acknowledged write vouched for yet. */
export class Vouching {
  readonly writes: OrderedWrites;
  /** Not under an acknowledged write yet. */
  #kept: Batch = new Map();
  /** Taken by an acknowledged write that has not come back yet. */
  readonly #taken = new Set<Batch>();
  /** Set {@link FENCE_MS} after the oldest event kept was sent. */
  #ackNext = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** {@link OrderedWrites.losses} as last seen. */
  #losses: number;

  constructor(writes: OrderedWrites) {
    this.writes = writes;
    this.#losses = writes.losses();
  }

  /** Sends `event` of `taskId` without acknowledgement, and keeps it. */
  send(taskId: TaskId, event: EventWrite): void {
    const losses = this.writes.losses();
    // Nothing waits to be vouched for: the time counts from this event.
    if (this.#kept.size === 0) this.#ackNext = false;
    try {
      this.writes.send(event.subject, event.body, event.id);
    } catch {
      // Not sent (the connection is closing): kept like any other, and stored again unless something vouches for it.
    }
    const sent: Sent = { subject: event.subject, body: event.body, id: event.id, seq: event.seq, losses };
    const task = this.#kept.get(taskId);
    if (task === undefined) this.#kept.set(taskId, { events: [sent], done: false });
    else task.events.push(sent);
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#ackNext = true;
      }, FENCE_MS);
      this.#timer.unref?.();
    }
  }

  /** Whether the next event goes with an acknowledgement: events have waited {@link FENCE_MS} for one. */
  get due(): boolean {
    return this.#ackNext && this.#kept.size > 0;
  }

  /** Every event kept, for a write sent now to vouch for; give it back to {@link settle}. */
  take(): Batch {
    this.#ackNext = false;
    const batch = this.#kept;
    this.#kept = new Map();
    this.#taken.add(batch);
    return batch;
  }

  /** The events kept of `taskId`, for its result to vouch for (none: undefined); give them back to {@link unvouched}. */
  takeTask(taskId: TaskId): TaskSent | undefined {
    const task = this.#kept.get(taskId);
    this.#kept.delete(taskId);
    return task;
  }

  /**
   * The write that took `batch` came back, acknowledged (`acked`) or not: what it could not vouch for, by task, to be
   * stored again.
   */
  settle(batch: Batch, acked: boolean): [TaskId, EventWrite[]][] {
    this.#taken.delete(batch);
    const losses = acked ? this.writes.losses() : undefined;
    return [...batch].map(([taskId, task]) => [taskId, this.unvouched(task, losses)]);
  }

  /** The events of `task` that a write that came back with `losses` then (undefined: not acknowledged) cannot vouch for. */
  unvouched(task: TaskSent | undefined, losses: number | undefined): EventWrite[] {
    if (task === undefined || task.done) return [];
    return task.events.filter((e) => e.losses !== losses);
  }

  /**
   * After a loss (the connection lost, the stream made again) since last asked: every event not vouched for yet, by
   * task in the order sent, to be stored again before anything newer is sent. Empty when nothing was lost.
   */
  lost(): [TaskId, EventWrite[]][] {
    const losses = this.writes.losses();
    if (losses === this.#losses) return [];
    this.#losses = losses;
    const batches = [...this.#taken, this.#kept];
    this.#kept = new Map();
    this.#ackNext = false;
    const again: [TaskId, EventWrite[]][] = [];
    for (const batch of batches)
      for (const [taskId, task] of batch) {
        if (task.done) continue;
        task.done = true;
        again.push([taskId, task.events]);
      }
    return again;
  }

  /** `taskId` is another Director's now: none of its events is stored again. */
  cut(taskId: TaskId): void {
    for (const batch of [this.#kept, ...this.#taken]) {
      const task = batch.get(taskId);
      if (task !== undefined) task.done = true;
    }
    this.#kept.delete(taskId);
  }
}
