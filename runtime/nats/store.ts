/**
 * JetStream storage of the runtime: task records (and the Handler's turn records, the goals) in KV buckets, and the
 * events stream that keeps each task's events and result for replay. The intake work queue is in `nats-queue.ts`.
 */
import { RetentionPolicy, StorageType, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { nanos, type NatsConnection } from "@nats-io/transport-node";
import { randomBytes } from "node:crypto";
import { MAX_STORED_VALUE_BYTES, StoreRefusedError, type CreateResult, type Revisioned, type TaskStore } from "../../actors/bus.js";
import type { Subjects } from "../../protocol/subjects.js";
import {
  chunkBytes,
  chunkKey,
  CHUNK_TOKEN,
  CHUNKS_HEADER,
  formatPointer,
  isChunkKey,
  join,
  parsePointer,
  split,
  type ChunkPointer,
} from "./chunks.js";
import { parseApiAnswer, STORE_TIMEOUT_MS, StoreError, wireOf, WRONG_LAST_SEQUENCE, type NatsWire, type StoreOptions } from "./wire.js";
import { messageOf } from "../../protocol/errors.js";
import { checkBucketReplicas, ensureStream, type Replication } from "./replicas.js";
import { jetStreamApi } from "../../protocol/index.js";

export { ensureStream };

/** How long the events stream keeps a task's events and result. */
export const EVENTS_MAX_AGE_MS = 24 * 60 * 60 * 1000;

/** What a KV key may hold (as the KV client checks it): no wildcards, no spaces, no empty tokens. */
const KEY = /^[-/=\w]+(\.[-/=\w]+)*$/;

/** Chunks written or read at once. */
const CHUNKS_AT_ONCE = 8;
/** Writes of a chunked value by {@link NatsTaskStore.put} before it gives up (the key changed on every one). */
const PUT_ATTEMPTS = 10;
/** Keys remembered as holding a chunked value. */
const REMEMBERED_CHUNKED = 10_000;
/** `max_payload` assumed before the server's INFO is known (the server default, 1 MiB). */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;
const EMPTY = new Uint8Array(0);
const encoder = new TextEncoder();

/** The key's last entry: its value (a pointer's is empty), or a delete marker (`DEL`, `PURGE`). */
interface Entry {
  value: Uint8Array;
  revision: number;
  deleted: boolean;
  /** Set when the value is stored in chunks. */
  pointer?: ChunkPointer | undefined;
}

/**
 * {@link TaskStore} over a JetStream KV bucket; data survives restarts of processes and server. Reads and writes go
 * over the connection's {@link NatsWire} (a write is a publish to `$KV.<bucket>.<key>` answered by the stream, a read
 * the subject's last message); listing keys uses the KV client.
 *
 * A value larger than one message (the server's `max_payload` less a margin, at most the bucket's maximum value size)
 * is stored in chunks behind a pointer entry, transparently for callers (runtime/nats/chunks.ts); one over
 * {@link MAX_STORED_VALUE_BYTES}, or one the bucket refuses as too large, is a {@link StoreRefusedError}.
 */
export class NatsTaskStore implements TaskStore {
  readonly durable = true;
  readonly #kv: KV;
  readonly #nc: NatsConnection;
  readonly #wire: NatsWire;
  readonly #stream: string;
  readonly #subjectPrefix: string;
  /** The bucket's maximum value size (`-1`: none), asked on the first chunked write. */
  #maxValueSize: Promise<number> | undefined;
  /** Keys this process saw holding a chunked value: a plain value written over one purges its chunks. */
  readonly #chunked = new Set<string>();

  constructor(kv: KV, nc: NatsConnection, bucket: string) {
    this.#kv = kv;
    this.#nc = nc;
    this.#wire = wireOf(nc);
    this.#stream = jetStreamApi.bucketStream(bucket);
    this.#subjectPrefix = jetStreamApi.bucketKey(bucket, "");
  }

  #subject(key: string): string {
    if (!KEY.test(key)) throw new RangeError(`invalid key '${key}'`);
    return this.#subjectPrefix + key;
  }

  /** The largest value stored as one entry. */
  #fits(): number {
    return chunkBytes(this.#nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD, -1);
  }

  /**
   * The keys of the bucket matching `filter` (every key when absent), without the store's chunk keys: the subjects of
   * its stream (`STREAM.INFO` with a subjects filter, paged by the client), not a consumer, which role users may not
   * create. A deleted key is listed while its delete marker is kept; reading it finds nothing.
   */
  async keys(filter?: string): Promise<string[]> {
    const jsm = await jetstreamManager(this.#nc, { checkAPI: false });
    const info = await jsm.streams.info(this.#stream, { subjects_filter: `${this.#subjectPrefix}${filter ?? ">"}` });
    return Object.keys(info.state.subjects ?? {})
      .map((subject) => subject.slice(this.#subjectPrefix.length))
      .filter((key) => !isChunkKey(key));
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
    if (value.byteLength <= this.#fits()) {
      const seq = await this.#store(key, value, {});
      if (seq !== undefined) await this.#purgeReplaced(key, seq);
      return;
    }
    // A chunked value is written by compare-and-set (runtime/nats/chunks.ts): on the revision read just before.
    for (let attempt = 0; attempt < PUT_ATTEMPTS; attempt++) {
      const last = await this.#last(key);
      if ((await this.#write(key, value, last?.revision ?? 0)) !== undefined) return;
    }
    throw new StoreError(`could not write '${key}': it changed during each of ${PUT_ATTEMPTS} attempts`, this.#subject(key), 0, 0);
  }

  async getWithRevision(key: string): Promise<Revisioned | undefined> {
    // A pointer whose chunks are gone was replaced meanwhile (its chunks purged): the newer value is read.
    for (let attempt = 0; attempt < 3; attempt++) {
      const last = await this.#last(key);
      if (last === undefined || last.deleted) return undefined;
      if (last.pointer === undefined) return { value: last.value, revision: last.revision };
      this.#remember(key);
      const value = await this.#readChunks(key, last.pointer);
      if (value !== undefined) return { value, revision: last.revision };
    }
    throw new StoreError(`the chunks of '${key}' are missing`, this.#subject(key), 0, 0);
  }

  /** The key's last entry, a pointer not followed. */
  async #last(key: string): Promise<Entry | undefined> {
    const last = await this.#wire.lastBySubject(this.#stream, this.#subject(key));
    if (last === undefined) return undefined;
    const operation = last.header("KV-Operation");
    const pointer = last.header(CHUNKS_HEADER);
    return {
      value: last.data,
      revision: last.seq,
      deleted: operation === "DEL" || operation === "PURGE",
      ...(pointer === undefined ? {} : { pointer: parsePointer(pointer) ?? badPointer(key, pointer) }),
    };
  }

  async update(key: string, value: Uint8Array, expectedRevision: number): Promise<number | undefined> {
    return this.#write(key, value, expectedRevision);
  }

  /** Writes if the key's last revision is `expected` (0: the key has none); `undefined` when it is not. */
  async #write(key: string, value: Uint8Array, expected: number): Promise<number | undefined> {
    if (value.byteLength > MAX_STORED_VALUE_BYTES) {
      throw new StoreRefusedError(
        `value of ${value.byteLength} bytes for '${key}' exceeds the store's maximum of ${MAX_STORED_VALUE_BYTES} bytes`,
        key,
        value.byteLength,
      );
    }
    if (value.byteLength > this.#fits()) return this.#writeChunked(key, value, expected);
    const seq = await this.#store(key, value, { expectedLastSubjectSequence: expected });
    if (seq !== undefined) await this.#purgeReplaced(key, seq);
    return seq;
  }

  /** Stores one entry; `undefined` when its expected last sequence did not match. */
  async #store(key: string, value: Uint8Array, options: StoreOptions): Promise<number | undefined> {
    try {
      return (await this.#wire.store(this.#subject(key), value, options)).seq;
    } catch (err) {
      if (err instanceof StoreError && err.errCode === WRONG_LAST_SEQUENCE) return undefined;
      throw refusal(err, key, value.byteLength) ?? err;
    }
  }

  /** Chunks first, then the pointer (compare-and-set), then the key's older chunks are purged. */
  async #writeChunked(key: string, value: Uint8Array, expected: number): Promise<number | undefined> {
    this.#maxValueSize ??= this.#kv.status().then(
      (status) => status.maxValueSize,
      () => -1,
    );
    const size = chunkBytes(this.#nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD, await this.#maxValueSize);
    const pieces = split(value, size);
    const pointer: ChunkPointer = { id: randomBytes(8).toString("hex"), count: pieces.length, bytes: value.byteLength };
    const seqs: number[] = [];
    for (let at = 0; at < pieces.length; at += CHUNKS_AT_ONCE) {
      const batch = pieces.slice(at, at + CHUNKS_AT_ONCE).map(async (piece, i) => {
        const seq = await this.#store(chunkKey(pointer.id, at + i, key), piece, {});
        if (seq === undefined) throw new StoreError(`chunk of '${key}' refused`, this.#subject(key), 0, 0);
        return seq;
      });
      seqs.push(...(await Promise.all(batch)));
    }
    const seq = await this.#store(key, EMPTY, {
      expectedLastSubjectSequence: expected,
      headers: { [CHUNKS_HEADER]: formatPointer(pointer) },
    });
    if (seq === undefined) {
      // Refused: the key changed, or this very pointer landed and was sent again after a reconnect.
      const last = await this.#last(key);
      if (last?.pointer?.id === pointer.id) return last.revision;
      await this.#purge(`${CHUNK_TOKEN}.${pointer.id}.*.${key}`).catch(() => undefined);
      return undefined;
    }
    this.#remember(key);
    await this.#purge(`${CHUNK_TOKEN}.*.*.${key}`, Math.min(...seqs)).catch(() => undefined);
    return seq;
  }

  /** The chunks of `pointer`, joined; `undefined` when one is gone (purged by a newer write). */
  async #readChunks(key: string, pointer: ChunkPointer): Promise<Uint8Array | undefined> {
    const pieces: Uint8Array[] = [];
    for (let at = 0; at < pointer.count; at += CHUNKS_AT_ONCE) {
      const batch = Array.from({ length: Math.min(CHUNKS_AT_ONCE, pointer.count - at) }, (_, i) =>
        this.#wire.lastBySubject(this.#stream, this.#subject(chunkKey(pointer.id, at + i, key))),
      );
      for (const chunk of await Promise.all(batch)) {
        if (chunk === undefined) return undefined;
        pieces.push(chunk.data);
      }
    }
    const bytes = pieces.reduce((sum, p) => sum + p.byteLength, 0);
    if (bytes !== pointer.bytes)
      throw new StoreError(`the chunks of '${key}' hold ${bytes} bytes, not ${pointer.bytes}`, this.#subject(key), 0, 0);
    return join(pieces, bytes);
  }

  #remember(key: string): void {
    this.#chunked.delete(key);
    this.#chunked.add(key);
    if (this.#chunked.size > REMEMBERED_CHUNKED) this.#chunked.delete(this.#chunked.values().next().value as string);
  }

  /** After a plain value replaced one this process knows was chunked: its chunks are purged (stored before `seq`). */
  async #purgeReplaced(key: string, seq: number): Promise<void> {
    if (!this.#chunked.delete(key)) return;
    await this.#purge(`${CHUNK_TOKEN}.*.*.${key}`, seq).catch(() => undefined);
  }

  /** Purges the bucket's entries matching `filter` (a key pattern), those stored before `before` when given. */
  async #purge(filter: string, before?: number): Promise<void> {
    // Nothing is stored before the first sequence (and nats-server 2.9 purges every match when asked for `seq: 1`).
    if (before !== undefined && before <= 1) return;
    const api = jetStreamApi.streamPurge(this.#stream);
    const body = JSON.stringify({ filter: this.#subjectPrefix + filter, ...(before === undefined ? {} : { seq: before }) });
    parseApiAnswer(await this.#wire.request(api, encoder.encode(body), { timeoutMs: STORE_TIMEOUT_MS }), api);
  }
}

function badPointer(key: string, header: string): never {
  throw new StoreError(`the entry of '${key}' has a malformed ${CHUNKS_HEADER} header '${header}'`, key, 0, 0);
}

/** JetStream's error code of a message larger than the stream's maximum message size (a bucket's maximum value size). */
const MESSAGE_TOO_LARGE = 10054;

/** A {@link StoreRefusedError} when `err` says the value is too large (permanent); `undefined` for any other error. */
export function refusal(err: unknown, key: string, bytes: number): StoreRefusedError | undefined {
  const message = messageOf(err);
  const tooLarge =
    (err instanceof StoreError && err.errCode === MESSAGE_TOO_LARGE) ||
    /max_payload|maximum payload|exceeds maximum|too large/i.test(message);
  return tooLarge ? new StoreRefusedError(`cannot store '${key}' (${bytes} bytes): ${message}`, key, bytes, { cause: err }) : undefined;
}

/** Opens (creating on first use) the KV bucket `bucket` as a {@link NatsTaskStore}: file storage, history 1. */
export async function openKvStore(
  nc: NatsConnection,
  bucket: string,
  options: { ttlMs?: number; maxBytes?: number; replication?: Replication | undefined; checkApi?: boolean } = {},
): Promise<NatsTaskStore> {
  // `checkApi: false`: no `$JS.API.INFO` first, which a submitter's user may not ask (the bodies bucket).
  const checkAPI = options.checkApi ?? true;
  const kv = await new Kvm(jetstream(nc, { checkAPI })).create(bucket, {
    history: 1,
    storage: StorageType.File,
    replicas: options.replication?.replicas ?? 1,
    ...(options.ttlMs === undefined ? {} : { ttl: options.ttlMs }),
    ...(options.maxBytes === undefined || options.maxBytes <= 0 ? {} : { max_bytes: options.maxBytes }),
  });
  await checkBucketReplicas(await jetstreamManager(nc, { checkAPI }), bucket, options.replication);
  return new NatsTaskStore(kv, nc, bucket);
}

/** Opens the task bucket (`subjects.tasksBucket`), creating it on first use (file storage, history 1). */
export function openTaskStore(nc: NatsConnection, subjects: Subjects, replication?: Replication): Promise<NatsTaskStore> {
  return openKvStore(nc, subjects.tasksBucket, { replication });
}

/** How long the turns bucket keeps a record by default: a task re-run later than this starts its sessions over. */
export const TURNS_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

/** How long the turns bucket keeps a record and how many bytes it holds (0: no limit); set when it is created. */
export interface RecordRetention {
  maxAgeMs: number;
  maxBytes: number;
}

/**
 * Opens the turns bucket (`subjects.turnsBucket`): the Handler's records of sessions and scripts, the node records.
 * `retention` applies when the bucket is created; an existing bucket keeps its own (`nats kv edit` changes it).
 */
export function openTurnStore(
  nc: NatsConnection,
  subjects: Subjects,
  replication?: Replication,
  retention: RecordRetention = { maxAgeMs: TURNS_MAX_AGE_MS, maxBytes: 0 },
): Promise<NatsTaskStore> {
  return openKvStore(nc, subjects.turnsBucket, { ttlMs: retention.maxAgeMs, maxBytes: retention.maxBytes, replication });
}

/** Ensures the events stream (`subjects.eventsStream`): every task's events and result, kept 24 h on file. Returns its replicas. */
export async function ensureEventsStream(nc: NatsConnection, subjects: Subjects, replication?: Replication): Promise<number> {
  return ensureStream(
    await jetstreamManager(nc),
    {
      name: subjects.eventsStream,
      subjects: [subjects.anyTaskEvents, subjects.anyTaskResult],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      max_age: nanos(EVENTS_MAX_AGE_MS),
    },
    replication,
  );
}
