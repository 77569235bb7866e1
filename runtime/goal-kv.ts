/**
 * The goals bucket (`<ROOT>_GOALS`): goals and Supervisor leases, in JetStream KV or in memory (embedded mode).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { StorageType } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { KeyedStore } from "../actors/goal-store.js";
import type { Subjects } from "../protocol/index.js";
import { MemoryTaskStore } from "./memory-store.js";
import { NatsTaskStore } from "./nats-store.js";

/** Opens the goals bucket, creating it on first use (file storage, history 1). */
export async function openGoalStore(nc: NatsConnection, subjects: Subjects): Promise<KeyedStore> {
  const kv = await new Kvm(nc).create(subjects.goalsBucket, { history: 1, storage: StorageType.File });
  const store = new NatsTaskStore(kv);
  return Object.assign(store, {
    async keys(): Promise<string[]> {
      const keys: string[] = [];
      for await (const key of await kv.keys()) keys.push(key);
      return keys;
    },
  });
}

/** An in-process goals bucket. */
export function memoryGoalStore(): KeyedStore {
  const store = new MemoryTaskStore();
  const keys = new Set<string>();
  return Object.assign(store, {
    async createWithRevision(key: string, value: Uint8Array) {
      const result = await MemoryTaskStore.prototype.createWithRevision.call(store, key, value);
      keys.add(key);
      return result;
    },
    async keys(): Promise<string[]> {
      return [...keys];
    },
  });
}
