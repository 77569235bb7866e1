/**
 * Replication of the streams and buckets the runtime creates (`DIRIGENT_REPLICAS`, `--replicas`): every stream and
 * KV bucket is created with the configured replicas; an existing one with fewer is reported, or scaled up in place
 * when the process was started with `--scale-streams` and its user may edit streams.
 */
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager, type StreamConfig, type StreamInfo } from "@nats-io/jetstream";
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "../../actors/deps.js";
import { RequestTimeoutError, TransportError } from "../../actors/bus.js";
import { StoreError, type NatsWire, type StoredAck } from "./wire.js";
import { jetStreamApi } from "../../protocol/index.js";

/** How many replicas the runtime's streams and buckets have, and whether an existing one with fewer is scaled. */
export interface Replication {
  /** `num_replicas` of every stream and bucket created: 1, 3 or 5 (a cluster needs at least that many nodes). */
  readonly replicas: number;
  /** Update an existing stream with fewer replicas to {@link replicas} (needs a user allowed to edit streams). */
  readonly scale: boolean;
  /** Receives the report of a stream with fewer replicas, and of one scaled. */
  readonly log: Logger;
}

/** The `nats` command that scales stream `name` to `replicas` (printed in the report). */
export function scaleCommand(name: string, replicas: number): string {
  return `nats stream edit ${name} --replicas ${replicas} --force`;
}

/**
 * Compares an existing stream's replicas with the configured ones: fewer is logged as a warning naming the stream
 * and the command that scales it, or, with `scale`, the stream is updated (nats-server scales it up in place; its
 * consumers follow). More replicas than configured are left as they are.
 * @returns the stream's replicas afterwards.
 */
export async function checkReplicas(jsm: JetStreamManager, info: StreamInfo, replication: Replication | undefined): Promise<number> {
  const have = info.config.num_replicas || 1;
  if (!replication || have >= replication.replicas) return have;
  const { replicas, log } = replication;
  const stream = info.config.name;
  if (!replication.scale) {
    log.warn(
      { stream, replicas: have, configured: replicas, command: scaleCommand(stream, replicas) },
      `stream ${stream} has ${have} replica(s), fewer than the configured ${replicas}: scale it as the admin user with ` +
        `'${scaleCommand(stream, replicas)}', or 'dirigent nats-setup --replicas ${replicas} --scale-streams'`,
    );
    return have;
  }
  await jsm.streams.update(stream, { num_replicas: replicas });
  log.warn({ stream, from: have, replicas }, `stream ${stream} scaled from ${have} to ${replicas} replicas (--scale-streams)`);
  return replicas;
}

/** Looks the KV bucket `bucket`'s stream up (`KV_<bucket>`) and checks its replicas as {@link checkReplicas} does. */
export async function checkBucketReplicas(jsm: JetStreamManager, bucket: string, replication: Replication | undefined): Promise<void> {
  if (!replication || replication.replicas <= 1) return;
  await checkReplicas(jsm, await jsm.streams.info(jetStreamApi.bucketStream(bucket)), replication);
}

/**
 * Creates a stream unless one of that name exists, with `replication`'s replicas. An existing stream is used as it
 * is, so a deployment can tune limits with the `nats` CLI without the runtime undoing them; only fewer replicas
 * than configured are reported (or scaled up with `--scale-streams`, see `checkReplicas`).
 * @returns the stream's replicas.
 */
export async function ensureStream(
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & { name: string },
  replication?: Replication,
): Promise<number> {
  try {
    return await checkReplicas(jsm, await jsm.streams.info(config.name), replication);
  } catch (err) {
    if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)) throw err;
  }
  const replicas = replication?.replicas ?? 1;
  try {
    await jsm.streams.add({ ...config, num_replicas: replicas });
    return replicas;
  } catch (err) {
    // Another process created it between our lookup and our add.
    const made = await streamReplicas(jsm, config.name);
    if (made === undefined) throw err;
    return made;
  }
}

async function streamMissing(jsm: JetStreamManager, name: string): Promise<boolean> {
  try {
    await jsm.streams.info(name);
    return false;
  } catch (err) {
    return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
  }
}

/** The replicas of stream `name`; `undefined` when it cannot be looked up. */
async function streamReplicas(jsm: JetStreamManager, name: string): Promise<number | undefined> {
  try {
    return (await jsm.streams.info(name)).config.num_replicas || 1;
  } catch {
    return undefined;
  }
}

/** A write found no stream to store it: none was created, or it was deleted since. */
export class StreamMissingError extends TransportError {
  override name = "StreamMissingError";
}

/** How long {@link storeThroughElections} keeps trying: a replicated stream elects a new leader within a few seconds, but two
 * leader losses in a row on a loaded machine kept one unavailable past 15 s (an event of the cluster test went unstored). */
const ELECTION_PATIENCE_MS = 60_000;

/**
 * Stores `data` on `subject` with message id `id` in `stream` and waits for the acknowledgement, asking again while
 * no stream answers (503: a replicated stream electing a leader after losing a node) or the answer times out. A
 * repeat that was stored already is a duplicate of `id`, stored once. Resolves with the acknowledgement and the attempts
 * it took.
 * Once `signal` is aborted it is not asked again: the attempt under way ends, and its error is thrown.
 * @throws {StreamMissingError} when `stream` does not exist.
 * @throws {StoreError} when the stream refuses it, or nothing answers within 60 s.
 */
export async function storeThroughElections(
  jsm: () => Promise<JetStreamManager>,
  wire: NatsWire,
  stream: string,
  message: { subject: string; data: Uint8Array; id: string },
  signal?: AbortSignal,
): Promise<{ ack: StoredAck; attempts: number }> {
  const deadline = Date.now() + ELECTION_PATIENCE_MS;
  let looked = false;
  for (let attempt = 0; ; attempt++) {
    try {
      return { ack: await wire.store(message.subject, message.data, { msgId: message.id }), attempts: attempt + 1 };
    } catch (err) {
      const unanswered = err instanceof RequestTimeoutError;
      const transient = (err instanceof StoreError && err.status === 503) || unanswered;
      if (!transient || Date.now() > deadline || signal?.aborted === true) throw err;
      // No stream at all (nothing created it, or it was deleted) is no responder: no use waiting; looked up at the
      // first write no one answered for. A write that went unanswered reached a stream electing its leader, and is asked
      // again without a lookup, which would wait as long again for the API. A lookup that fails is an election too.
      if (!unanswered && !looked) {
        looked = true;
        if (await streamMissing(await jsm(), stream))
          throw new StreamMissingError(`stream ${stream} does not exist: '${message.subject}' not stored`, message.subject, { cause: err });
      }
      await delay(Math.min(1000, 100 * 2 ** attempt), undefined, signal ? { signal } : {}).catch(() => {
        throw err;
      });
    }
  }
}
