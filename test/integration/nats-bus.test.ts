import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/subjects.js";
import { connectNats, NatsBus, type NatsConnection } from "../../runtime/nats/bus.js";
import { NatsServerNotFoundError, NatsServerStartError, startNatsServer } from "../../runtime/nats/server-process.js";
import { Kvm } from "@nats-io/kv";
import { ensureEventsStream, NatsTaskStore, openKvStore, openTaskStore } from "../../runtime/nats/store.js";
import { readStoredTask } from "../../runtime/inspect/replay.js";
import { openWorkQueue } from "../../runtime/nats/queue.js";
import { busContract } from "../support/bus-contract.js";
import { NATS_CONF, randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder, text } from "../support/recorder.js";
import { tid } from "../support/ids.js";

let server: TestNatsServer;
beforeAll(async () => {
  server = await startTestNatsServer();
});
afterAll(() => server.stop());

const connect = (name: string) => connectNats({ servers: server.url, name, reconnectTimeWaitMs: 50 });

/** Resolves at the connection's next `reconnect` status; subscribe before causing the disconnect. */
function nextReconnect(nc: NatsConnection): Promise<void> {
  const statuses = nc.status();
  return (async () => {
    for await (const status of statuses) if (status.type === "reconnect") return;
  })();
}

busContract("NatsBus", async ({ subjects, onError, ackWaitMs }) => {
  const nc = await connect("contract");
  const bus = new NatsBus(nc, { onError });
  const [store, queue] = await Promise.all([openTaskStore(nc, subjects), openWorkQueue(nc, subjects, { onError, ackWaitMs })]);
  return { bus, store, queue, close: () => bus.close() };
});

describe("NatsBus over a real server", () => {
  it("carries a request, its answer with keepalives, and a message larger than one NATS message by reference", async () => {
    const subjects = createSubjects(randomRoot());
    const nc = await connect("bodies");
    const bodies = await openKvStore(nc, subjects.bodiesBucket, { ttlMs: 60_000 });
    const bus = new NatsBus(nc, { onError: () => undefined, bodies });
    const big = (fill: number) => new Uint8Array(3 * 1024 * 1024).fill(fill);
    expect(bus.maxMessageBytes).toBeLessThan(big(0).byteLength);
    const seen = new Recorder<number>();
    const sub = bus.subscribe(`${subjects.submit}.big`, (msg) => {
      seen.push(msg.data.byteLength);
      msg.respond(big(msg.data[0] === 1 ? 2 : 4));
    });
    await bus.flush();
    const answer = await bus.request(`${subjects.submit}.big`, big(1), { timeoutMs: 30_000 });
    expect([answer.byteLength, answer[0], answer.at(-1)]).toEqual([3 * 1024 * 1024, 2, 2]);
    const kept = await bus.request(`${subjects.submit}.big`, big(3), { timeoutMs: 30_000, idleTimeoutMs: 10_000 });
    expect([kept.byteLength, kept[0]]).toEqual([3 * 1024 * 1024, 4]);
    expect(seen.values).toEqual([3 * 1024 * 1024, 3 * 1024 * 1024]);
    // A reference to no stored body is answered, not left unanswered.
    const bogus = await bus.request(`${subjects.submit}.big`, new Uint8Array(), {
      timeoutMs: 30_000,
      headers: { "Dirigent-Body": "body.00000000-0000-0000-0000-000000000000 5" },
    });
    expect(JSON.parse(text.decode(bogus))).toMatchObject({ error: { code: "INVALID_MESSAGE" } });
    expect(seen.values).toHaveLength(2);
    await sub.unsubscribe();
    await bus.close();
  });

  it("describes itself by the server URL", async () => {
    const bus = new NatsBus(await connect("describe"), { onError: () => undefined });
    expect(bus.description).toBe(`nats://127.0.0.1:${server.port}`);
    await bus.close();
  });

  it("keeps the work queue and task store across a server restart", async () => {
    const subjects = createSubjects(randomRoot());
    const nc = await connect("restart-queue");
    const bus = new NatsBus(nc, { onError: () => undefined });
    const [store, queue] = await Promise.all([openTaskStore(nc, subjects), openWorkQueue(nc, subjects)]);
    expect(queue.durable).toBe(true);
    await store.put("t1", text.encode("record"));
    for (const id of ["t1", "t2", "t3"]) await queue.enqueue(id, text.encode(id));

    const reconnected = nextReconnect(nc);
    await server.restart();
    await reconnected;

    expect(text.decode((await store.get("t1")) ?? new Uint8Array())).toBe("record");
    expect(await queue.enqueue("t2", text.encode("again"))).toMatchObject({ duplicate: true });
    const got = new Recorder<string>();
    const sub = queue.consume(
      async (item) => {
        await item.ack();
        got.push(`${item.id}:${item.deliveries}`);
      },
      { concurrency: 2 },
    );
    await got.count(3);
    expect([...got.values].sort()).toEqual(["t1:1", "t2:1", "t3:1"]);
    await sub.unsubscribe();
    await bus.close();
  });

  it("keeps a running consumer pulling across a server restart", async () => {
    const subjects = createSubjects(randomRoot());
    const nc = await connect("restart-consumer");
    const errors = new Recorder<string>();
    const queue = await openWorkQueue(nc, subjects, { onError: (err) => errors.push(String(err)) });
    const got = new Recorder<string>();
    const sub = queue.consume(
      async (item) => {
        await item.ack();
        got.push(item.id);
      },
      { concurrency: 2 },
    );
    await queue.enqueue("before", text.encode("x"));
    await got.count(1);

    const reconnected = nextReconnect(nc);
    await server.restart();
    await reconnected;
    await queue.enqueue("after", text.encode("y"));
    await got.count(2, "the item enqueued after the restart", 15_000);
    // Pulls cut by the shutdown are reported, and pulling resumed.
    expect(errors.values.every((e) => /shutdown|heartbeat|disconnect|closed|timeout/i.test(e))).toBe(true);
    await sub.unsubscribe();
    await nc.drain();
  });

  it("keeps subscriptions working after the server restarts", async () => {
    const root = randomRoot();
    const nc = await connect("restart-bus");
    const bus = new NatsBus(nc, { onError: () => undefined });
    bus.subscribe(`${root}.echo`, (m) => {
      m.respond(m.data);
    });
    await bus.flush();
    expect(text.decode(await bus.request(`${root}.echo`, text.encode("before"), { timeoutMs: 2000 }))).toBe("before");

    const reconnected = nextReconnect(nc);
    await server.restart();
    await reconnected;

    expect(text.decode(await bus.request(`${root}.echo`, text.encode("after"), { timeoutMs: 2000 }))).toBe("after");
    await bus.close();
  });

  it("replays the stored events and result of one task, in order", async () => {
    const subjects = createSubjects(randomRoot());
    const nc = await connect("events");
    const bus = new NatsBus(nc, { onError: () => undefined });
    await ensureEventsStream(nc, subjects);
    await ensureEventsStream(nc, subjects);
    bus.publish(subjects.taskEvents("a"), text.encode("a1"));
    bus.publish(subjects.taskEvents("b"), text.encode("b1"));
    bus.publish(subjects.taskEvents("a"), text.encode("a2"));
    bus.publish(subjects.taskResult("a"), text.encode("a-result"));
    await bus.flush();

    const read = await readStoredTask(nc, subjects, tid("a"));
    expect(read.map((m) => [m.subject, text.decode(m.data)])).toEqual([
      [subjects.taskEvents("a"), "a1"],
      [subjects.taskEvents("a"), "a2"],
      [subjects.taskResult("a"), "a-result"],
    ]);
    expect(await readStoredTask(nc, subjects, tid("nothing-here"))).toEqual([]);
    await bus.close();
  });
});

describe("the KV task store", () => {
  // Buckets the runtime makes answer direct gets; one made by hand without them is read through the stream API.
  for (const direct of [true, false]) {
    it(`reads, writes, and creates a deleted key again, ${direct ? "with" : "without"} direct get`, async () => {
      const nc = await connect(`kv-${direct}`);
      try {
        const bucket = `KV${randomRoot().toUpperCase()}`;
        const kv = await new Kvm(nc).create(bucket, { history: 1, allow_direct: direct });
        const store = new NatsTaskStore(kv, nc, bucket);
        const first = await store.createWithRevision("k1", text.encode("one"));
        expect(first).toBeGreaterThan(0);
        expect(await store.createWithRevision("k1", text.encode("again"))).toBeUndefined();
        const read = await store.getWithRevision("k1");
        expect(read && { value: text.decode(read.value), revision: read.revision }).toEqual({ value: "one", revision: first });
        expect(await store.update("k1", text.encode("two"), first ?? 0)).toBeGreaterThan(first ?? 0);
        expect(await store.update("k1", text.encode("stale"), first ?? 0)).toBeUndefined();
        expect(await store.get("missing")).toBeUndefined();
        // A deleted key reads as absent, and may be created again.
        await kv.delete("k1");
        expect(await store.get("k1")).toBeUndefined();
        expect(await store.create("k1", text.encode("three"))).toBe("created");
        expect(text.decode((await store.get("k1")) ?? new Uint8Array())).toBe("three");
      } finally {
        await nc.close();
      }
    });
  }
});

describe("nats-server processes", () => {
  it("gives two test servers distinct ports", async () => {
    await using a = await startTestNatsServer({ jetstream: false });
    await using b = await startTestNatsServer({ jetstream: false });
    expect(a.port).not.toBe(b.port);
    expect(a.port).not.toBe(4222);
    for (const s of [a, b]) {
      const nc = await connectNats({ servers: s.url, name: "ports" });
      await nc.flush();
      await nc.close();
    }
  });

  it("throws NatsServerNotFoundError for a missing binary", async () => {
    const err: unknown = await startNatsServer({ binary: "definitely-not-nats-server" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NatsServerNotFoundError);
    expect((err as Error).message).toMatch(/not found on PATH.*apt-get install nats-server/);
  });

  it("fails the first connect fast when no server listens", async () => {
    const gone = await startTestNatsServer({ jetstream: false });
    await gone.stop();
    const started = Date.now();
    await expect(connectNats({ servers: gone.url, name: "nobody-home" })).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("explains that nats-server 2.9 refuses storeDir next to a store_dir in the config", async () => {
    const err: unknown = await startNatsServer({ configFile: NATS_CONF, storeDir: server.dir, monitorPort: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NatsServerStartError);
    expect((err as Error).message).toMatch(/Duplicate 'store_dir'[\s\S]*set cwd instead|set cwd instead[\s\S]*Duplicate 'store_dir'/);
  });

  it("attaches the server's stderr when it exits while starting", async () => {
    const err: unknown = await startNatsServer({ args: ["--no-such-flag"] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NatsServerStartError);
    expect((err as NatsServerStartError).stderr).toMatch(/no-such-flag/);
  });
});
