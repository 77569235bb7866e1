/**
 * A Director's stored history of task events (protocol/history.ts). Each event goes out live at once; its body is
 * kept here too, per task, and the task's kept events are stored as one message on `<root>.tasks.<id>.history`: at
 * the task's end (before its result, {@link EventHistory.flush}), when a batch would outgrow one message, and at the
 * latest `flushMs` after the first event kept (a long task, an event of a task another Director runs; a task's
 * `task.queued` waits longer, see {@link EventHistory.keep}). A crash loses the events of at most that window from the
 * stored history (a subscriber saw them live). Without a store (an
 * in-process transport keeps no events), nothing is kept.
 */
import { encodeTaskHistory, historyOverhead } from "../../protocol/index.js";
import { messageOf, type ActorDeps } from "../deps.js";

/** How long an event waits at most to be stored with its task's history (`DIRIGENT_HISTORY_FLUSH_MS`). */
export const DEFAULT_HISTORY_FLUSH_MS = 500;

/** Bytes of a message left for its headers (the message id). */
const HEADERS_MARGIN = 512;

/** Stores one message with an acknowledgement; `id` names it once (a JetStream message id). */
export type StoreMessage = (subject: string, data: Uint8Array, id: string) => Promise<void>;

/** The events kept of the tasks whose events this Director published. */
export interface EventHistory {
  /**
   * Keeps an event's body (as published) for the task's stored history. `queued`: the event of a task not running yet
   * (`task.queued`), stored with the task's next event here or after {@link QUEUED_FLUSH_FACTOR} windows: a task that
   * waits in the intake (a backlog) then costs no batch of its own.
   */
  keep(taskId: string, body: Uint8Array, queued?: boolean): void;
  /**
   * Stores the task's events kept so far. Its write goes out before this returns, so a message published after it on
   * the same connection (the result) is stored after it. Never rejects: a failure is logged.
   */
  flush(taskId: string): Promise<void>;
  /** Stores every task's kept events (the Director stops). */
  close(): Promise<void>;
}

interface Kept {
  bodies: Uint8Array[];
  bytes: number;
  timer: ReturnType<typeof setTimeout>;
  /** Its timer is the longer one of a task not running yet. */
  queued: boolean;
}

/** How many flush windows the event of a task still in the intake waits for the task's next event. */
export const QUEUED_FLUSH_FACTOR = 10;

const NO_HISTORY: EventHistory = { keep: () => undefined, flush: async () => undefined, close: async () => undefined };

/** The {@link EventHistory} of a Director storing through `store` (none: nothing is kept); `owner` names its batches. */
export function eventHistory(deps: ActorDeps, store: StoreMessage | undefined, flushMs: number, owner: string): EventHistory {
  if (store === undefined) return NO_HISTORY;
  const kept = new Map<string, Kept>();
  /** The bytes a batch may hold: one message, less a margin for its headers. */
  const room = (deps.bus.maxMessageBytes ?? Infinity) - HEADERS_MARGIN;
  let batches = 0;
  const flush = (taskId: string): Promise<void> => {
    const batch = kept.get(taskId);
    if (batch === undefined) return Promise.resolve();
    kept.delete(taskId);
    clearTimeout(batch.timer);
    const subject = deps.subjects.taskHistory(taskId);
    return store(subject, encodeTaskHistory(batch.bodies), `${owner}.${++batches}`).catch((err: unknown) =>
      deps.log.info({ taskId, events: batch.bodies.length, err: messageOf(err) }, "task events not stored in the events stream"),
    );
  };
  const arm = (taskId: string, queued: boolean) => {
    const timer = setTimeout(() => void flush(taskId), queued ? flushMs * QUEUED_FLUSH_FACTOR : flushMs);
    timer.unref?.();
    return timer;
  };
  return {
    keep(taskId, body, queued = false) {
      let batch = kept.get(taskId);
      if (batch !== undefined && batch.bytes + body.byteLength + historyOverhead(batch.bodies.length + 1) > room) {
        void flush(taskId);
        batch = undefined;
      }
      if (batch === undefined) kept.set(taskId, (batch = { bodies: [], bytes: 0, timer: arm(taskId, queued), queued }));
      else if (batch.queued && !queued) {
        clearTimeout(batch.timer);
        batch.timer = arm(taskId, false);
        batch.queued = false;
      }
      batch.bodies.push(body);
      batch.bytes += body.byteLength;
    },
    flush,
    async close() {
      await Promise.all([...kept.keys()].map(flush));
    },
  };
}
