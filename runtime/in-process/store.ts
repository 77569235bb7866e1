/**
 * In-process {@link TaskStore} and {@link WorkQueue} for the embedded single-process mode and fast unit tests.
 * Same semantics as the JetStream implementations (KV key rules, compare-and-set, de-duplication, redelivery after
 * the ack wait), minus durability.
 */
import {
  MAX_STORED_VALUE_BYTES,
  StoreRefusedError,
  type BusSubscription,
  type CreateResult,
  type Revisioned,
  type TaskStore,
  type WorkItem,
  type WorkQueue,
} from "../../actors/bus.js";
import { InvalidSubjectError } from "../../protocol/errors.js";
import { TASK_ID_PATTERN } from "../../protocol/ids.js";
import { warnOnError, type BusErrorHandler } from "../bus-handlers.js";

/**
 * A copy of `bytes` in memory of its own, so that what the in-process bus or store hands over shares no memory with
 * its sender, as bytes through NATS would not (`slice` does not copy a Node `Buffer`, which the codec produces: it
 * returns a view of the same memory).
 */
export const copyOf = (bytes: Uint8Array): Uint8Array => new Uint8Array(bytes);

const KV_KEY = /^[-/_=.a-zA-Z0-9]+$/;

/**
 * In-process {@link TaskStore}: a map of copies. Keys follow the NATS KV rules. A value over `maxValueBytes`
 * ({@link MAX_STORED_VALUE_BYTES} by default, as the NATS store) is refused with a {@link StoreRefusedError}.
 */
export class MemoryTaskStore implements TaskStore {
  readonly durable = false;
  readonly #values = new Map<string, Revisioned>();
  // One counter for the whole store, as a KV bucket's revisions are its stream's sequence.
  #revision = 0;
  readonly #maxValueBytes: number;

  constructor(options: { maxValueBytes?: number } = {}) {
    this.#maxValueBytes = options.maxValueBytes ?? MAX_STORED_VALUE_BYTES;
  }

  /** The keys matching `filter` (`*` one token, `>` the rest), every key when absent. */
  async keys(filter?: string): Promise<string[]> {
    const all = [...this.#values.keys()];
    return filter === undefined ? all : all.filter((key) => matches(filter.split("."), key.split(".")));
  }

  async create(key: string, value: Uint8Array): Promise<CreateResult> {
    return (await this.createWithRevision(key, value)) === undefined ? "exists" : "created";
  }

  async createWithRevision(key: string, value: Uint8Array): Promise<number | undefined> {
    checkKey(key);
    if (this.#values.has(key)) return undefined;
    return this.#write(key, value);
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    checkKey(key);
    const entry = this.#values.get(key);
    return entry && copyOf(entry.value);
  }

  async put(key: string, value: Uint8Array): Promise<void> {
    checkKey(key);
    this.#write(key, value);
  }

  async getWithRevision(key: string): Promise<Revisioned | undefined> {
    checkKey(key);
    const entry = this.#values.get(key);
    return entry && { value: copyOf(entry.value), revision: entry.revision };
  }

  async update(key: string, value: Uint8Array, expectedRevision: number): Promise<number | undefined> {
    checkKey(key);
    if (this.#values.get(key)?.revision !== expectedRevision) return undefined;
    return this.#write(key, value);
  }

  #write(key: string, value: Uint8Array): number {
    if (value.byteLength > this.#maxValueBytes) {
      throw new StoreRefusedError(
        `value of ${value.byteLength} bytes for '${key}' exceeds the store's maximum of ${this.#maxValueBytes} bytes`,
        key,
        value.byteLength,
      );
    }
    this.#revision += 1;
    this.#values.set(key, { value: copyOf(value), revision: this.#revision });
    return this.#revision;
  }
}

/** Whether the tokens of a key match those of a filter, as a NATS subject matches a wildcard subject. */
function matches(filter: readonly string[], key: readonly string[]): boolean {
  for (const [i, token] of filter.entries()) {
    if (token === ">") return key.length > i;
    if (i >= key.length || (token !== "*" && token !== key[i])) return false;
  }
  return filter.length === key.length;
}

function checkKey(key: string): void {
  if (!KV_KEY.test(key) || key.startsWith(".") || key.endsWith(".")) throw new TypeError(`invalid key '${key}'`);
}

/** Options of {@link MemoryWorkQueue}. */
export interface MemoryWorkQueueOptions {
  /** Receives handler errors (the item is naked) with the item id. Default: a process warning. */
  onError?: BusErrorHandler;
  /** An item neither acked nor naked this long after delivery is delivered again. Default 30 s. */
  ackWaitMs?: number;
  /** A repeated id within this window is a duplicate. Default 2 minutes, as the JetStream stream. */
  duplicateWindowMs?: number;
}

interface Entry {
  readonly id: string;
  readonly data: Uint8Array;
  readonly seq: number;
  deliveries: number;
}

interface Consumer {
  readonly handler: (item: WorkItem) => Promise<void>;
  readonly concurrency: number;
  running: number;
  readonly inFlight: Set<Promise<void>>;
}

/**
 * In-process {@link WorkQueue} with the semantics of the JetStream one: de-duplication by id within
 * a window, at most `concurrency` handlers per consumer, `nak` and unacknowledged items come back,
 * several consumers share the items. Nothing survives the process (`durable` is false).
 */
export class MemoryWorkQueue implements WorkQueue {
  readonly durable = false;
  readonly #onError: BusErrorHandler;
  readonly ackWaitMs: number;
  readonly #windowMs: number;
  readonly #pending: Entry[] = [];
  readonly #seen = new Map<string, number>();
  readonly #consumers: Consumer[] = [];
  /** Items queued and not acknowledged yet, by id. */
  readonly #live = new Map<string, Entry>();
  /** Items removed while delivered: not handed out again. */
  readonly #discarded = new WeakSet<Entry>();
  #seq = 0;
  #turn = 0;
  #pumpQueued = false;
  #unsettled = 0;

  constructor(options: MemoryWorkQueueOptions = {}) {
    this.#onError = options.onError ?? warnOnError;
    this.ackWaitMs = options.ackWaitMs ?? 30_000;
    this.#windowMs = options.duplicateWindowMs ?? 120_000;
  }

  async enqueue(id: string, data: Uint8Array): Promise<{ duplicate: boolean; seq: number }> {
    // The JetStream queue puts ids into subjects; refuse the same ids here.
    if (!TASK_ID_PATTERN.test(id)) throw new InvalidSubjectError(`illegal task id token '${id}'`, id);
    const now = Date.now();
    for (const [seenId, at] of this.#seen) {
      if (now - at < this.#windowMs) break;
      this.#seen.delete(seenId);
    }
    if (this.#seen.has(id)) return { duplicate: true, seq: this.#live.get(id)?.seq ?? 0 };
    this.#seen.set(id, now);
    const entry: Entry = { id, data: copyOf(data), seq: ++this.#seq, deliveries: 0 };
    this.#pending.push(entry);
    this.#live.set(id, entry);
    this.#schedulePump();
    return { duplicate: false, seq: entry.seq };
  }

  async discard(id: string, seq: number): Promise<void> {
    const entry = this.#live.get(id);
    if (entry === undefined || entry.seq !== seq) return;
    this.#live.delete(id);
    const at = this.#pending.indexOf(entry);
    if (at >= 0) this.#pending.splice(at, 1);
    this.#discarded.add(entry);
  }

  async peek(id: string): Promise<{ data: Uint8Array; seq: number } | undefined> {
    const entry = this.#live.get(id);
    return entry === undefined ? undefined : { data: copyOf(entry.data), seq: entry.seq };
  }

  /** Items not acknowledged yet: waiting, or delivered and neither acked nor naked. */
  async size(): Promise<number> {
    return this.#pending.length + this.#unsettled;
  }

  consume(handler: (item: WorkItem) => Promise<void>, options: { concurrency: number }): BusSubscription {
    const { concurrency } = options;
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new RangeError(`concurrency must be a positive integer, got '${concurrency}'`);
    const consumer: Consumer = { handler, concurrency, running: 0, inFlight: new Set() };
    this.#consumers.push(consumer);
    this.#schedulePump();
    return {
      unsubscribe: async () => {
        const index = this.#consumers.indexOf(consumer);
        if (index >= 0) this.#consumers.splice(index, 1);
        await Promise.all(consumer.inFlight);
      },
    };
  }

  #schedulePump(): void {
    if (this.#pumpQueued) return;
    this.#pumpQueued = true;
    queueMicrotask(() => {
      this.#pumpQueued = false;
      this.#pump();
    });
  }

  /** Hands pending items to consumers with free slots, taking turns. */
  #pump(): void {
    while (this.#pending.length > 0) {
      const consumer = this.#nextFreeConsumer();
      const entry = consumer !== undefined ? this.#pending.shift() : undefined;
      if (consumer === undefined || entry === undefined) return;
      this.#deliver(consumer, entry);
    }
  }

  #nextFreeConsumer(): Consumer | undefined {
    const count = this.#consumers.length;
    for (let i = 0; i < count; i++) {
      const consumer = this.#consumers[(this.#turn + i) % count];
      if (consumer !== undefined && consumer.running < consumer.concurrency) {
        this.#turn = (this.#turn + i + 1) % count;
        return consumer;
      }
    }
    return undefined;
  }

  #deliver(consumer: Consumer, entry: Entry): void {
    entry.deliveries += 1;
    this.#unsettled += 1;
    let settled = false;
    const settle = (requeue: boolean) => {
      if (settled) return;
      settled = true;
      this.#unsettled -= 1;
      clearTimeout(timer);
      if (!requeue && this.#live.get(entry.id) === entry) this.#live.delete(entry.id);
      if (requeue && !this.#discarded.has(entry)) {
        // JetStream hands out redeliveries before new messages.
        this.#pending.unshift(entry);
        this.#schedulePump();
      }
    };
    let timer = setTimeout(() => settle(true), this.ackWaitMs);
    timer.unref();
    const item: WorkItem = {
      id: entry.id,
      data: copyOf(entry.data),
      deliveries: entry.deliveries,
      seq: entry.seq,
      ack: async () => settle(false),
      nak: () => settle(true),
      working: () => {
        if (settled) return;
        clearTimeout(timer);
        timer = setTimeout(() => settle(true), this.ackWaitMs);
        timer.unref();
      },
    };
    consumer.running += 1;
    const running = (async () => {
      try {
        await consumer.handler(item);
      } catch (err) {
        this.#onError(err, entry.id);
        settle(true);
      } finally {
        consumer.running -= 1;
        this.#schedulePump();
      }
    })();
    consumer.inFlight.add(running);
    void running.finally(() => consumer.inFlight.delete(running));
  }
}
