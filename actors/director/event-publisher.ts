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
 *   the first event of any task sent `FENCE_MS` or more after the oldest event not vouched for, which is sent with an
 *   acknowledgement (nothing is sent only to vouch: a subscriber would see it). What is kept until then is
 *   actors/director/vouching.ts. After the connection was lost, or the stream made again, the events not vouched for
 *   are stored again with acknowledgements before anything newer; so are those an acknowledged write that failed
 *   could not vouch for.
 *
 * Every event has a message id unique to this publish: a repeat of one stored already is dropped by the stream. A live
 * subscriber may get such a repeat (docs/deploy.md). An event still not stored after the store's patience is logged
 * and left out of the replay.
 */
import { randomUUID } from "node:crypto";
import type { ForkOf, TaskEvent, TaskId, TaskState } from "../../protocol/index.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { fitEvent } from "./message-fit.js";
import { Vouching, type EventWrite, type OrderedWrites } from "./vouching.js";

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

/** The options of {@link eventPublisher}. */
export interface EventPublisherOptions {
  /** Stores an event with an acknowledgement (NATS: the events stream); absent: events are published plainly. */
  store?: StoreWrite | undefined;
  /** The stream's order: with it (and `holds()`), events go without acknowledgement and are vouched for later. */
  ordered?: OrderedWrites | undefined;
  /** What a task was forked from: said in each of its events. */
  forkOf?: ((taskId: TaskId) => ForkOf | undefined) | undefined;
}

/** Publishes each task event on the task's events subject, cut to fit one message ({@link fitEvent}). */
export function eventPublisher(deps: ActorDeps, options: EventPublisherOptions = {}): EventPublisher {
  const { store, forkOf } = options;
  /** Per task, the store of its last event (the next waits for it); aborted, its events not stored yet are dropped. */
  const chains = new Map<TaskId, { tail: Promise<void>; cut: AbortController }>();
  const vouching = options.ordered ? new Vouching(options.ordered) : undefined;
  // Message ids unique to this publisher's publishes: a new owner's event of the same seq is a different one.
  const nonce = randomUUID();
  let published = 0;
  /** The events sent without acknowledgement, where the stream keeps the order now. */
  const inOrder = () => (vouching?.writes.holds() === true ? vouching : undefined);

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

  /** Stores an event with an acknowledgement, in its task's chain; a failure is logged. Resolves whether stored or not. */
  const storeAcked = (taskId: TaskId, event: EventWrite, save: StoreWrite): Promise<void> => {
    let cut: AbortSignal | undefined;
    const { subject, body, id, seq } = event;
    const leftOut = (err?: unknown) =>
      deps.log.info(
        { taskId, seq, ...(err === undefined ? {} : { err: messageOf(err) }) },
        "task event left out of the events stream: another Director owns the task",
      );
    return link(taskId, (signal) => ((cut = signal), save(subject, body, id, signal))).then(
      // Never sent: the chain was cut before its turn.
      () => (cut === undefined ? leftOut() : undefined),
      (err: unknown) => {
        if (cut?.aborted === true) leftOut(err);
        else deps.log.warn({ taskId, seq, err: messageOf(err) }, "task event not stored in the events stream");
      },
    );
  };

  /** Stores `events` of `taskId` again, with acknowledgements, in order; resolves once all have ended. */
  const storeAgain = (taskId: TaskId, events: readonly EventWrite[], save: StoreWrite): Promise<unknown> =>
    Promise.all(events.map((e) => storeAcked(taskId, e, save)));

  /** After a loss, every event not vouched for is stored again before anything newer is sent, keeping the order. */
  const recover = (sent: Vouching, save: StoreWrite) => {
    for (const [taskId, events] of sent.lost()) void storeAgain(taskId, events, save);
  };

  /** Sends `event` with an acknowledgement that vouches for every event sent before it without one. */
  const fence = (taskId: TaskId, event: EventWrite, save: StoreWrite, sent: Vouching) => {
    const batch = sent.take();
    let acked = true;
    const stored: StoreWrite = (...args) =>
      save(...args).catch((err: unknown) => {
        acked = false;
        throw err;
      });
    void storeAcked(taskId, event, stored).then(() => {
      for (const [vouched, events] of sent.settle(batch, acked)) void storeAgain(vouched, events, save);
    });
  };

  const publish = (taskId: TaskId, subject: string, body: Uint8Array, seq: number) => {
    if (store === undefined) return deps.bus.publish(subject, body);
    const event: EventWrite = { subject, body, id: `${nonce}.${++published}`, seq };
    const sent = inOrder();
    if (sent === undefined) return void storeAcked(taskId, event, store);
    recover(sent, store);
    // A task with writes still under way (stored again after a loss) sends the next behind them, acknowledged too.
    if (chains.has(taskId)) void storeAcked(taskId, event, store);
    else if (sent.due) fence(taskId, event, store, sent);
    else sent.send(taskId, event);
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
    const sent = inOrder();
    if (sent !== undefined) recover(sent, store);
    const task = sent?.takeTask(taskId);
    if (sent === undefined || task === undefined) return link(taskId, () => follow());
    // The result, acknowledged, vouches for the events sent before it.
    return link(taskId, () => follow()).then(
      () => storeAgain(taskId, sent.unvouched(task, sent.writes.losses()), store).then(() => undefined),
      (err: unknown) => {
        void storeAgain(taskId, sent.unvouched(task, undefined), store);
        throw err;
      },
    );
  };

  const cut = async (taskId: TaskId) => {
    vouching?.cut(taskId);
    const chain = chains.get(taskId);
    if (chain === undefined) return;
    chain.cut.abort();
    chains.delete(taskId);
    await chain.tail;
  };

  return Object.assign(send, { afterEvents, cut });
}
