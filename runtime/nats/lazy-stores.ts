/**
 * Stores opened on first use. A process opens eagerly only what its roles need, so a user with the permissions of
 * one role (see `nats-permissions.ts`) never touches another role's streams and buckets; a client opens none.
 */
import type { BusSubscription, TaskStore, WorkItem, WorkQueue } from "../../actors/bus.js";
import type { IndexStore } from "../../actors/memory/index-store.js";
import type { KeyedStore } from "../../actors/supervisor/goal-store.js";
import type { BusErrorHandler } from "../bus-handlers.js";

/** What a process running `roles` opens at start; `undefined` roles: everything (the default). */
export function eagerStores(roles: readonly string[] | undefined): {
  tasks: boolean;
  intake: boolean;
  events: boolean;
  index: boolean;
  turns: boolean;
  goals: boolean;
} {
  const has = (role: string) => roles === undefined || roles.includes(role);
  return {
    tasks: has("director"),
    intake: has("director"),
    events: has("director"),
    index: has("memory"),
    turns: has("handler"),
    goals: has("supervisor"),
  };
}

/** `open`, called once: its promise is shared, and forgotten when it rejects (the next call tries again). */
export function once<T>(open: () => Promise<T>): () => Promise<T> {
  let opened: Promise<T> | undefined;
  return () => {
    opened ??= open().catch((err: unknown) => {
      opened = undefined;
      throw err;
    });
    return opened;
  };
}

/** A {@link TaskStore} opened on its first call. */
export function lazyTaskStore(open: () => Promise<TaskStore>): TaskStore {
  const store = once(open);
  return {
    durable: true,
    open: async () => void (await store()),
    create: async (key, value) => (await store()).create(key, value),
    createWithRevision: async (key, value) => (await store()).createWithRevision(key, value),
    get: async (key) => (await store()).get(key),
    put: async (key, value) => (await store()).put(key, value),
    getWithRevision: async (key) => (await store()).getWithRevision(key),
    update: async (key, value, revision) => (await store()).update(key, value, revision),
    keys: async (filter) => {
      const opened = await store();
      if (!opened.keys) throw new Error("this store cannot list its keys");
      return opened.keys(filter);
    },
  };
}

/** A {@link KeyedStore} opened on its first call. */
export function lazyKeyedStore(open: () => Promise<KeyedStore>): KeyedStore {
  const store = once(open);
  return { ...lazyTaskStore(store), keys: async (filter) => (await store()).keys(filter) };
}

/** An {@link IndexStore} opened on its first call. */
export function lazyIndexStore(open: () => Promise<IndexStore>): IndexStore {
  const store = once(open);
  return {
    durable: true,
    getGlobalIndex: async () => (await store()).getGlobalIndex(),
    updateGlobalIndex: async (entries, options) => (await store()).updateGlobalIndex(entries, options),
    watch: async (onGeneration) => (await store()).watch(onGeneration),
  };
}

/**
 * A {@link WorkQueue} opened on its first call; `consume` starts once it is open (errors go to `onError`). Its
 * {@link WorkQueue.maxItemBytes} is `maxItemBytes()`, known before it opens.
 */
export function lazyWorkQueue(
  open: () => Promise<WorkQueue>,
  ackWaitMs: number,
  onError: BusErrorHandler,
  maxItemBytes?: () => number,
): WorkQueue {
  const queue = once(open);
  return {
    ackWaitMs,
    ...(maxItemBytes === undefined
      ? {}
      : {
          get maxItemBytes() {
            return maxItemBytes();
          },
        }),
    enqueue: async (id, data) => (await queue()).enqueue(id, data),
    peek: async (id) => (await queue()).peek(id),
    discard: async (id, seq) => (await queue()).discard(id, seq),
    consume(handler: (item: WorkItem) => Promise<void>, options: { concurrency: number }): BusSubscription {
      let stopped = false;
      const subscription = queue().then(
        (q) => (stopped ? undefined : q.consume(handler, options)),
        (err: unknown) => {
          onError(err, "intake");
          return undefined;
        },
      );
      return {
        async unsubscribe() {
          stopped = true;
          await (await subscription)?.unsubscribe();
        },
      };
    },
  };
}
