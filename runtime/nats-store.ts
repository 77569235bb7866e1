/**
 * JetStream storage of the runtime: task records (and the Handler's turn records, the goals) in KV buckets, and the
 * events stream that keeps each task's events and result for replay. The intake work queue is in `nats-queue.ts`.
 */
import {
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
} from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { nanos, type NatsConnection } from "@nats-io/transport-node";
import type { CreateResult, Revisioned, TaskStore } from "../actors/bus.js";
import type { Subjects } from "../protocol/subjects.js";
import { StoreError, wireOf, WRONG_LAST_SEQUENCE, type NatsWire } from "./nats-wire.js";

/** How long the events stream keeps a task's events and result. */
export const EVENTS_MAX_AGE_MS = 24 * 60 * 60 * 1000;

/** What a KV key may hold (as the KV client checks it): no wildcards, no spaces, no empty tokens. */
const KEY = /^[-/=\w]+(\.[-/=\w]+)*$/;

/**
 * {@link TaskStore} over a JetStream KV bucket; data survives restarts of processes and server. Reads and writes go
 * over the connection's {@link NatsWire} (a write is a publish to `$KV.<bucket>.<key>` answered by the stream, a read
 * the subject's last message); listing keys uses the KV client.
 */
export class NatsTaskStore implements TaskStore {
  readonly durable = true;
  readonly #kv: KV;
  readonly #wire: NatsWire;
  readonly #stream: string;
  readonly #subjectPrefix: string;

  constructor(kv: KV, nc: NatsConnection, bucket: string) {
    this.#kv = kv;
    this.#wire = wireOf(nc);
    this.#stream = `KV_${bucket}`;
    this.#subjectPrefix = `$KV.${bucket}.`;
  }

  #subject(key: string): string {
    if (!KEY.test(key)) throw new RangeError(`invalid key '${key}'`);
    return this.#subjectPrefix + key;
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
    const revision = await this.#write(key, value, 0);
    // A key whose last entry is a delete marker (a purged record) may be created again.
    if (revision !== undefined) return revision;
    const last = await this.#last(key);
    return last?.deleted === true ? this.#write(key, value, last.revision) : undefined;
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    return (await this.getWithRevision(key))?.value;
  }

  async put(key: string, value: Uint8Array): Promise<void> {
    await this.#wire.store(this.#subject(key), value);
  }

  async getWithRevision(key: string): Promise<Revisioned | undefined> {
    const last = await this.#last(key);
    return last === undefined || last.deleted ? undefined : { value: last.value, revision: last.revision };
  }

  /** The key's last entry: its value, or a delete marker (`DEL`, `PURGE`). */
  async #last(key: string): Promise<{ value: Uint8Array; revision: number; deleted: boolean } | undefined> {
    const last = await this.#wire.lastBySubject(this.#stream, this.#subject(key));
    if (last === undefined) return undefined;
    const operation = last.header("KV-Operation");
    return { value: last.data, revision: last.seq, deleted: operation === "DEL" || operation === "PURGE" };
  }

  async update(key: string, value: Uint8Array, expectedRevision: number): Promise<number | undefined> {
    return this.#write(key, value, expectedRevision);
  }

  /** Writes if the key's last revision is `expected` (0: the key has none); `undefined` when it is not. */
  async #write(key: string, value: Uint8Array, expected: number): Promise<number | undefined> {
    try {
      return (await this.#wire.store(this.#subject(key), value, { expectedLastSubjectSequence: expected })).seq;
    } catch (err) {
      if (err instanceof StoreError && err.errCode === WRONG_LAST_SEQUENCE) return undefined;
      throw err;
    }
  }
}

/** Opens (creating on first use) the KV bucket `bucket` as a {@link NatsTaskStore}: file storage, history 1. */
export async function openKvStore(nc: NatsConnection, bucket: string, options: { ttlMs?: number } = {}): Promise<NatsTaskStore> {
  const kv = await new Kvm(nc).create(bucket, { history: 1, storage: StorageType.File, ...(options.ttlMs === undefined ? {} : { ttl: options.ttlMs }) });
  return new NatsTaskStore(kv, nc, bucket);
}

/** Opens the task bucket (`subjects.tasksBucket`), creating it on first use (file storage, history 1). */
export function openTaskStore(nc: NatsConnection, subjects: Subjects): Promise<NatsTaskStore> {
  return openKvStore(nc, subjects.tasksBucket);
}

/** How long the turns bucket keeps a record: a task re-run later than this starts its sessions over. */
export const TURNS_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

/** Opens the turns bucket (`subjects.turnsBucket`): the Handler's records of sessions and scripts. */
export function openTurnStore(nc: NatsConnection, subjects: Subjects): Promise<NatsTaskStore> {
  return openKvStore(nc, subjects.turnsBucket, { ttlMs: TURNS_MAX_AGE_MS });
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
