/**
 * Reading a task back from the events stream of a three-node cluster right after a node came back: `dirigent inspect`'s
 * reader (runtime/inspect/replay.ts) asks the stream's leader by sequence, so it has every message stored while that
 * node was down, whichever node it asks through. A consumer would not: nats-server 2.9 places one without a durable name
 * on any replica, and on the node still catching up its replay ends short (the cluster test read its replay so once,
 * and found events "missing"; docs/deploy.md, "Task events through an election").
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, type TaskId } from "../../protocol/index.js";
import { readStoredTask } from "../../runtime/inspect/replay.js";
import { ensureEventsStream } from "../../runtime/nats/store.js";
import { startTestNatsCluster, type TestNatsCluster } from "../support/nats-cluster.js";
import { randomRoot } from "../support/nats-server.js";

/** Events of other tasks stored while a replica is down: enough that it is still catching up when the reads start. */
const OTHERS = 20_000;
/** The task's own events stored then, the last ones. */
const EVENTS = 10;
/** Each read asks through whichever node the connection is on, and a consumer would land on the node behind in a third. */
const READS = 12;

let cluster: TestNatsCluster;
let nc: NatsConnection;
let writer: NatsConnection | undefined;

beforeAll(async () => {
  cluster = await startTestNatsCluster(3);
  nc = await connect({ servers: [...cluster.urls], maxReconnectAttempts: -1, reconnectTimeWait: 250 });
});

afterAll(async () => {
  await writer?.close();
  await nc?.close();
  await cluster?.stop();
});

describe("reading a task back from a three-replica events stream", () => {
  it("has every event stored while a replica was down, on each read, as soon as that replica is back", async () => {
    const subjects = createSubjects(randomRoot());
    const taskId = "t1" as TaskId;
    await ensureEventsStream(nc, subjects, { replicas: 3, scale: false, log: pino({ level: "silent" }) });
    const jsm = await jetstreamManager(nc, { timeout: 30_000 });
    const leader = (await jsm.streams.info(subjects.eventsStream)).cluster?.leader;
    const down = cluster.names.find((name) => name !== leader);
    if (leader === undefined || down === undefined) throw new Error("the events stream has no leader");
    const leaderUrl = cluster.urls[cluster.names.indexOf(leader)];
    if (leaderUrl === undefined) throw new Error(`no client URL for ${leader}`);
    // The writes go through the leader's own node: on a connection to the node killed, what the client wrote before it
    // saw the socket close is lost, and those publishes would wait out their timeout (CI saw it once in a while).
    writer = await connect({ servers: leaderUrl, maxReconnectAttempts: -1 });
    const js = jetstream(writer, { timeout: 30_000 });

    await js.publish(subjects.taskEvents("other-0"), "0");
    await cluster.kill(down);
    const writes: Promise<unknown>[] = [];
    for (let i = 1; i <= OTHERS; i++) writes.push(js.publish(subjects.taskEvents(`other-${i % 100}`), String(i)));
    await Promise.all(writes);
    for (let seq = 1; seq <= EVENTS; seq++) await js.publish(subjects.taskEvents(taskId), String(seq));
    await cluster.start(down);

    const lagging = (await jsm.streams.info(subjects.eventsStream)).cluster?.replicas?.find((r) => r.name === down);
    // The reads below are meant to find the node behind: were it current already, they would prove nothing.
    expect(lagging?.current).toBe(false);
    for (let read = 0; read < READS; read++) {
      const messages = await readStoredTask(nc, subjects, taskId);
      expect(messages.map((m) => new TextDecoder().decode(m.data))).toEqual(Array.from({ length: EVENTS }, (_, i) => String(i + 1)));
    }
  });
});
