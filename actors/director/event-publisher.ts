/**
 * A task's events on its events subject, stored in the events stream so that its replay has every event in order
 * and its result after them.
 *
 * Three ways, chosen by what the transport offers:
 *
 * - no store (the in-process bus): a plain publish;
 * - a stream that may lose a write and keep a later one (a cluster electing a leader): each event is stored with an
 *   acknowledgement, sent once its predecessor is stored, again through an election until stored;
 * - a stream that stores the writes of one connection in the order sent ({@link OrderedWrites}: a server in no
 *   cluster, a stream of one replica): each event is sent without asking for an acknowledgement, and a later
 *   acknowledged write on the same connection tells that it was stored. That later write is the task's result, or
 *   the first event of any task sent {@link FENCE_MS} or more after the oldest event not vouched for, which is sent
 *   with an acknowledgement (nothing is sent only to vouch: a subscriber would see it). An event sent before the
 *   connection was lost, or before the stream was made again, is stored again with an acknowledgement; so are those
 *   an acknowledged write that failed could not vouch for.
 *
 * Every event has a message id unique to this publish: a repeat of one stored already is dropped by the stream. A live
 * subscriber may get such a repeat (docs/deploy.md). An event still not stored after the store's patience is logged
 * and left out of the replay.
 */
import { randomUUID } from "node:crypto";
import type { ForkOf, TaskEvent, TaskId, TaskState } from "../../protocol/index.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { fitEvent } from "./message-fit.js";

/** How long after an event sent without acknowledgement the next event is sent with one, to vouch for it. */
export const FENCE_MS = 50;

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

/** Stores a write in the events stream and resolves once it is acknowledged; `id` is its message id. */
export type StoreWrite = (subject: string, data: Uint8Array, id: string, signal?: AbortSignal) => Promise<void>;

/** Writes to the events stream that it stores in the order one connection sends them. */
export interface OrderedWrites {
  /** Whether the stream does so now: true on a server in no cluster, with an events stream of one replica. */
  holds(): boolean;
  /** Sends a write under message id `id`, asking for no acknowledgement. */
  send(subject: string, data: Uint8Array, id: string): void;
  /**
   * Counts what can lose a write sent without acknowledgement: the connection lost, the stream made again. A write
   * sent before an acknowledged one, with this count the same at both, is stored.
   */
  losses(): number;
}

/** The options of {@link eventPublisher}. */
export interface EventPublisherOptions {
  /** Stores an event with an acknowledgement (NATS: the events stream); absent: events are published plainly. */
  store?: StoreWrite | undefined;
  /** The stream's order: with it (and `holds()`), events go without acknowledgement and are vouched for later. */
  ordered?: OrderedWrites | undefined;
  /** What a task was forked from: said in each of its events. */
  forkOf?: ((taskId: TaskId) => ForkOf | undefined) | undefined;
}

/** An event sent without acknowledgement, kept until a later acknowledged write tells it was stored. */
interface Unconfirmed {
  readonly subject: string;
  readonly body: Uint8Array;
  readonly id: string;
  readonly seq: number;
  /** {@link OrderedWrites.losses} when it was sent. */
  readonly losses: number;
}

/** A task's events sent without acknowledgement that no later write vouched for yet. */
interface Unvouched {
  /** In the order sent. */
  readonly events: Unconfirmed[];
  /** Another Director owns the task now: none is stored again. */
  cut: boolean;
  /** Stored again already, after a loss: nothing vouches for them any more. */
  restored?: boolean;
}

/** Publishes each task event on the task's events subject, cut to fit one message ({@link fitEvent}). */
export function eventPublisher(deps: ActorDeps, options: EventPublisherOptions = {}): EventPublisher {
  const { store, ordered, forkOf } = options;
  /** Per task, the store of its last event (the next waits for it); aborted, its events not stored yet are dropped. */
  const chains = new Map<TaskId, { tail: Promise<void>; cut: AbortController }>();
  /** Per task, its events sent without acknowledgement and not vouched for yet. */
  let unconfirmed = new Map<TaskId, Unvouched>();
  /** The same, of each acknowledged event that vouches for them, until its acknowledgement. */
  const fencing = new Set<Map<TaskId, Unvouched>>();
  /** Set {@link FENCE_MS} after the oldest event not vouched for was sent: the next event goes with an acknowledgement. */
  let ackNext = false;
  let fenceTimer: ReturnType<typeof setTimeout> | undefined;
  /** {@link OrderedWrites.losses} as last seen: a change means events sent before it may be lost. */
  let knownLosses = ordered?.losses() ?? 0;
  // Message ids unique to this publisher's publishes: a new owner's event of the same seq is a different one.
  const nonce = randomUUID();
  let published = 0;
  const inOrder = () => ordered?.holds() === true;

  /** Adds `send` to the chain of `taskId`: sent at once when the stream keeps the order, else after its predecessor. */
  const link = (taskId: TaskId, send: (signal: AbortSignal) => Promise<void>): Promise<void> => {
    let chain = chains.get(taskId);
    if (chain === undefined) chains.set(taskId, (chain = { tail: Promise.resolve(), cut: new AbortController() }));
    const entry = chain;
    const { signal } = entry.cut;
    let next: Promise<void>;
    if (inOrder()) {
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

  /** Stores an event with an acknowledgement, in its task's chain; a failure is logged. */
  const storeAcked = (taskId: TaskId, subject: string, body: Uint8Array, id: string, seq: number, save: StoreWrite): Promise<void> => {
    let cut: AbortSignal | undefined;
    return link(taskId, (signal) => ((cut = signal), save(subject, body, id, signal))).catch((err: unknown) => {
      if (cut?.aborted === true) deps.log.debug({ taskId, seq, err: messageOf(err) }, "task event dropped: another Director owns the task");
      else deps.log.warn({ taskId, seq, err: messageOf(err) }, "task event not stored in the events stream");
    });
  };

  /**
   * Settles events sent without acknowledgement once a later acknowledged write came back (`losses` then), or failed
   * (undefined): those that may be lost are stored again, with an acknowledgement. Resolves once those are done.
   */
  const vouch = (taskId: TaskId, sent: Unvouched, losses: number | undefined): Promise<void> | undefined => {
    if (sent.cut || sent.restored === true || store === undefined) return undefined;
    let again: Promise<void> | undefined;
    for (const e of sent.events) if (e.losses !== losses) again = storeAcked(taskId, e.subject, e.body, e.id, e.seq, store);
    return again;
  };

  /**
   * After a loss (the connection lost, the stream made again), before anything else is sent: every event not vouched
   * for is stored again with an acknowledgement, each task's in the order sent, so that the replay keeps the order
   * (those that were stored are kept once by their message id; a subscriber may see them twice).
   */
  const recover = (writes: OrderedWrites, save: StoreWrite) => {
    const losses = writes.losses();
    if (losses === knownLosses) return;
    knownLosses = losses;
    const batches = [...fencing, unconfirmed];
    unconfirmed = new Map();
    ackNext = false;
    for (const batch of batches)
      for (const [taskId, sent] of batch) {
        if (sent.cut || sent.restored === true) continue;
        sent.restored = true;
        for (const e of sent.events) void storeAcked(taskId, e.subject, e.body, e.id, e.seq, save);
      }
  };

  /** Sends an event with an acknowledgement that vouches for every event sent before it without one. */
  const fence = (taskId: TaskId, subject: string, body: Uint8Array, id: string, seq: number, save: StoreWrite, writes: OrderedWrites) => {
    ackNext = false;
    const batch = unconfirmed;
    unconfirmed = new Map();
    fencing.add(batch);
    let failed = false;
    const stored: StoreWrite = (...args) =>
      save(...args).catch((err: unknown) => {
        failed = true;
        throw err;
      });
    void storeAcked(taskId, subject, body, id, seq, stored).then(() => {
      fencing.delete(batch);
      const losses = failed ? undefined : writes.losses();
      for (const [vouchedTask, sent] of batch) void vouch(vouchedTask, sent, losses);
    });
  };

  const sendUnacked = (taskId: TaskId, subject: string, body: Uint8Array, id: string, seq: number, writes: OrderedWrites) => {
    const losses = writes.losses();
    // Nothing waits to be vouched for: the time counts from this event.
    if (unconfirmed.size === 0) ackNext = false;
    try {
      writes.send(subject, body, id);
    } catch {
      // Not sent (the connection is closing): kept like any other, and stored again unless something vouches for it.
    }
    const event: Unconfirmed = { subject, body, id, seq, losses };
    const sent = unconfirmed.get(taskId);
    if (sent === undefined) unconfirmed.set(taskId, { events: [event], cut: false });
    else sent.events.push(event);
    if (fenceTimer === undefined) {
      fenceTimer = setTimeout(() => {
        fenceTimer = undefined;
        ackNext = true;
      }, FENCE_MS);
      fenceTimer.unref?.();
    }
  };

  const publish = (taskId: TaskId, subject: string, body: Uint8Array, seq: number) => {
    if (store === undefined) return deps.bus.publish(subject, body);
    const id = `${nonce}.${++published}`;
    if (ordered === undefined || !inOrder()) return void storeAcked(taskId, subject, body, id, seq, store);
    recover(ordered, store);
    // A task with writes still under way (stored again after a loss) sends the next behind them, acknowledged too.
    if (chains.has(taskId)) void storeAcked(taskId, subject, body, id, seq, store);
    else if (ackNext && unconfirmed.size > 0) fence(taskId, subject, body, id, seq, store, ordered);
    else sendUnacked(taskId, subject, body, id, seq, ordered);
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

  const afterEvents = (taskId: TaskId, follow: () => Promise<void>): Promise<void> => {
    if (store === undefined) return follow();
    if (ordered !== undefined && inOrder()) recover(ordered, store);
    const sent = unconfirmed.get(taskId);
    if (sent === undefined) return link(taskId, () => follow());
    // The result, acknowledged, vouches for the events sent before it.
    unconfirmed.delete(taskId);
    return link(taskId, () => follow()).then(
      () => vouch(taskId, sent, ordered?.losses()),
      (err: unknown) => {
        void vouch(taskId, sent, undefined);
        throw err;
      },
    );
  };

  const cut = async (taskId: TaskId) => {
    for (const batch of [unconfirmed, ...fencing]) {
      const sent = batch.get(taskId);
      if (sent !== undefined) sent.cut = true;
    }
    unconfirmed.delete(taskId);
    const chain = chains.get(taskId);
    if (chain === undefined) return;
    chain.cut.abort();
    chains.delete(taskId);
    await chain.tail;
  };

  return Object.assign(send, { afterEvents, cut });
}
