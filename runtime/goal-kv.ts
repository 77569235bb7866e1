/**
 * The goals bucket (`<ROOT>_GOALS`): goals and Supervisor leases, in JetStream KV or in memory (embedded mode).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { KeyedStore } from "../actors/supervisor/goal-store.js";
import type { Subjects } from "../protocol/index.js";
import { openKvStore } from "./nats/store.js";
import type { Replication } from "./nats/replicas.js";

/** Opens the goals bucket, creating it on first use (file storage, history 1). */
export async function openGoalStore(nc: NatsConnection, subjects: Subjects, replication?: Replication): Promise<KeyedStore> {
  return openKvStore(nc, subjects.goalsBucket, { replication });
}
