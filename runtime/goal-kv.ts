/**
 * The goals bucket (`<ROOT>_GOALS`): goals and Supervisor leases, in JetStream KV or in memory (embedded mode).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { StorageType } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { KeyedStore } from "../actors/goal-store.js";
import type { Subjects } from "../protocol/index.js";
import { NatsTaskStore } from "./nats-store.js";

/** Opens the goals bucket, creating it on first use (file storage, history 1). */
export async function openGoalStore(nc: NatsConnection, subjects: Subjects): Promise<KeyedStore> {
  return new NatsTaskStore(await new Kvm(nc).create(subjects.goalsBucket, { history: 1, storage: StorageType.File }));
}
