/**
 * The ping responder and the connection watch of runtime/health.ts over a real nats-server: processes answer pings
 * (all of them, not one per queue group), a process finds its own subscriptions gone, forces reconnects, and gives up;
 * a connection closed under the process is fatal, one closed after `stop` is not.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects, decode, encode, PingReply, PingRequest } from "../../protocol/index.js";
import { checkSelf, startPingResponder, superviseConnection, VERSION } from "../../runtime/health.js";
import { connectNats, NatsBus } from "../../runtime/nats/bus.js";
import { wireOf } from "../../runtime/nats/wire.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";

let server: TestNatsServer;
const buses: NatsBus[] = [];
beforeAll(async () => {
  server = await startTestNatsServer({ jetstream: false });
});
afterAll(async () => {
  for (const bus of buses) await bus.close();
  await server.stop();
});

async function newBus(name: string): Promise<NatsBus> {
  const bus = new NatsBus(await connectNats({ servers: server.url, name, reconnectTimeWaitMs: 50 }), { onError: () => undefined });
  buses.push(bus);
  return bus;
}

describe("the ping responder", () => {
  it("answers every ping from each process, and a ping naming a process from that process only", async () => {
    const subjects = createSubjects(randomRoot());
    const [a, b, asker] = await Promise.all([newBus("ping-a"), newBus("ping-b"), newBus("ping-asker")]);
    const ra = startPingResponder({ bus: a, subjects, roles: ["director", "memory"], log: silentLogger, inFlight: () => a.inFlight });
    const rb = startPingResponder({ bus: b, subjects, roles: ["handler"], log: silentLogger });
    await Promise.all([a.flush(), b.flush()]);
    const answers: PingReply[] = [];
    const all = await asker.connection.requestMany(subjects.ping, encode(PingRequest, {}), {
      strategy: "count",
      maxMessages: 2,
      maxWait: 5000,
    });
    for await (const m of all) {
      const decoded = decode(PingReply, m.data);
      if (decoded.ok) answers.push(decoded.value);
    }
    expect(answers.map((r) => r.processId).sort()).toEqual([ra.processId, rb.processId].sort());
    expect(answers.find((r) => r.processId === ra.processId)).toMatchObject({
      roles: ["director", "memory"],
      pid: process.pid,
      version: VERSION,
      inFlight: 0,
    });
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
    const one = decode(
      PingReply,
      await asker.request(subjects.ping, encode(PingRequest, { processId: rb.processId }), { timeoutMs: 5000 }),
    );
    expect(one).toMatchObject({ ok: true, value: { processId: rb.processId, roles: ["handler"] } });
    // An empty body is a ping too.
    expect(decode(PingReply, await asker.request(subjects.ping, new Uint8Array(0), { timeoutMs: 5000 })).ok).toBe(true);
    await Promise.all([ra.stop(), rb.stop()]);
  });
});

describe("the connection watch", () => {
  it("finds the process's own subscriptions gone, reconnects to send them again, and gives up after maxLost checks", async () => {
    const subjects = createSubjects(randomRoot());
    const bus = await newBus("lost");
    const responder = startPingResponder({ bus, subjects, roles: ["handler"], log: silentLogger });
    await bus.flush();
    expect(await checkSelf(bus, subjects, responder.processId, 5000)).toBe("ok");
    // The subscription the server no longer has: nobody answers the process's own ping.
    await responder.stop();
    expect(await checkSelf(bus, subjects, responder.processId, 5000)).toBe("lost");
    let reconnects = 0;
    const removeListener = bus.onReconnect(() => reconnects++);
    const fatal = await new Promise<string>((resolve) => {
      superviseConnection({
        connection: bus,
        selfCheck: () => checkSelf(bus, subjects, responder.processId, 1000),
        checkIntervalMs: 20,
        maxLost: 3,
        log: silentLogger,
        onFatal: resolve,
      });
    });
    removeListener();
    expect(fatal).toMatch(/subscriptions no longer reach it.*3 checks in a row/);
    // Two forced reconnects before the third finding; the connection itself came back each time.
    expect(reconnects).toBeGreaterThanOrEqual(2);
    expect(bus.isClosed()).toBe(false);
  });

  it("reports a close the process did not ask for with its reason, and none after stop", async () => {
    const bus = await newBus("closed-under");
    const reasons: string[] = [];
    const fatal = new Promise<string>((resolve) => {
      superviseConnection({
        connection: bus,
        selfCheck: async () => "ok",
        checkIntervalMs: 0,
        log: silentLogger,
        onFatal: (r) => (reasons.push(r), resolve(r)),
      });
    });
    // Closed by code that is not the process's shutdown (nats.js itself closes it the same way after an auth error).
    await bus.connection.close();
    expect(await fatal).toBe("the connection to NATS closed (no error given)");

    const other = await newBus("closed-by-us");
    const watch = superviseConnection({
      connection: other,
      selfCheck: async () => "ok",
      checkIntervalMs: 0,
      log: silentLogger,
      onFatal: (r) => reasons.push(r),
    });
    watch.stop();
    await other.close();
    await other.closed();
    expect(reasons).toHaveLength(1);
  });
});

describe("a connection closed for good", () => {
  it("fails the requests waiting on it at once, JetStream-style ones that would be sent again included", async () => {
    const subjects = createSubjects(randomRoot());
    const [silent, asker] = await Promise.all([newBus("silent"), newBus("closing")]);
    // Someone listens, so no 503 comes back; nobody answers.
    silent.subscribe(subjects.ping, () => undefined);
    await silent.flush();
    const wire = wireOf(asker.connection);
    const once = wire.request(subjects.ping, new Uint8Array(0), { timeoutMs: 60_000 });
    const resent = wire.request(subjects.ping, new Uint8Array(0), { timeoutMs: 60_000, resend: true });
    await asker.flush();
    await asker.connection.close();
    await expect(once).rejects.toThrow(/connection to NATS closed before the answer/);
    await expect(resent).rejects.toThrow(/connection to NATS closed before the answer/);
  });
});
