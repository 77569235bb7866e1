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
 *   acknowledged write on the same connection tells that it was stored. That later write is the task's result, or a
 *   fence: the last event sent, sent again under its message id (the stream keeps nothing twice), once per
 *   {@link FENCE_MS} for every task of the Director. An event sent before the connection was lost, or before the
 *   stream was made again, is stored again with an acknowledgement; so are those a fence failed to vouch for.
 *
 * Every event has a message id unique to this publish: a repeat of one stored already is dropped by the stream. A live
 * subscriber may get such a repeat (docs/deploy.md). An event still not stored after the store's patience is logged
 * and left out of the replay.
 */
import { randomUUID } from "node:crypto";
import type { ForkOf, TaskEvent, TaskId, TaskState } from "../../protocol/index.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { fitEvent } from "./message-fit.js";

/** How long an event sent without acknowledgement waits, at most, for a write that tells it was stored. */
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
}

/** Publishes each task event on the task's events subject, cut to fit one message ({@link fitEvent}). */
export function eventPublisher(deps: ActorDeps, options: EventPublisherOptions = {}): EventPublisher {
  const { store, ordered, forkOf } = options;
  /** Per task, the store of its last event (the next waits for it); aborted, its events not stored yet are dropped. */
  const chains = new Map<TaskId, { tail: Promise<void>; cut: AbortController }>();
  /** Per task, its events sent without acknowledgement and not vouched for yet. */
  let unconfirmed = new Map<TaskId, Unvouched>();
  /** The same, of each fence waiting for its acknowledgement. */
  const fencing = new Set<Map<TaskId, Unvouched>>();
  /** The last event sent without acknowledgement: the fence sends it again. */
  let lastSent: Unconfirmed | undefined;
  let fenceTimer: ReturnType<typeof setTimeout> | undefined;
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
    if (sent.cut || store === undefined) return undefined;
    let again: Promise<void> | undefined;
    for (const e of sent.events) if (e.losses !== losses) again = storeAcked(taskId, e.subject, e.body, e.id, e.seq, store);
    return again;
  };

  /** Sends the last event again with an acknowledgement: it vouches for every event sent before it. */
  const fence = () => {
    fenceTimer = undefined;
    const probe = lastSent;
    const batch = unconfirmed;
    unconfirmed = new Map();
    lastSent = undefined;
    if (probe === undefined || store === undefined || ordered === undefined) return;
    fencing.add(batch);
    const settle = (losses: number | undefined) => {
      fencing.delete(batch);
      for (const [taskId, sent] of batch) void vouch(taskId, sent, losses);
    };
    store(probe.subject, probe.body, probe.id).then(
      () => settle(ordered.losses()),
      () => settle(undefined),
    );
  };

  const sendUnacked = (taskId: TaskId, subject: string, body: Uint8Array, id: string, seq: number, writes: OrderedWrites) => {
    const losses = writes.losses();
    try {
      writes.send(subject, body, id);
    } catch {
      // Not sent (the connection is closing): it waits for the fence like any other, which stores it again.
    }
    const event: Unconfirmed = { subject, body, id, seq, losses };
    const sent = unconfirmed.get(taskId);
    if (sent === undefined) unconfirmed.set(taskId, { events: [event], cut: false });
    else sent.events.push(event);
    lastSent = event;
    if (fenceTimer === undefined) {
      fenceTimer = setTimeout(fence, FENCE_MS);
      fenceTimer.unref?.();
    }
  };

  const publish = (taskId: TaskId, subject: string, body: Uint8Array, seq: number) => {
    if (store === undefined) return deps.bus.publish(subject, body);
    const id = `${nonce}.${++published}`;
    if (ordered !== undefined && inOrder()) sendUnacked(taskId, subject, body, id, seq, ordered);
    else void storeAcked(taskId, subject, body, id, seq, store);
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
