/**
 * JetStream storage of the runtime: task records in a KV bucket, the intake work queue (a
 * work-queue stream on `<root>.intake.*`, de-duplicated by task id, read through one durable pull
 * consumer shared by every Director), and the events stream that keeps each task's events and
 * result for replay.
 */
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type Consumer,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type StreamConfig,
} from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { nanos, type NatsConnection } from "@nats-io/transport-node";
import { setTimeout as delay } from "node:timers/promises";
import { retryDelayMs, type BusSubscription, type CreateResult, type Revisioned, type TaskStore, type WorkItem, type WorkQueue } from "../actors/bus.js";
import type { Subjects } from "../protocol/subjects.js";
import { warnOnError, type BusErrorHandler } from "./bus-support.js";

/** How long the events stream keeps a task's events and result. */
export const EVENTS_MAX_AGE_MS = 24 * 60 * 60 * 1000;

/** {@link TaskStore} over a JetStream KV bucket; data survives restarts of processes and server. */
export class NatsTaskStore implements TaskStore {
  readonly durable = true;
  readonly #kv: KV;

  constructor(kv: KV) {
    this.#kv = kv;
  }

  /** Every key of the bucket (an ordered consumer over its subjects). */
  async keys(): Promise<string[]> {
    const keys: string[] = [];
    for await (const key of await this.#kv.keys()) keys.push(key);
    return keys;
  }

  async create(key: string, value: Uint8Array): Promise<CreateResult> {
    return (await this.createWithRevision(key, value)) === undefined ? "exists" : "created";
  }

  async createWithRevision(key: string, value: Uint8Array): Promise<number | undefined> {
    try {
      return await this.#kv.create(key, value);
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) return undefined;
      throw err;
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const entry = await this.#kv.get(key);
    return entry !== null && entry.operation === "PUT" ? entry.value : undefined;
  }

  async put(key: string, value: Uint8Array): Promise<void> {
    await this.#kv.put(key, value);
  }

  async getWithRevision(key: string): Promise<Revisioned | undefined> {
    const entry = await this.#kv.get(key);
    return entry !== null && entry.operation === "PUT" ? { value: entry.value, revision: entry.revision } : undefined;
  }

  async update(key: string, value: Uint8Array, expectedRevision: number): Promise<number | undefined> {
    try {
      return await this.#kv.update(key, value, expectedRevision);
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) return undefined;
      throw err;
    }
  }
}

/** Opens the task bucket (`subjects.tasksBucket`), creating it on first use (file storage, history 1). */
export async function openTaskStore(nc: NatsConnection, subjects: Subjects): Promise<NatsTaskStore> {
  const kv = await new Kvm(nc).create(subjects.tasksBucket, { history: 1, storage: StorageType.File });
  return new NatsTaskStore(kv);
}

/** How long the turns bucket keeps a record: a task re-run later than this starts its sessions over. */
export const TURNS_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

/** Opens the turns bucket (`subjects.turnsBucket`): the Handler's records of sessions and scripts. */
export async function openTurnStore(nc: NatsConnection, subjects: Subjects): Promise<NatsTaskStore> {
  const kv = await new Kvm(nc).create(subjects.turnsBucket, { history: 1, storage: StorageType.File, ttl: TURNS_MAX_AGE_MS });
  return new NatsTaskStore(kv);
}

/**
 * Creates a stream unless one of that name exists. An existing stream is used as it is, so a
 * deployment can tune limits with the `nats` CLI without the runtime undoing them.
 */
export async function ensureStream(jsm: JetStreamManager, config: Partial<StreamConfig> & { name: string }): Promise<void> {
  try {
    await jsm.streams.info(config.name);
    return;
  } catch (err) {
    if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)) throw err;
  }
  try {
    await jsm.streams.add(config);
  } catch (err) {
    // Another process created it between our lookup and our add.
    if (!(await streamExists(jsm, config.name))) throw err;
  }
}

async function streamExists(jsm: JetStreamManager, name: string): Promise<boolean> {
  try {
    await jsm.streams.info(name);
    return true;
  } catch {
    return false;
  }
}

/** Options of {@link openWorkQueue}. */
export interface WorkQueueOptions {
  /** Receives handler errors (the item is naked) and pull errors (pulling resumes after a pause). Default: a process warning. */
  onError?: BusErrorHandler;
  /** Redeliver an item neither acked nor naked this long after delivery. Default 30 s. */
  ackWaitMs?: number;
  /** Unacknowledged items the server hands out over all processes; bounds `concurrency`. Default 1000. */
  maxAckPending?: number;
  /** A repeated id within this window is a duplicate. Default 2 minutes. */
  duplicateWindowMs?: number;
  /** How long one pull request waits on the server for an item. Default 5 s (minimum 1 s). */
  pullExpiresMs?: number;
}

const RETRY_PAUSE_MS = 500;
const DEFAULT_ACK_WAIT_MS = 30_000;

/**
 * Ensures the intake stream and the durable consumer, then returns the queue. An existing
 * consumer gets this process's `ackWaitMs` and `maxAckPending` (the last process to open wins).
 */
export async function openWorkQueue(nc: NatsConnection, subjects: Subjects, options: WorkQueueOptions = {}): Promise<JetStreamWorkQueue> {
  const jsm = await jetstreamManager(nc);
  await ensureStream(jsm, {
    name: subjects.intakeStream,
    subjects: [subjects.anyIntake],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
  });
  const maxAckPending = options.maxAckPending ?? 1000;
  await ensureConsumer(jsm, subjects.intakeStream, subjects.directorConsumer, {
    ack_wait: nanos(options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS),
    max_ack_pending: maxAckPending,
  });
  const js = jetstream(nc);
  const consumer = await js.consumers.get(subjects.intakeStream, subjects.directorConsumer);
  return new JetStreamWorkQueue(nc, consumer, subjects, { ...options, maxAckPending });
}

async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  name: string,
  limits: { ack_wait: number; max_ack_pending: number },
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      const { config } = await jsm.consumers.info(stream, name);
      if (config.ack_wait !== limits.ack_wait || config.max_ack_pending !== limits.max_ack_pending) {
        await jsm.consumers.update(stream, name, limits);
      }
      return;
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound)) throw err;
    }
    try {
      await jsm.consumers.add(stream, {
        durable_name: name,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ...limits,
      });
      return;
    } catch (err) {
      // Another process may have added it with other limits; look again once.
      if (attempt > 0) throw err;
    }
  }
}

/** {@link WorkQueue} over a JetStream work-queue stream; items survive restarts of processes and server. */
export class JetStreamWorkQueue implements WorkQueue {
  readonly durable = true;
  readonly ackWaitMs: number;
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #consumer: Consumer;
  readonly #subjects: Subjects;
  readonly #onError: BusErrorHandler;
  readonly #maxAckPending: number;
  readonly #pullExpiresMs: number;

  /** Use {@link openWorkQueue}, which also creates the stream and consumer. */
  constructor(nc: NatsConnection, consumer: Consumer, subjects: Subjects, options: WorkQueueOptions & { maxAckPending: number }) {
    this.#nc = nc;
    this.#js = jetstream(nc);
    this.#consumer = consumer;
    this.#subjects = subjects;
    this.#onError = options.onError ?? warnOnError;
    this.#maxAckPending = options.maxAckPending;
    this.#pullExpiresMs = Math.max(1000, options.pullExpiresMs ?? 5000);
    this.ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  }

  /** Publishes on `<root>.intake.<id>` with the id as JetStream message id, which the stream de-duplicates. */
  async enqueue(id: string, data: Uint8Array): Promise<{ duplicate: boolean }> {
    const ack = await this.#js.publish(this.#subjects.intake(id), data, { msgID: id });
    return { duplicate: ack.duplicate };
  }

  /** Items not acknowledged yet: waiting, or delivered and awaiting an ack (from the consumer's info). */
  async size(): Promise<number> {
    const info = await this.#consumer.info();
    return info.num_pending + info.num_ack_pending;
  }

  /**
   * Runs `concurrency` pull loops, each asking the server for one item only when it is free, so
   * this process never holds more than `concurrency` items and other processes get the rest.
   */
  consume(handler: (item: WorkItem) => Promise<void>, options: { concurrency: number }): BusSubscription {
    const { concurrency } = options;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > this.#maxAckPending) {
      throw new RangeError(`concurrency must be an integer from 1 to maxAckPending (${this.#maxAckPending}), got '${concurrency}'`);
    }
    const stop = new AbortController();
    // Pulling on a closed connection can only fail; the loops end with the connection.
    void this.#nc.closed().then(() => stop.abort());
    const pulls = new Set<ConsumerMessages>();
    const loops = Array.from({ length: concurrency }, () => this.#pullLoop(handler, stop.signal, pulls));
    return {
      async unsubscribe() {
        stop.abort();
        // Closing a pull still yields items already received; the loops nak them.
        await Promise.all([...pulls].map((p) => p.close()));
        await Promise.all(loops);
      },
    };
  }

  async #pullLoop(handler: (item: WorkItem) => Promise<void>, stop: AbortSignal, pulls: Set<ConsumerMessages>): Promise<void> {
    while (!stop.aborted) {
      let pull: ConsumerMessages | undefined;
      try {
        pull = await this.#consumer.fetch({ max_messages: 1, expires: this.#pullExpiresMs });
        pulls.add(pull);
        if (stop.aborted) await pull.close();
        for await (const msg of pull) {
          if (stop.aborted) msg.nak();
          else await this.#handle(handler, msg);
        }
      } catch (err) {
        if (stop.aborted || this.#nc.isClosed() || this.#nc.isDraining()) return;
        this.#onError(err, this.#subjects.anyIntake);
        await delay(RETRY_PAUSE_MS, undefined, { signal: stop }).catch(() => undefined);
      } finally {
        if (pull !== undefined) pulls.delete(pull);
      }
    }
  }

  async #handle(handler: (item: WorkItem) => Promise<void>, msg: JsMsg): Promise<void> {
    let settled = false;
    const item: WorkItem = {
      id: msg.subject.slice(msg.subject.lastIndexOf(".") + 1),
      data: msg.data,
      deliveries: msg.info.deliveryCount,
      async ack() {
        if (settled) return;
        settled = true;
        await msg.ackAck();
      },
      nak(delayMs?: number) {
        if (settled) return;
        settled = true;
        // NAK with a delay is honoured by nats-server since 2.7.1 (2.9.10 included).
        msg.nak(delayMs);
      },
      working() {
        if (!settled) msg.working();
      },
    };
    try {
      await handler(item);
    } catch (err) {
      this.#onError(err, msg.subject);
      // Handed back after a pause growing with its deliveries, so an item that keeps failing never loops hot.
      item.nak(retryDelayMs(item.deliveries));
    }
  }
}

/** Ensures the events stream (`subjects.eventsStream`): every task's events and result, kept 24 h on file. */
export async function ensureEventsStream(nc: NatsConnection, subjects: Subjects): Promise<void> {
  await ensureStream(await jetstreamManager(nc), {
    name: subjects.eventsStream,
    subjects: [subjects.anyTaskEvents, subjects.anyTaskResult],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    max_age: nanos(EVENTS_MAX_AGE_MS),
  });
}

/**
 * Whether `stream` holds a message on `subject` (looked up by subject, `last_by_subj`): a Director that finds a
 * task final on a redelivery checks that the result reached the events stream before the old owner died.
 */
export async function storedOnSubject(nc: NatsConnection, stream: string, subject: string): Promise<boolean> {
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  try {
    return (await jsm.streams.getMessage(stream, { last_by_subj: subject })) !== null;
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.NoMessageFound) return false;
    throw err;
  }
}

/** One stored message of a task: an event or its result. */
export interface StoredTaskMessage {
  /** `<root>.tasks.<id>.events` or `<root>.tasks.<id>.result`. */
  readonly subject: string;
  /** The body as published. */
  readonly data: Uint8Array;
  /** Sequence in the events stream; increases in publish order. */
  readonly seq: number;
}

/**
 * Reads the stored events and result of one task, in publish order. nats-server 2.9 accepts one
 * filter subject per consumer and only a subset of a single stream subject, so the events and the
 * result are read by two ordered consumers and merged by stream sequence.
 * @returns an empty list when nothing is stored for the task.
 * @throws InvalidSubjectError when `taskId` is not a valid task id.
 */
export async function readTaskEvents(nc: NatsConnection, subjects: Subjects, taskId: string): Promise<StoredTaskMessage[]> {
  const js = jetstream(nc);
  const parts = await Promise.all(
    [subjects.taskEvents(taskId), subjects.taskResult(taskId)].map((filter) => readSubject(js, subjects.eventsStream, filter)),
  );
  return parts.flat().sort((a, b) => a.seq - b.seq);
}

async function readSubject(js: JetStreamClient, stream: string, filter: string): Promise<StoredTaskMessage[]> {
  const consumer = await js.consumers.get(stream, { filter_subjects: filter });
  try {
    const { num_pending: pending } = await consumer.info(true);
    if (pending === 0) return [];
    const out: StoredTaskMessage[] = [];
    // Bounded by `expires` should messages age out between the count and the fetch.
    const batch = await consumer.fetch({ max_messages: pending, expires: 5000 });
    for await (const m of batch) {
      out.push({ subject: m.subject, data: m.data, seq: m.seq });
      if (m.info.pending === 0) break;
    }
    return out;
  } finally {
    await consumer.delete().catch(() => undefined);
  }
}
