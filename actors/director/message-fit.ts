/**
 * Events and results that must fit one message of the transport (`Bus.maxMessageBytes`): a publish of a larger
 * one would fail every time. The rule, documented in docs/protocol.md:
 *
 * - an event too large keeps its fields but `data`, which becomes `{"truncated": true, "bytes": <size of the whole
 *   event>}`, and its `message` is cut to {@link KEPT_MESSAGE_CHARS} characters;
 * - a result too large has its `content` cut to fit, `parsedContent` dropped, and the note `truncated` set to
 *   `{"bytes": <size of the whole result>}`. The task's record keeps the whole result (the store holds large values).
 */
import { encode, TaskEvent, TaskOutcome, type ForkOf, type TaskId, type TaskState } from "../../protocol/index.js";
import { randomUUID } from "node:crypto";
import { messageOf, type ActorDeps } from "../deps.js";

const encoder = new TextEncoder();

/** Characters of `message` an event cut to fit keeps. */
export const KEPT_MESSAGE_CHARS = 4096;

/** The body of `event`, cut to fit `maxBytes` (none: as it is). */
export function fitEvent(event: TaskEvent, maxBytes: number | undefined): Uint8Array {
  const body = encode(TaskEvent, event);
  if (maxBytes === undefined || body.byteLength <= maxBytes) return body;
  const { message, data: _data, ...rest } = event;
  const cut: TaskEvent = {
    ...rest,
    ...(message === undefined
      ? {}
      : { message: message.length > KEPT_MESSAGE_CHARS ? `${message.slice(0, KEPT_MESSAGE_CHARS)}…` : message }),
    data: { truncated: true, bytes: body.byteLength },
  };
  return encode(TaskEvent, cut);
}

/** `outcome`, its content cut to fit `maxBytes` once encoded (none: as it is). */
export function fitOutcome(outcome: TaskOutcome, maxBytes: number | undefined, overhead = 0): TaskOutcome {
  const bytes = encode(TaskOutcome, outcome).byteLength + overhead;
  if (maxBytes === undefined || bytes <= maxBytes) return outcome;
  const { parsedContent: _parsed, ...rest } = outcome;
  const notes = { ...outcome.notes, truncated: { bytes } };
  // Cut by the share of the content's encoded bytes that is too much, again until it fits.
  let content = outcome.content;
  for (;;) {
    const fitted: TaskOutcome = { ...rest, notes, content };
    const size = encode(TaskOutcome, fitted).byteLength + overhead;
    if (size <= maxBytes || content === "") return fitted;
    const contentBytes = encoder.encode(JSON.stringify(content)).byteLength;
    const keep = 1 - (size - maxBytes + 64) / contentBytes;
    content = keep <= 0 ? "" : content.slice(0, Math.floor(content.length * keep));
  }
}

/** Publishes a task event (`seq` is the task's next). */
export type PublishEvent = (
  taskId: TaskId,
  seq: number,
  type: string,
  state: TaskState,
  message?: string,
  data?: Record<string, unknown>,
  forkOf?: ForkOf,
) => void;

/** A {@link PublishEvent} that tells when a task's events published so far are stored. */
export interface EventPublisher extends PublishEvent {
  /**
   * Stores what follows `taskId`'s events (its result) by `store`: once they are all stored, or, where the events
   * stream stores writes in the order sent, at once, right behind the last one. Resolves (or rejects, as `store`
   * does) once both that and the events are done.
   */
  afterEvents(taskId: TaskId, store: () => Promise<void>): Promise<void>;
  /**
   * Sends no event of `taskId` published so far that is not sent yet, and does not ask again for the one being stored
   * (another Director owns the task now); resolves once that one's attempt under way has ended.
   */
  cut(taskId: TaskId): Promise<void>;
}

/**
 * Publishes each task event on the task's events subject, cut to fit one message ({@link fitEvent}). With `store`
 * (NATS: the events stream), each is stored with an acknowledgement and a message id unique to this publish, sent
 * again through a leader election until stored, so the stream's replay has every event in order; a repeat of a
 * publish that was stored already is dropped by its message id. A live subscriber may get such a repeat
 * (docs/deploy.md). An event still not stored after the store's patience is logged and left out of the replay.
 *
 * The order: with `inOrder` true (a stream that stores writes in the order sent, see `DirectorConfig.storedInOrder`),
 * each event is sent at once and the acknowledgements are awaited together; else each event is sent once its
 * predecessor is stored, so that no election can store a later one first.
 */
export function eventPublisher(
  deps: ActorDeps,
  store?: (subject: string, data: Uint8Array, id: string, signal?: AbortSignal) => Promise<void>,
  forkOf?: (taskId: TaskId) => ForkOf | undefined,
  inOrder?: () => boolean,
): EventPublisher {
  /** Per task, the store of its last event (the next waits for it); aborted, its events not stored yet are dropped. */
  const chains = new Map<TaskId, { tail: Promise<void>; cut: AbortController }>();
  // Message ids unique to this publisher's publishes: a new owner's event of the same seq is a different one.
  const nonce = randomUUID();
  let published = 0;
  /** Adds `send` to the chain of `taskId`: sent at once when the stream keeps the order, else after its predecessor. */
  const link = (taskId: TaskId, send: (signal: AbortSignal) => Promise<void>): Promise<void> => {
    let chain = chains.get(taskId);
    if (chain === undefined) chains.set(taskId, (chain = { tail: Promise.resolve(), cut: new AbortController() }));
    const entry = chain;
    const { signal } = entry.cut;
    let next: Promise<void>;
    if (inOrder?.() === true) {
      const sent = send(signal);
      // Handled here at once, and reported below in order, once its predecessors are done.
      sent.catch(() => undefined);
      next = entry.tail.then(() => sent);
    } else next = entry.tail.then(() => (signal.aborted ? undefined : send(signal)));
    const tail = next.catch(() => undefined);
    entry.tail = tail;
    void tail.then(() => {
      if (chains.get(taskId) === entry && entry.tail === tail) chains.delete(taskId);
    });
    return next;
  };
  const publish = (taskId: TaskId, subject: string, body: Uint8Array, seq: number) => {
    if (store === undefined) return deps.bus.publish(subject, body);
    const id = `${nonce}.${++published}`;
    let cut: AbortSignal | undefined;
    const stored = (signal: AbortSignal) => ((cut = signal), store(subject, body, id, signal));
    link(taskId, stored).catch((err: unknown) => {
      if (cut?.aborted === true) deps.log.debug({ taskId, seq, err: messageOf(err) }, "task event dropped: another Director owns the task");
      else deps.log.warn({ taskId, seq, err: messageOf(err) }, "task event not stored in the events stream");
    });
  };
  const send: PublishEvent = (taskId, seq, type, state, message, data, fork = forkOf?.(taskId)) => {
    const event: TaskEvent = {
      taskId,
      seq,
      type,
      state,
      at: deps.now().toISOString(),
      ...(message === undefined ? {} : { message }),
      ...(data === undefined ? {} : { data }),
      ...(fork === undefined ? {} : { forkOf: fork }),
    };
    publish(taskId, deps.subjects.taskEvents(taskId), fitEvent(event, deps.bus.maxMessageBytes), seq);
  };
  return Object.assign(send, {
    afterEvents: (taskId: TaskId, follow: () => Promise<void>) => (store === undefined ? follow() : link(taskId, () => follow())),
    cut: async (taskId: TaskId) => {
      const chain = chains.get(taskId);
      if (chain === undefined) return;
      chain.cut.abort();
      chains.delete(taskId);
      await chain.tail;
    },
  });
}
