/**
 * The intake work queue over JetStream: a work-queue stream on `<root>.intake.*`, de-duplicated by task id, read
 * through one durable pull consumer shared by every Director.
 *
 * Pulling speaks the pull protocol directly: one pull at a time waits on the server, asking for as many messages as
 * this process has slots free; the next goes out when it is served or expires. A process therefore holds at most
 * `concurrency` items, with one request per batch instead of a subscription and a request per item.
 */
import { chunkBytes } from "./chunks.js";
import { Fifo } from "./fifo.js";
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { createInbox, millis, nanos, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { retryDelayMs, type BusSubscription, type WorkItem, type WorkQueue } from "../../actors/bus.js";
import type { Subjects } from "../../protocol/subjects.js";
import { warnOnError, type BusErrorHandler } from "../bus-handlers.js";
import { ensureStream, type Replication } from "./replicas.js";
import { parseApiAnswer, StoreError, wireOf, type NatsWire } from "./wire.js";
import { isPermissionViolation } from "./auth.js";
import { jetStreamApi } from "../../protocol/index.js";

/** Options of {@link openWorkQueue}. */
export interface WorkQueueOptions {
  /** Receives handler errors (the item is naked) and pull errors (pulling resumes after a pause). Default: a process warning. */
  onError?: BusErrorHandler;
  /** Redeliver an item neither acked nor naked this long after delivery. Default 30 s. */
  ackWaitMs?: number;
  /** Unacknowledged items the server hands out over all processes; bounds `concurrency`. Default 20,000. */
  maxAckPending?: number;
  /** A repeated id within this window is a duplicate. Default 2 minutes. */
  duplicateWindowMs?: number;
  /** How long one pull waits on the server for items. Default 5 s (minimum 1 s). */
  pullExpiresMs?: number;
  /** Replicas of the intake stream (created with them; an existing one with fewer is reported or scaled). */
  replication?: Replication;
}

const RETRY_PAUSE_MS = 500;
/** Items started per turn of the event loop. */
const START_BATCH = 64;
const DEFAULT_ACK_WAIT_MS = 30_000;
/** How many discarded items a queue remembers, to drop a delivery of one that was already on its way. */
const REMEMBERED_DISCARDS = 1000;
/** Default of {@link WorkQueueOptions.maxAckPending}: room for 10,000 tasks in flight in one process and more in others. */
export const DEFAULT_MAX_ACK_PENDING = 20_000;

/**
 * Ensures the intake stream and the durable consumer, then returns the queue. An existing consumer gets this process's
 * `ackWaitMs` and `maxAckPending` if its user may update it (the last to open wins), else the queue takes its values.
 */
export async function openWorkQueue(nc: NatsConnection, subjects: Subjects, options: WorkQueueOptions = {}): Promise<JetStreamWorkQueue> {
  const jsm = await jetstreamManager(nc);
  await ensureStream(
    jsm,
    {
      name: subjects.intakeStream,
      subjects: [subjects.anyIntake],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
      // Lets any Director look a queued task up by its subject (`peek`).
      allow_direct: true,
    },
    options.replication,
  );
  const wanted = {
    ack_wait: nanos(options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS),
    max_ack_pending: options.maxAckPending ?? DEFAULT_MAX_ACK_PENDING,
  };
  const limits = await ensureConsumer(jsm, subjects.intakeStream, subjects.directorConsumer, wanted);
  const [ackWaitMs, maxAckPending] = [millis(limits.ack_wait), limits.max_ack_pending];
  if (limits.ack_wait !== wanted.ack_wait || maxAckPending !== wanted.max_ack_pending)
    options.replication?.log.warn(
      { consumer: subjects.directorConsumer, ackWaitMs, maxAckPending, configuredAckWaitMs: millis(wanted.ack_wait) },
      `the intake consumer keeps ack wait ${ackWaitMs} ms and max ack pending ${maxAckPending}, which this user may not ` +
        "change: run 'dirigent nats-setup' as the root's admin user with this DIRIGENT_ACK_WAIT_MS",
    );
  return new JetStreamWorkQueue(nc, subjects, { ...options, ackWaitMs, maxAckPending });
}

type ConsumerLimits = { ack_wait: number; max_ack_pending: number };

/** Creates the durable consumer, or updates an existing one to `limits`; returns the limits it has afterwards. */
async function ensureConsumer(jsm: JetStreamManager, stream: string, name: string, limits: ConsumerLimits): Promise<ConsumerLimits> {
  for (let attempt = 0; ; attempt++) {
    try {
      const { config } = await jsm.consumers.info(stream, name);
      const have = { ack_wait: config.ack_wait ?? limits.ack_wait, max_ack_pending: config.max_ack_pending ?? limits.max_ack_pending };
      if (have.ack_wait === limits.ack_wait && have.max_ack_pending === limits.max_ack_pending) return limits;
      // Role users may not update it (`dirigent nats-setup` made it): the queue then keeps the consumer's limits.
      return await jsm.consumers.update(stream, name, limits).then(
        () => limits,
        (err: unknown) => (isPermissionViolation(err) ? have : Promise.reject(err)),
      );
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
      return limits;
    } catch (err) {
      // Another process may have added it with other limits; look again once.
      if (attempt > 0) throw err;
    }
  }
}

const ACK = new TextEncoder().encode("+ACK");
const NAK = new TextEncoder().encode("-NAK");
const WORKING = new TextEncoder().encode("+WPI");
const encoder = new TextEncoder();

/** One pull request on the server: how many items it may still deliver, and until when. */
interface Pull {
  readonly id: string;
  remaining: number;
  readonly expiresAt: number;
}

/**
 * Delivery count, stream sequence and time stored (ms since the epoch, by the server's clock; absent when unreadable)
 * from an acknowledgement subject: `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`, or with
 * domain and account hash `$JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>.<token>`.
 */
export function deliveryOf(ackSubject: string): { deliveries: number; seq: number; queuedAt?: number } | undefined {
  const tokens = ackSubject.split(".");
  const at = tokens.length === 9 ? 4 : tokens.length >= 11 ? 6 : -1;
  if (at < 0 || tokens[0] !== "$JS" || tokens[1] !== "ACK") return undefined;
  const deliveries = Number(tokens[at]);
  const seq = Number(tokens[at + 1]);
  // Nanoseconds: more digits than a double holds exactly, plenty for milliseconds.
  const queuedAt = Math.floor(Number(tokens[at + 3]) / 1e6);
  if (!Number.isInteger(deliveries) || !Number.isInteger(seq)) return undefined;
  return { deliveries, seq, ...(Number.isSafeInteger(queuedAt) && queuedAt > 0 ? { queuedAt } : {}) };
}

/**
 * What a status message on a pull's reply subject says: an idle heartbeat; the pull ended with nothing more to
 * deliver (408: expired; 404: nothing to deliver); or a failure (409: refused or cut, e.g. by a leadership change;
 * 503: nobody serves the consumer).
 */
function pullStatus(msg: Msg, next: string): "heartbeat" | "ended" | StoreError {
  const status = msg.headers?.code ?? 0;
  if (status === 100) return "heartbeat";
  if (status === 408 || status === 404) return "ended";
  return new StoreError(
    `intake pull: ${status === 503 ? "no responders (JetStream not ready, or the stream is gone)" : `${status} ${msg.headers?.description ?? ""}`.trim()}`,
    next,
    0,
    status,
  );
}

/**
 * Watches for a pull the server may have lost: every `everyMs`, `overdue` (a pull whose end never came, because the
 * server restarted or the connection broke, is forgotten once overdue); after a reconnect, `reconnected` (the server
 * may have lost its waiting pull). The timer, for the consumer to clear.
 */
function watchLostPulls(
  nc: NatsConnection,
  everyMs: number,
  pulls: { overdue(): void; reconnected(): void; stopped(): boolean },
): ReturnType<typeof setInterval> {
  const sweep = setInterval(pulls.overdue, everyMs);
  sweep.unref();
  void (async () => {
    for await (const s of nc.status()) {
      if (pulls.stopped()) return;
      if (s.type === "reconnect") pulls.reconnected();
    }
  })().catch(() => undefined);
  return sweep;
}

/** {@link WorkQueue} over a JetStream work-queue stream; items survive restarts of processes and server. */
export class JetStreamWorkQueue implements WorkQueue {
  readonly durable = true;
  readonly ackWaitMs: number;
  readonly #nc: NatsConnection;
  readonly #wire: NatsWire;
  readonly #subjects: Subjects;
  readonly #onError: BusErrorHandler;
  readonly #maxAckPending: number;
  readonly #pullExpiresMs: number;
  /** Sequences of the items this process discarded lately, oldest first. */
  readonly #discarded = new Set<number>();

  /** One message of the connection's server (its `max_payload` less room for subject and headers). */
  get maxItemBytes(): number {
    return chunkBytes(this.#nc.info?.max_payload ?? 1024 * 1024, -1);
  }

  /** Use {@link openWorkQueue}, which also creates the stream and consumer. */
  constructor(nc: NatsConnection, subjects: Subjects, options: WorkQueueOptions & { maxAckPending: number }) {
    this.#nc = nc;
    this.#wire = wireOf(nc);
    this.#subjects = subjects;
    this.#onError = options.onError ?? warnOnError;
    this.#maxAckPending = options.maxAckPending;
    this.#pullExpiresMs = Math.max(1000, options.pullExpiresMs ?? 5000);
    this.ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  }

  /** Publishes on `<root>.intake.<id>` with the id as JetStream message id, which the stream de-duplicates. */
  async enqueue(id: string, data: Uint8Array): Promise<{ duplicate: boolean; seq: number }> {
    const ack = await this.#wire.store(this.#subjects.intake(id), data, { msgId: id });
    return { duplicate: ack.duplicate, seq: ack.seq };
  }

  /** The item queued under `id` (waiting or delivered, not acknowledged yet), looked up by its subject. */
  async peek(id: string): Promise<{ data: Uint8Array; seq: number } | undefined> {
    return this.#wire.lastBySubject(this.#subjects.intakeStream, this.#subjects.intake(id));
  }

  /**
   * Deletes the item at `seq` from the stream (`STREAM.MSG.DELETE`); one already gone is fine. A delivery of it already
   * received by this process (sent before the delete) is dropped rather than handed out.
   */
  async discard(_id: string, seq: number): Promise<void> {
    this.#discarded.add(seq);
    if (this.#discarded.size > REMEMBERED_DISCARDS) this.#discarded.delete(this.#discarded.values().next().value as number);
    const api = jetStreamApi.streamMsgDelete(this.#subjects.intakeStream);
    const answer = await this.#wire.request(api, encoder.encode(JSON.stringify({ seq, no_erase: true })), { timeoutMs: 5000 });
    try {
      parseApiAnswer(answer, api);
    } catch (err) {
      // No message at that sequence: acknowledged, or discarded, already.
      if (!(err instanceof StoreError && /not found|no message found/i.test(err.message))) throw err;
    }
  }

  /** Items not acknowledged yet: waiting, or delivered and awaiting an ack (from the consumer's info). */
  async size(): Promise<number> {
    const consumer = await jetstream(this.#nc).consumers.get(this.#subjects.intakeStream, this.#subjects.directorConsumer);
    const info = await consumer.info();
    return info.num_pending + info.num_ack_pending;
  }

  /**
   * Delivers items to `handler`, at most `concurrency` at once: one pull at a time asks for the free slots; an item
   * that arrives beyond them (from a pull thought lost that was not) waits here for a slot.
   */
  consume(handler: (item: WorkItem) => Promise<void>, options: { concurrency: number }): BusSubscription {
    const { concurrency } = options;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > this.#maxAckPending) {
      throw new RangeError(`concurrency must be an integer from 1 to maxAckPending (${this.#maxAckPending}), got '${concurrency}'`);
    }
    const nc = this.#nc;
    const wire = this.#wire;
    const next = jetStreamApi.consumerNext(this.#subjects.intakeStream, this.#subjects.directorConsumer);
    const inbox = `${createInbox(this.#wire.inboxPrefix)}.`;
    const waiting = new Fifo<Msg>();
    const inFlight = new Set<Promise<void>>();
    /** The one pull waiting on the server; JetStream delivers messages under their own subject, so a pull's messages
     * cannot be told apart from another's: with one at a time, every message is the current pull's. */
    let current: Pull | undefined;
    let running = 0;
    let pullId = 0;
    let stopped = false;
    let pausedUntil = 0;
    let retry: ReturnType<typeof setTimeout> | undefined;

    const pull = () => {
      if (current !== undefined || stopped || nc.isClosed() || nc.isDraining() || Date.now() < pausedUntil) return;
      const credit = concurrency - running - waiting.length;
      if (credit <= 0) return;
      const id = (++pullId).toString(36);
      current = { id, remaining: credit, expiresAt: Date.now() + this.#pullExpiresMs };
      try {
        wire.publish(next, encoder.encode(JSON.stringify({ batch: credit, expires: nanos(this.#pullExpiresMs) })), { reply: inbox + id });
      } catch (err) {
        current = undefined;
        failed(err);
      }
    };
    const failed = (err: unknown) => {
      if (stopped || nc.isClosed()) return;
      this.#onError(err, this.#subjects.anyIntake);
      pausedUntil = Date.now() + RETRY_PAUSE_MS;
      clearTimeout(retry);
      retry = setTimeout(pull, RETRY_PAUSE_MS);
    };
    const start = (msg: Msg) => {
      // Discarded here after the server sent it: gone from the stream, so the ack only settles the delivery.
      if (this.#discarded.has(deliveryOf(msg.reply ?? "")?.seq ?? 0)) return void wire.publish(msg.reply ?? "", ACK);
      running++;
      const done = this.#handle(handler, msg).finally(() => {
        running--;
        inFlight.delete(done);
        if (waiting.length > 0) schedule();
        else pull();
      });
      inFlight.add(done);
    };
    // Items are started a batch per turn of the event loop, after its I/O: a pull of thousands of items does not
    // hold the loop while their handlers start, so the answers other work waits for (a submission's stored ack)
    // are read in between.
    let scheduled = false;
    const schedule = () => {
      if (scheduled || stopped) return;
      scheduled = true;
      setImmediate(() => {
        scheduled = false;
        for (let n = 0; n < START_BATCH && running < concurrency && waiting.length > 0; n++) start(waiting.shift() as Msg);
        if (waiting.length > 0 && running < concurrency) schedule();
        pull();
      });
    };

    const sub = nc.subscribe(`${inbox}*`, {
      callback: (err, msg) => {
        if (err !== null) return failed(err);
        // Deliveries carry their acknowledgement subject as reply; status messages carry none.
        if (!msg.reply) {
          const status = pullStatus(msg, next);
          if (status === "heartbeat") return;
          // Status messages come on the pull's own reply subject.
          if (current?.id === msg.subject.slice(inbox.length)) current = undefined;
          return status === "ended" ? pull() : failed(status);
        }
        if (current !== undefined && --current.remaining <= 0) current = undefined;
        if (stopped) return void wire.publish(msg.reply, NAK);
        waiting.push(msg);
        schedule();
      },
    });

    const sweep = watchLostPulls(nc, this.#pullExpiresMs, {
      overdue: () => {
        if (current !== undefined && Date.now() > current.expiresAt + 2000) current = undefined;
        pull();
      },
      reconnected: () => {
        current = undefined;
        pull();
      },
      stopped: () => stopped,
    });
    pull();

    return {
      async unsubscribe() {
        stopped = true;
        clearInterval(sweep);
        clearTimeout(retry);
        // Items received but not started go back at once; those running finish.
        for (let msg = waiting.shift(); msg !== undefined; msg = waiting.shift()) if (msg.reply) wire.publish(msg.reply, NAK);
        if (!nc.isClosed()) await sub.drain().catch(() => undefined);
        await Promise.all(inFlight);
      },
    };
  }

  async #handle(handler: (item: WorkItem) => Promise<void>, msg: Msg): Promise<void> {
    const reply = msg.reply ?? "";
    const delivery = deliveryOf(reply) ?? { deliveries: 1, seq: 0 };
    const wire = this.#wire;
    let settled = false;
    const item: WorkItem = {
      id: msg.subject.slice(msg.subject.lastIndexOf(".") + 1),
      data: msg.data,
      deliveries: delivery.deliveries,
      seq: delivery.seq,
      ...(delivery.queuedAt === undefined ? {} : { queuedAt: delivery.queuedAt }),
      async ack() {
        if (settled) return;
        settled = true;
        // A plain ack, not a double one: every ack follows the stored outcome, so a lost one costs only a redelivery
        // that is acked and ignored, and no caller waits for the server's confirmation.
        wire.publish(reply, ACK);
      },
      nak(delayMs?: number) {
        if (settled) return;
        settled = true;
        // NAK with a delay is honoured by nats-server since 2.7.1 (2.9.10 included).
        wire.publish(
          reply,
          delayMs === undefined || delayMs <= 0 ? NAK : encoder.encode(`-NAK ${JSON.stringify({ delay: nanos(delayMs) })}`),
        );
      },
      working() {
        if (!settled) wire.publish(reply, WORKING);
      },
    };
    const failed = (err: unknown) => {
      this.#onError(err, msg.subject);
      // Handed back after a pause growing with its deliveries, so an item that keeps failing never loops hot.
      item.nak(retryDelayMs(item.deliveries));
    };
    // A promise callback, not an await in a try: a frame suspended here would be held for as long as the task runs.
    let handled: Promise<void>;
    try {
      handled = handler(item);
    } catch (err) {
      failed(err);
      return;
    }
    return handled.catch(failed);
  }
}
