/**
 * Replicas of the runtime's streams and buckets on a three-node cluster: created with the configured replicas; an
 * existing one with fewer is reported (a warning naming it and the command that scales it), or scaled up in place
 * with `scale` (`--scale-streams`).
 */
import { jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Logger } from "../../actors/deps.js";
import { createSubjects } from "../../protocol/index.js";
import { ensureStream, type Replication } from "../../runtime/nats/replicas.js";
import { openKvStore } from "../../runtime/nats/store.js";
import { openWorkQueue } from "../../runtime/nats/queue.js";
import { startTestNatsCluster, type TestNatsCluster } from "../support/nats-cluster.js";
import { randomRoot } from "../support/nats-server.js";

let cluster: TestNatsCluster;
let nc: NatsConnection;

beforeAll(async () => {
  cluster = await startTestNatsCluster(3);
  nc = await connect({ servers: [...cluster.urls] });
});

afterAll(async () => {
  await nc?.close();
  await cluster?.stop();
});

/** A logger that keeps its warnings. */
function recordingLog(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const ignore = () => undefined;
  return { warnings, debug: ignore, info: ignore, error: ignore, warn: (_obj, msg) => void warnings.push(msg ?? "") };
}

describe("replicas of the runtime's streams and buckets", () => {
  it("creates the intake stream and a bucket with the configured replicas", async () => {
    const subjects = createSubjects(randomRoot());
    const log = recordingLog();
    const replication: Replication = { replicas: 3, scale: false, log };
    await openWorkQueue(nc, subjects, { replication });
    await openKvStore(nc, subjects.tasksBucket, { replication });
    const jsm = await jetstreamManager(nc);
    expect((await jsm.streams.info(subjects.intakeStream)).config.num_replicas).toBe(3);
    expect((await jsm.streams.info(`KV_${subjects.tasksBucket}`)).config.num_replicas).toBe(3);
    expect(log.warnings).toEqual([]);
  });

  it("reports an existing stream with fewer replicas, and scales it with scale", async () => {
    const jsm = await jetstreamManager(nc);
    const name = `R_${randomRoot().toUpperCase()}`;
    const config = { name, subjects: [`${name.toLowerCase()}.>`], retention: RetentionPolicy.Limits, storage: StorageType.File };
    await ensureStream(jsm, config);
    expect((await jsm.streams.info(name)).config.num_replicas).toBe(1);

    const log = recordingLog();
    await ensureStream(jsm, config, { replicas: 3, scale: false, log });
    expect((await jsm.streams.info(name)).config.num_replicas).toBe(1);
    expect(log.warnings).toEqual([
      `stream ${name} has 1 replica(s), fewer than the configured 3: scale it as the admin user with ` +
        `'nats stream edit ${name} --replicas 3 --force', or 'dirigent nats-setup --replicas 3 --scale-streams'`,
    ]);

    await ensureStream(jsm, config, { replicas: 3, scale: true, log });
    expect((await jsm.streams.info(name)).config.num_replicas).toBe(3);
    expect(log.warnings[1]).toBe(`stream ${name} scaled from 1 to 3 replicas (--scale-streams)`);

    // More than configured is left as it is, and not reported.
    await ensureStream(jsm, config, { replicas: 1, scale: true, log });
    expect((await jsm.streams.info(name)).config.num_replicas).toBe(3);
    expect(log.warnings).toHaveLength(2);
  });

  it("reports a bucket with fewer replicas when it is opened", async () => {
    const bucket = randomRoot().toUpperCase();
    await openKvStore(nc, bucket);
    const log = recordingLog();
    await openKvStore(nc, bucket, { replication: { replicas: 3, scale: false, log } });
    expect(log.warnings).toHaveLength(1);
    expect(log.warnings[0]).toContain(`stream KV_${bucket} has 1 replica(s)`);
    await openKvStore(nc, bucket, { replication: { replicas: 3, scale: true, log } });
    expect((await (await jetstreamManager(nc)).streams.info(`KV_${bucket}`)).config.num_replicas).toBe(3);
  });
});
