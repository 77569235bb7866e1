/**
 * The narrow I/O seam between actors and the transport. Actors depend on these interfaces only;
 * `runtime/` implements them over NATS (with JetStream for durability) and in-process.
 */
import { parseTaskId, type TaskId } from "../protocol/index.js";

/** A message received from the bus. */
export interface BusMessage {
  /** The subject it arrived on. */
  readonly subject: string;
  /** Raw body. */
  readonly data: Uint8Array;
  /** Header values, when the sender set any. */
  readonly headers?: ReadonlyMap<string, string>;
  /** Whether the sender waits for an answer. */
  readonly expectsReply: boolean;
  /** Answers a request; returns false when the sender did not ask for an answer. */
  respond(data: Uint8Array): boolean;
  /**
   * Sends the message on to `subject` with its headers, `headers` added, and its reply subject, so that whoever
   * serves `subject` answers the sender. Absent where a transport cannot (in process).
   */
  forward?(subject: string, headers: Record<string, string>): void;
}

/** A live subscription. */
export interface BusSubscription {
  /** Stops delivery; messages already being handled finish. */
  unsubscribe(): Promise<void>;
}

/** Options of {@link Bus.subscribe}. */
export interface SubscribeOptions {
  /** Queue group: each message goes to one member of the group. */
  queue?: string;
}

/** Options of {@link Bus.request}. */
export interface RequestOptions {
  /** How long to wait for the answer. */
  timeoutMs: number;
  /** Aborts the wait (the answer, if it comes, is dropped). */
  signal?: AbortSignal;
  /**
   * Asks the responder for keepalives (see {@link KEEPALIVE_HEADER}) and fails with a {@link TransportError} when
   * neither an answer nor a keepalive came for this long: the responder's process died or lost its connection.
   * Transports whose responders cannot die on their own (in-process) ignore it.
   */
  idleTimeoutMs?: number;
  /** Headers sent with the request (the trace context, actors/tracing.ts). */
  headers?: Record<string, string>;
}

/**
 * Header of a request whose sender wants keepalives: its value is the interval in milliseconds. While it works on
 * the request, the responder answers with an empty body that often; the real answer is never empty.
 */
export const KEEPALIVE_HEADER = "Dirigent-Keepalive";

/** Publish/subscribe and request/reply over subjects. */
export interface Bus {
  /** Publishes a message; fire and forget. */
  publish(subject: string, data: Uint8Array, headers?: Record<string, string>): void;
  /** Subscribes; `handler` errors are caught and logged by the implementation. */
  subscribe(subject: string, handler: (msg: BusMessage) => void | Promise<void>, options?: SubscribeOptions): BusSubscription;
  /**
   * Sends a request and waits for one answer.
   * @throws {NoRespondersError} when nobody listens on `subject`.
   * @throws {RequestTimeoutError} when no answer came in time.
   * @throws {RequestAbortedError} when `signal` aborted the wait.
   */
  request(subject: string, data: Uint8Array, options: RequestOptions): Promise<Uint8Array>;
  /** Resolves once everything published so far has reached the server. */
  flush(): Promise<void>;
  /**
   * Calls `listener` each time the connection is back after a loss (messages published meanwhile were missed by
   * subscriptions); returns a function that removes it. Absent on transports that cannot lose their connection.
   */
  onReconnect?(listener: () => void): () => void;
  /** A one-line description of the transport (`nats://127.0.0.1:4222`, `in-process`). */
  readonly description: string;
  /**
   * Largest message body the transport carries (NATS: the server's `max_payload` less room for subject and
   * headers); absent: no limit. A larger publish fails.
   */
  readonly maxMessageBytes?: number;
}

/** The last message stored on `subject` in the events stream; `undefined`: none. */
export type LastPublished = (subject: string) => Promise<Uint8Array | undefined>;

/**
 * Stores a message in the events stream and waits for its acknowledgement, `id` naming it once (a JetStream message
 * id), so one published while a replicated stream elects a leader is not lost.
 */
export type PublishStored = (subject: string, data: Uint8Array, id: string, signal?: AbortSignal) => Promise<void>;

/** Result of {@link TaskStore.create}. */
export type CreateResult = "created" | "exists";

/** Durable key/value storage of task records (JetStream KV, or memory in embedded mode). */
export interface TaskStore {
  /** Stores `value` under `key` only if the key does not exist yet (atomic). */
  create(key: string, value: Uint8Array): Promise<CreateResult>;
  /** {@link TaskStore.create} that tells the new revision (`undefined`: the key exists, nothing was written). */
  createWithRevision(key: string, value: Uint8Array): Promise<number | undefined>;
  /** Reads a value. */
  get(key: string): Promise<Uint8Array | undefined>;
  /** Writes a value unconditionally. */
  put(key: string, value: Uint8Array): Promise<void>;
  /** Reads a value with its revision, the token {@link TaskStore.update} compares. */
  getWithRevision(key: string): Promise<Revisioned | undefined>;
  /**
   * Compare-and-set: writes `value` only if the key's current revision is `expectedRevision`.
   * @returns the new revision, or `undefined` when the key changed since (nothing was written).
   */
  update(key: string, value: Uint8Array, expectedRevision: number): Promise<number | undefined>;
  /**
   * The keys matching `filter` (a KV key pattern: `*` one token, `>` the rest; every key when absent). Absent on a
   * store that cannot list.
   */
  keys?(filter?: string): Promise<string[]>;
  /** Whether data survives a restart of the process. */
  readonly durable: boolean;
  /**
   * Opens a store that opens on first use, now; resolves once it can be written (the Handler's records are written
   * behind its replies: a store still opening would hold them back past a crash).
   */
  open?(): Promise<void>;
}

/** A stored value and its revision. */
export interface Revisioned {
  /** The value. */
  readonly value: Uint8Array;
  /** Increases with every write of the key. */
  readonly revision: number;
}

/** A unit of work taken from a {@link WorkQueue}. */
export interface WorkItem {
  /** The item's id (the task id). */
  readonly id: string;
  /** The body. */
  readonly data: Uint8Array;
  /**
   * How many times it has been delivered, from 1. A nats-server before 2.10.16 can count a redelivery as a first
   * delivery (see {@link queuedAt}).
   */
  readonly deliveries: number;
  /**
   * When it was queued (ms since the epoch, by the queue's clock), when the queue tells. A redelivery comes an ack
   * wait after the delivery before it at the earliest, so a delivery counted as the first of an item queued an ack
   * wait ago or longer may be a redelivery: a nats-server before 2.10.16 that redelivers to a pull request of a
   * client that is gone rewinds the consumer, and the next pull gets the item again counted as a first delivery.
   * Absent: the queue counts deliveries exactly.
   */
  readonly queuedAt?: number;
  /**
   * Its position in the queue, the same on every delivery and different for every item ever queued (the stream
   * sequence): a second item queued under the same id (a duplicate submission after the queue's duplicate window)
   * is told apart from a redelivery of the first.
   */
  readonly seq: number;
  /**
   * Removes it from the queue for good. Not confirmed: it resolves once the ack is sent, and a lost one costs a
   * redelivery (which a Director acks and ignores: the outcome is stored before the ack).
   */
  ack(): Promise<void>;
  /** Hands it back for redelivery, after `delayMs` when given (a queue may redeliver sooner). */
  nak(delayMs?: number): void;
  /** Tells the queue the item is still being worked on: restarts its ack wait. */
  working(): void;
}

/** An intake item whose id was checked to be a task id ({@link isTaskItem}). */
export type TaskItem = WorkItem & { readonly id: TaskId };

/**
 * Whether an intake item's id is a task id. The queue hands out the last token of the item's subject as a plain
 * string: the intake queues only task ids, but anyone allowed to publish on the intake subjects can queue another.
 */
export function isTaskItem(item: WorkItem): item is TaskItem {
  return parseTaskId(item.id) !== undefined;
}

/** Pause before a work item that failed is delivered again: 250 ms doubling per delivery, at most 10 s. */
export const retryDelayMs = (deliveries: number): number => Math.min(10_000, 250 * 2 ** Math.min(Math.max(deliveries, 1) - 1, 6));

/** Durable queue of accepted work, shared by all processes of a role. */
export interface WorkQueue {
  /** Adds an item; a second item with the same id is dropped as a duplicate. */
  enqueue(id: string, data: Uint8Array): Promise<{ duplicate: boolean; seq: number }>;
  /**
   * The item queued under `id`, delivered or not, until it is acknowledged: its body and {@link WorkItem.seq}.
   * `undefined` when there is none. An ack is not confirmed ({@link WorkItem.ack}): the item may still be found for
   * the moment the queue takes to act on it.
   */
  peek(id: string): Promise<{ data: Uint8Array; seq: number } | undefined>;
  /**
   * Removes the item queued under `id` at `seq` ({@link WorkItem.seq}), delivered or not; nothing when it is gone. A
   * delivery of it to this process whose handler has not started is not handed out.
   */
  discard(id: string, seq: number): Promise<void>;
  /** An item neither acked, naked nor marked {@link WorkItem.working} for this long is redelivered. */
  readonly ackWaitMs: number;
  /**
   * Largest item body the queue takes (the transport's message size); absent: no limit. A larger item is stored
   * elsewhere and queued by reference (actors/director/intake.ts).
   */
  readonly maxItemBytes?: number;
  /** Delivers items to `handler`, at most `concurrency` at a time in this process. */
  consume(handler: (item: WorkItem) => Promise<void>, options: { concurrency: number }): BusSubscription;
}

/** Base class of transport errors; `cause` holds the transport's own error. */
export class TransportError extends Error {
  override name = "TransportError";
  constructor(
    message: string,
    /** The subject involved. */
    readonly subject: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Nobody is subscribed to the subject of a request. */
export class NoRespondersError extends TransportError {
  override name = "NoRespondersError";
}

/** No answer arrived within the timeout. */
export class RequestTimeoutError extends TransportError {
  override name = "RequestTimeoutError";
}

/** The caller aborted the request. */
export class RequestAbortedError extends TransportError {
  override name = "RequestAbortedError";
}

/** A request sent with `idleTimeoutMs` got neither an answer nor a keepalive for that long. */
export class ResponderSilentError extends TransportError {
  override name = "ResponderSilentError";
}

/**
 * A write the store refuses for good: the value is larger than it can ever hold (over the hard maximum, or over the
 * bucket's maximum value size). Writing it again cannot succeed; its writer fails the work it belongs to instead of
 * retrying. Every other store error (an outage, a timeout) is transient.
 */
export class StoreRefusedError extends Error {
  override name = "StoreRefusedError";
  constructor(
    message: string,
    /** The key written. */
    readonly key: string,
    /** The value's size in bytes. */
    readonly bytes: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Whether a store error is permanent ({@link StoreRefusedError}): the write is not to be retried. */
export function isPermanentStoreError(err: unknown): err is StoreRefusedError {
  return err instanceof StoreRefusedError;
}

/** The largest value a {@link TaskStore} holds (64 MiB): larger ones are refused with a {@link StoreRefusedError}. */
export const MAX_STORED_VALUE_BYTES = 64 * 1024 * 1024;
