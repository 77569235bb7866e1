/**
 * The global file-metadata index in a JetStream KV bucket (`subjects.indexBucket`), shared by every process.
 *
 * Layout: a generation's entries are written as JSON chunks under `gen.<generation>.<n>`; then the one key
 * `current` is flipped to `{generation, chunks, entries}` with a compare-and-set on its revision. Readers follow
 * `current`, so they see either the old or the new generation, never part of one. The writer purges the
 * generation it replaced from the bucket's stream after the flip (no delete markers pile up); a reader that loses a
 * chunk to that purge starts again from `current`.
 *
 * Watching needs no consumer (role users may create none, runtime/nats/conf/permissions.ts): every write of `current` is
 * also a plain message on its subject `$KV.<bucket>.current`, which a watcher takes as a reason to read the pointer.
 */
import { StorageType, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { checkBucketReplicas, type Replication } from "./replicas.js";
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import {
  checkEntries,
  IndexConflictError,
  type IndexEntry,
  type IndexSnapshot,
  type IndexStore,
  type IndexWatch,
  type UpdateIndexOptions,
} from "../../actors/memory/index-store.js";
import type { Subjects } from "../../protocol/subjects.js";
import { IndexEntry as IndexEntrySchema } from "../../protocol/memory.js";
import { newGeneration } from "../in-process/index-store.js";
import { Semaphore } from "../../actors/limit.js";
import { jetStreamApi } from "../../protocol/index.js";

/** The pointer key. */
export const CURRENT_KEY = "current";
/** Largest chunk written, in bytes of JSON; well under the 1 MB default `max_payload`. */
export const CHUNK_BYTES = 256 * 1024;

const Pointer = z.object({ generation: z.string(), chunks: z.number().int().nonnegative(), entries: z.number().int().nonnegative() });
type Pointer = z.infer<typeof Pointer>;
const Chunk = z.array(IndexEntrySchema);

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Chunk requests in flight at once. All at once, an index of 100,000 entries with identifiers (400 chunks, 100 MB)
 * made the last requests time out on a loaded machine.
 */
const CHUNKS_IN_FLIGHT = 16;

/** `task(0)` … `task(count - 1)`, at most {@link CHUNKS_IN_FLIGHT} at once, results in order. */
function inFlight<T>(count: number, task: (n: number) => Promise<T>): Promise<T[]> {
  const slots = new Semaphore(CHUNKS_IN_FLIGHT);
  return Promise.all(Array.from({ length: count }, (_, n) => slots.run(() => task(n))));
}

/** Key of chunk `n` of `generation`. */
export const chunkKey = (generation: string, n: number): string => `gen.${generation}.${n}`;

/** {@link IndexStore} over a JetStream KV bucket; the index survives restarts of processes and server. */
export class NatsIndexStore implements IndexStore {
  readonly durable = true;
  readonly #kv: KV;
  readonly #bucket: string;
  readonly #jsm: JetStreamManager;
  readonly #nc: NatsConnection;

  /** Use {@link openIndexStore}, which also creates the bucket. */
  constructor(kv: KV, bucket: string, jsm: JetStreamManager, nc: NatsConnection) {
    this.#kv = kv;
    this.#bucket = bucket;
    this.#jsm = jsm;
    this.#nc = nc;
  }

  async getGlobalIndex(): Promise<IndexSnapshot> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const pointer = await this.#pointer();
      if (pointer === undefined) return { generation: "", entries: [] };
      const chunks = await inFlight(pointer.value.chunks, (n) => this.#kv.get(chunkKey(pointer.value.generation, n)));
      if (chunks.every((c) => c !== null && c.operation === "PUT")) {
        const entries = chunks.flatMap((c) => parseJson(Chunk, c?.value, `chunk of generation ${pointer.value.generation}`));
        return { generation: pointer.value.generation, entries };
      }
      // A newer generation replaced this one while we read it.
    }
    throw new Error(`index bucket '${this.#bucket}': the generation kept changing while it was read`);
  }

  async updateGlobalIndex(entries: readonly IndexEntry[], options: UpdateIndexOptions = {}): Promise<string> {
    checkEntries(entries);
    const generation = newGeneration();
    const chunks = toChunks(entries);
    await inFlight(chunks.length, (n) => this.#kv.put(chunkKey(generation, n), chunks[n] ?? new Uint8Array(0)));
    const value = encoder.encode(JSON.stringify({ generation, chunks: chunks.length, entries: entries.length } satisfies Pointer));
    for (let attempt = 0; ; attempt++) {
      const previous = await this.#pointer();
      const current = previous?.value.generation ?? "";
      if (options.ifGeneration !== undefined && options.ifGeneration !== current) {
        await this.#purge(generation, chunks.length);
        throw new IndexConflictError(options.ifGeneration, current);
      }
      try {
        if (previous === undefined) await this.#kv.create(CURRENT_KEY, value);
        else await this.#kv.update(CURRENT_KEY, value, previous.revision);
      } catch (err) {
        // Another writer flipped the pointer between our read and our write: replace theirs instead, unless this
        // write was conditional (the next round finds the other generation and says so).
        if (attempt < 10) continue;
        await this.#purge(generation, chunks.length);
        throw err;
      }
      if (previous !== undefined) await this.#purge(previous.value.generation, previous.value.chunks);
      return generation;
    }
  }

  /**
   * Reports the current generation now and after each change. A write of the pointer (even one its compare-and-set
   * refused) and a reconnect (writes missed meanwhile) make it read the pointer again; reads run one at a time, so the
   * last report is the pointer as it is.
   */
  async watch(onGeneration: (generation: string) => void): Promise<IndexWatch> {
    let stopped = false;
    let reported: string | undefined;
    let reading: Promise<void> = Promise.resolve();
    const read = () => {
      reading = reading
        .then(async () => {
          if (stopped) return;
          const generation = (await this.#pointer())?.value.generation ?? "";
          if (!stopped && generation !== reported) {
            reported = generation;
            onGeneration(generation);
          }
        })
        .catch(() => undefined);
    };
    const sub = this.#nc.subscribe(jetStreamApi.bucketKey(this.#bucket, CURRENT_KEY), { callback: () => read() });
    void (async () => {
      for await (const status of this.#nc.status()) {
        if (stopped) return;
        if (status.type === "reconnect") read();
      }
    })().catch(() => undefined);
    // The subscription is in place on the server before the first read, so no write falls between the two.
    await this.#nc.flush();
    read();
    await reading;
    return {
      stop: async () => {
        stopped = true;
        sub.unsubscribe();
        await reading;
      },
    };
  }

  async #pointer(): Promise<{ value: Pointer; revision: number } | undefined> {
    const entry = await this.#kv.get(CURRENT_KEY);
    if (entry === null || entry.operation !== "PUT") return undefined;
    return { value: parseJson(Pointer, entry.value, "index pointer"), revision: entry.revision };
  }

  /** Removes a generation's chunks from the bucket's stream, leaving no delete markers behind (one call, any size). */
  async #purge(generation: string, chunks: number): Promise<void> {
    if (chunks === 0) return;
    await this.#jsm.streams.purge(jetStreamApi.bucketStream(this.#bucket), {
      filter: jetStreamApi.bucketKey(this.#bucket, `gen.${generation}.>`),
    });
  }
}

/** Opens the index bucket (`subjects.indexBucket`), creating it on first use (file storage, history 1). */
export async function openIndexStore(nc: NatsConnection, subjects: Subjects, replication?: Replication): Promise<NatsIndexStore> {
  const replicas = replication?.replicas ?? 1;
  const kv = await new Kvm(nc).create(subjects.indexBucket, { history: 1, storage: StorageType.File, replicas });
  const jsm = await jetstreamManager(nc);
  await checkBucketReplicas(jsm, subjects.indexBucket, replication);
  return new NatsIndexStore(kv, subjects.indexBucket, jsm, nc);
}

/** Splits entries into JSON arrays of at most {@link CHUNK_BYTES} (a single larger entry gets a chunk of its own). */
function toChunks(entries: readonly IndexEntry[]): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  let parts: string[] = [];
  let size = 2;
  for (const entry of entries) {
    const json = JSON.stringify({ path: entry.path, metadata: entry.metadata, stamp: entry.stamp, identifiers: entry.identifiers });
    const bytes = Buffer.byteLength(json) + 1;
    if (parts.length > 0 && size + bytes > CHUNK_BYTES) {
      chunks.push(encoder.encode(`[${parts.join(",")}]`));
      parts = [];
      size = 2;
    }
    parts.push(json);
    size += bytes;
  }
  if (parts.length > 0) chunks.push(encoder.encode(`[${parts.join(",")}]`));
  return chunks;
}

function parseJson<S extends z.ZodType>(schema: S, bytes: Uint8Array | undefined, what: string): z.infer<S> {
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(bytes));
  } catch (err) {
    throw new Error(`${what} is not JSON`, { cause: err });
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new Error(`${what} is malformed: ${parsed.error.message}`);
  return parsed.data;
}
