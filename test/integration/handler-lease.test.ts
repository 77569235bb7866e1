/**
 * The Handler's in-flight markers and leases (actors/handler-lease.ts) over a real nats-server KV bucket: a key
 * runs once at a time across two "processes" (two lease sets on the same bucket), a renewed lease is not taken
 * over, a lease left to run out (its process died) is taken over with compare-and-set, a wait stops on cancel, and
 * the run gate joins a run going on in its own process and waits for one in another.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createLeases, createRunGate, markerKey, type JoinedAt } from "../../actors/handler-lease.js";
import { RemoteError } from "../../actors/serve.js";
import { decode, encode, RunMarker } from "../../protocol/index.js";
import { openKvStore, type NatsTaskStore } from "../../runtime/nats-store.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";

/** Short timings, so a lease runs out within the test; the logic is the one of the defaults. */
const TIMING = { heartbeatMs: 100, leaseMs: 300, pollMs: 20 };

let server: TestNatsServer;
let nc: NatsConnection;
let store: NatsTaskStore;

beforeAll(async () => {
  server = await startTestNatsServer();
  nc = await connect({ servers: server.url });
  store = await openKvStore(nc, `${randomRoot()}_TURNS`);
});

afterAll(async () => {
  await nc?.close();
  await server?.stop();
});

let n = 0;
const newKey = () => `task-${++n}.tabc${n}`;
const never = new AbortController().signal;
const markerOf = async (key: string) => {
  const bytes = await store.get(markerKey(key));
  const decoded = bytes && decode(RunMarker, bytes);
  if (!decoded?.ok) throw new Error(`no marker at ${markerKey(key)}`);
  return decoded.value;
};

describe("in-flight markers and leases", () => {
  it("takes a free key at once and makes another process wait until the run releases it", async () => {
    const one = createLeases(store, silentLogger, TIMING);
    const two = createLeases(store, silentLogger, TIMING);
    const key = newKey();
    const lease = await one.acquire(key, never);
    expect(await markerOf(key)).toMatchObject({ owner: one.owner, v: 1 });
    const waits: string[] = [];
    let acquired = false;
    const second = two.acquire(key, never, (marker) => waits.push(marker.owner)).then((l) => ((acquired = true), l));
    // Several heartbeats and lease lengths: the renewed lease keeps the other process waiting.
    await delay(TIMING.leaseMs * 4);
    expect(acquired).toBe(false);
    expect(waits).toEqual([one.owner]);
    await lease.release();
    const taken = await second;
    expect(await markerOf(key)).toMatchObject({ owner: two.owner });
    expect((await markerOf(key)).released).toBeUndefined();
    await taken.release();
    expect(await markerOf(key)).toMatchObject({ owner: two.owner, released: true });
  });

  it("takes over a lease that is no longer renewed (its process died), with compare-and-set", async () => {
    const key = newKey();
    // A marker of a process that died right after writing it.
    await store.put(markerKey(key), encode(RunMarker, { v: 1, owner: "gone:1:dead", until: Date.now() + TIMING.leaseMs }));
    const joiner = createLeases(store, silentLogger, TIMING);
    let waitedFor: string | undefined;
    const lease = await joiner.acquire(key, never, (marker) => (waitedFor = marker.owner));
    expect(waitedFor).toBe("gone:1:dead");
    expect(await markerOf(key)).toMatchObject({ owner: joiner.owner });
    await lease.release();
  });

  it("lets exactly one of several joiners take over a lease that ran out", async () => {
    const key = newKey();
    await store.put(markerKey(key), encode(RunMarker, { v: 1, owner: "gone:2:dead", until: 0 }));
    const joiners = Array.from({ length: 4 }, () => createLeases(store, silentLogger, TIMING));
    const order: string[] = [];
    const runs = joiners.map(async (j) => {
      const lease = await j.acquire(key, never);
      order.push(`start ${j.owner}`);
      await delay(TIMING.leaseMs * 2);
      order.push(`end ${j.owner}`);
      await lease.release();
    });
    await Promise.all(runs);
    // Never two runs at once: each start is followed by its own end.
    expect(order).toHaveLength(8);
    for (let i = 0; i < order.length; i += 2) expect(order[i + 1]).toBe(order[i]?.replace("start", "end"));
  });

  it("stops waiting when its signal aborts, with the signal's reason", async () => {
    const one = createLeases(store, silentLogger, TIMING);
    const two = createLeases(store, silentLogger, TIMING);
    const key = newKey();
    const lease = await one.acquire(key, never);
    const controller = new AbortController();
    const waiting = two.acquire(key, controller.signal, () => controller.abort(new RemoteError("UNAVAILABLE", "cancelled")));
    await expect(waiting).rejects.toMatchObject({ code: "UNAVAILABLE", message: "cancelled" });
    await lease.release();
  });
});

describe("the run gate", () => {
  it("joins a run of the key going on in its own process: the work runs once, both get its answer", async () => {
    const gate = createRunGate(createLeases(store, silentLogger, TIMING));
    const key = newKey();
    let runs = 0;
    let finish!: (value: string) => void;
    const answer = new Promise<string>((resolve) => (finish = resolve));
    const joins: JoinedAt[] = [];
    const first = gate.run("t", key, async () => (runs++, answer), (at) => joins.push(at));
    const second = gate.run("t", key, async () => (runs++, "second"), (at) => joins.push(at));
    finish("the answer");
    expect(await Promise.all([first, second])).toEqual(["the answer", "the answer"]);
    expect(runs).toBe(1);
    expect(joins).toEqual(["here"]);
  });

  it("waits for a run in another process, then runs knowing it waited; its marker is released after the record's write", async () => {
    const here = createRunGate(createLeases(store, silentLogger, TIMING));
    const there = createRunGate(createLeases(store, silentLogger, TIMING));
    const key = newKey();
    let write!: () => void;
    const written = new Promise<void>((resolve) => (write = resolve));
    let finish!: () => void;
    const answer = new Promise<void>((resolve) => (finish = resolve));
    const ran: string[] = [];
    const first = here.run("t", key, async (waited, releaseAfter) => {
      await answer;
      releaseAfter(written);
      ran.push(`first waited=${waited}`);
      return "first";
    }, () => undefined);
    // The first run has its marker before the second asks.
    while ((await store.get(markerKey(key))) === undefined) await delay(5);
    const joins: JoinedAt[] = [];
    const second = there.run("t", key, async (waited) => (ran.push(`second waited=${waited}`), "second"), (at) => joins.push(at));
    finish();
    expect(await first).toBe("first");
    // Answered, but its record not yet written: the other process still waits.
    await delay(TIMING.leaseMs * 2);
    expect(ran).toEqual(["first waited=false"]);
    write();
    expect(await second).toBe("second");
    expect(ran).toEqual(["first waited=false", "second waited=true"]);
    expect(joins).toEqual(["elsewhere"]);
  });

  it("answers a wait of a cancelled task with UNAVAILABLE, and the run it waited for goes on", async () => {
    const here = createRunGate(createLeases(store, silentLogger, TIMING));
    const there = createRunGate(createLeases(store, silentLogger, TIMING));
    const key = newKey();
    let finish!: () => void;
    const answer = new Promise<void>((resolve) => (finish = resolve));
    const first = here.run("t1", key, async () => (await answer, "first"), () => undefined);
    while ((await store.get(markerKey(key))) === undefined) await delay(5);
    let joined!: () => void;
    const waiting = new Promise<void>((resolve) => (joined = resolve));
    const second = there.run("t1", key, async () => "second", () => joined());
    await waiting;
    there.cancel("t1");
    await expect(second).rejects.toMatchObject({ code: "UNAVAILABLE" });
    finish();
    expect(await first).toBe("first");
  });
});
