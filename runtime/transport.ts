/**
 * Opening the transport roles run on: NATS (JetStream KV for task records, a JetStream work queue for intake)
 * or the in-process bus (embedded mode, nothing durable).
 */
import type { Logger } from "../actors/deps.js";
import { messageOf } from "../actors/deps.js";
import { TimeoutError } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import type { Subjects } from "../protocol/index.js";
import type { IndexStore } from "../actors/memory/index-store.js";
import { ackWaitMsFromEnv } from "./config.js";
import { MemoryBus, MemoryTaskStore, MemoryWorkQueue } from "./in-process/bus.js";
import { openIndexStore } from "./nats/index-store.js";
import { InMemoryIndexStore } from "./in-process/index-store.js";
import { connectNats, NatsBus } from "./nats/bus.js";
import { ensureEventsStream, openKvStore, openTaskStore, openTurnStore, type RecordRetention } from "./nats/store.js";
import { BODIES_MAX_AGE_MS } from "./nats/chunks.js";
import { wireOf } from "./nats/wire.js";
import { openWorkQueue } from "./nats/queue.js";
import type { Transport } from "./system.js";
import type { OrderedWrites } from "../actors/director/vouching.js";
import { eagerStores, once, lazyIndexStore, lazyKeyedStore, lazyTaskStore, lazyWorkQueue } from "./nats/lazy-stores.js";
import { openGoalStore } from "./goal-kv.js";
import type { NatsAuth } from "./nats/auth.js";
import { storeThroughElections, StreamMissingError, type Replication } from "./nats/replicas.js";
import { inboxPrefixFor } from "./nats/conf/permissions.js";

/** Attempts at opening the stores when JetStream does not answer in time. */
const OPEN_ATTEMPTS = 3;

/** A transport, with what it runs on. */
export interface OpenTransport extends Transport {
  /** `nats` or `memory`. */
  readonly kind: "nats" | "memory";
  /** Human-readable description (the server URL, or `in-process`). */
  readonly description: string;
  /** The global file-metadata index the Memory role serves (a KV bucket, or in memory). */
  readonly index: IndexStore;
}

/** Options of {@link openNatsTransport}. */
export interface NatsTransportOptions {
  name: string;
  log: Logger;
  ackWaitMs?: number;
  auth?: NatsAuth;
  roles?: readonly string[];
  maxReconnects?: number;
  /** Replicas of the streams and buckets created (default 1); see runtime/nats/replicas.ts. */
  replicas?: number;
  /** Scale an existing stream or bucket with fewer replicas up to `replicas` (`--scale-streams`). */
  scaleStreams?: boolean;
  /** Age and size limits of the turns bucket, when it is created (default: 7 days, no size limit). */
  records?: RecordRetention;
}

/**
 * Connects to NATS and opens the durable stores of `subjects`: those of `roles` at once (all when `roles` is absent),
 * the others on first use (a client, `roles: []`, opens none). `auth` holds the credentials (see `natsAuth`).
 * `servers` may list several URLs, comma-separated (the nodes of a cluster).
 */
export async function openNatsTransport(servers: string, subjects: Subjects, options: NatsTransportOptions): Promise<OpenTransport> {
  const nc = await connectNats({
    servers,
    name: options.name,
    ...options.auth,
    inboxPrefix: inboxPrefixFor(options.roles, options.auth?.user),
    ...(options.maxReconnects !== undefined ? { maxReconnectAttempts: options.maxReconnects } : {}),
  });
  const onError = (err: unknown, subject: string) => options.log.error({ subject, err: messageOf(err) }, "handler failed");
  const r: Replication = { replicas: options.replicas ?? 1, scale: options.scaleStreams === true, log: options.log };
  // Bodies larger than one message (a large template or input) travel by reference through this bucket, opened on
  // the first one (runtime/nats/chunks.ts).
  const bodies = lazyTaskStore(() => openKvStore(nc, subjects.bodiesBucket, { ttlMs: BODIES_MAX_AGE_MS, replication: r, checkApi: false }));
  const bus = new NatsBus(nc, { onError, bodies });
  /** The events stream's replicas, once this process made or found it. */
  let eventsReplicas: number | undefined;
  const knowEvents = (replicas: number) => void (eventsReplicas = replicas);
  try {
    const eager = eagerStores(options.roles);
    const ackWaitMs = options.ackWaitMs ?? ackWaitMsFromEnv();
    const openQueue = () => openWorkQueue(nc, subjects, { ackWaitMs, onError, replication: r });
    const open = () =>
      Promise.all([
        eager.tasks ? openTaskStore(nc, subjects, r) : lazyTaskStore(() => openTaskStore(nc, subjects, r)),
        eager.intake ? openQueue() : lazyWorkQueue(openQueue, ackWaitMs, onError, () => bus.maxMessageBytes),
        eager.index ? openIndexStore(nc, subjects, r) : lazyIndexStore(() => openIndexStore(nc, subjects, r)),
        eager.turns
          ? openTurnStore(nc, subjects, r, options.records)
          : lazyTaskStore(() => openTurnStore(nc, subjects, r, options.records)),
        eager.goals ? openGoalStore(nc, subjects, r) : lazyKeyedStore(() => openGoalStore(nc, subjects, r)),
        eager.events ? ensureEventsStream(nc, subjects, r).then(knowEvents) : undefined,
      ]);
    // A cluster creating replicated streams, or electing a leader, can leave a JetStream API request unanswered for
    // a while: asked again (creating and looking up are idempotent) before the process gives up.
    let opened: Awaited<ReturnType<typeof open>> | undefined;
    for (let attempt = 1; opened === undefined; attempt++) {
      try {
        opened = await open();
      } catch (err) {
        if (!(err instanceof TimeoutError) || attempt >= OPEN_ATTEMPTS) throw err;
        options.log.warn({ attempt, err: messageOf(err) }, "JetStream did not answer while opening the stores; asking again");
      }
    }
    const [store, queue, index, turns, goals] = opened;
    // A process opened for no Director (a CLI command that may start an embedded runtime) creates the events stream
    // when a Director starts on it: before that Director publishes the first event.
    const openEvents = eager.events ? async () => undefined : once(() => ensureEventsStream(nc, subjects, r).then(knowEvents));
    const lastPublished = async (subject: string) => (await wireOf(nc).lastBySubject(subjects.eventsStream, subject))?.data;
    // No `$JS.API.INFO` check: a client's user may not ask it, and the stream lookup is only made after a 503.
    // A result finds the events stream gone (an operator deleted it under a running Director): the stream is made
    // again, as a Director's start makes it, rather than the result handed back at every redelivery, unstored.
    // Sent in the call's own tick (the manager is made only to look the stream up after a failure): writes called one
    // after the other go out in that order.
    const jsm = () => jetstreamManager(nc, { checkAPI: false });
    /** How often the events stream was made again: a write sent before that without acknowledgement may be lost. */
    let eventsRemade = 0;
    const publishStored = async (subject: string, data: Uint8Array, id: string, signal?: AbortSignal) => {
      const store = () => storeThroughElections(jsm, wireOf(nc), subjects.eventsStream, { subject, data, id }, signal);
      let stored: Awaited<ReturnType<typeof store>>;
      try {
        stored = await store();
      } catch (err) {
        if (!(err instanceof StreamMissingError)) throw err;
        options.log.warn({ stream: subjects.eventsStream, subject }, "the events stream is gone: creating it again");
        eventsRemade++;
        knowEvents(await ensureEventsStream(nc, subjects, r));
        stored = await store();
      }
      // A write sent again (through a reconnect or an election, or a result published again by a redelivery) that the
      // stream says it holds already: what a replay can be checked against, should an event be missing from it.
      if (stored.ack.duplicate)
        options.log.info(
          { stream: subjects.eventsStream, subject, seq: stored.ack.seq, attempts: stored.attempts },
          "a write to the events stream was answered as a duplicate of one stored before",
        );
    };
    // Nothing can lose one write to the events stream and keep a later one of the same connection unless a leader
    // election comes between them, the connection is lost, or the stream is made again: on a server that is in no
    // cluster, with a stream of one replica, only the last two, which `losses` counts.
    const orderedWrites: OrderedWrites = {
      holds: () => eventsReplicas === 1 && nc.info?.cluster === undefined,
      send: (subject, data, id) => wireOf(nc).sendWithNext(subject, data, { msgId: id }),
      losses: () => wireOf(nc).disconnects + eventsRemade,
    };
    return {
      kind: "nats",
      description: bus.description,
      ...{ bus, store, queue, index, turns, goals, lastPublished, publishStored, openEvents, orderedWrites },
      close: () => bus.close(),
    };
  } catch (err) {
    await bus.close();
    throw err;
  }
}

/** Opens an in-process transport. */
export function openMemoryTransport(log: Logger): OpenTransport {
  const onError = (err: unknown, subject: string) => log.error({ subject, err: messageOf(err) }, "handler failed");
  const bus = new MemoryBus({ onError });
  return {
    kind: "memory",
    description: "in-process",
    bus,
    store: new MemoryTaskStore(),
    queue: new MemoryWorkQueue({ onError, ackWaitMs: ackWaitMsFromEnv() }),
    index: new InMemoryIndexStore(),
    turns: new MemoryTaskStore(),
    goals: new MemoryTaskStore(),
    close: () => bus.close(),
  };
}
