/**
 * A write sent with the connection's next one (runtime/nats/wire.ts `sendWithNext`: a task's events, where the events
 * stream keeps one connection's order): held until the connection's next write and handed to the connection just
 * before it, or sent alone after `WITH_NEXT_MS`; never overtaken by a later write, an answer included. Over a real
 * nats-server; "handed to the connection" is read from the client's own count of messages published.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectNats, NatsBus, type NatsConnection } from "../../runtime/nats/bus.js";
import { wireOf } from "../../runtime/nats/wire.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";

let server: TestNatsServer;
const connections: NatsConnection[] = [];
const connect = async (name: string) => {
  const nc = await connectNats({ servers: server.url, name });
  connections.push(nc);
  return nc;
};
/** What the buses' handlers threw: nothing, every test checks. */
const errors: unknown[] = [];
const onError = (err: unknown) => void errors.push(err);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Every message on `root.>`, as `subject=body`, in the order the server delivered them. */
async function listen(root: string): Promise<{ seen: string[]; next: (count: number) => Promise<string[]> }> {
  const nc = await connect("test-listener");
  const seen: string[] = [];
  const waiters: { count: number; resolve: (seen: string[]) => void }[] = [];
  nc.subscribe(`${root}.>`, {
    callback: (_err, msg) => {
      seen.push(`${msg.subject.slice(root.length + 1)}=${decoder.decode(msg.data)}`);
      for (const w of waiters.filter((w) => seen.length >= w.count)) w.resolve([...seen]);
    },
  });
  await nc.flush();
  return {
    seen,
    next: (count) => new Promise((resolve) => (seen.length >= count ? resolve([...seen]) : waiters.push({ count, resolve }))),
  };
}

beforeAll(async () => {
  server = await startTestNatsServer({ jetstream: false });
});

afterAll(async () => {
  for (const nc of connections) await nc.close();
  await server?.stop();
});

describe("a write sent with the next", () => {
  it("waits for the connection's next write and goes out just before it, in the order sent", async () => {
    const root = randomRoot();
    const listener = await listen(root);
    const nc = await connect("test-writer");
    const wire = wireOf(nc);
    const before = nc.stats().outMsgs;
    wire.sendWithNext(`${root}.events`, encoder.encode("1"));
    wire.sendWithNext(`${root}.events`, encoder.encode("2"));
    // Held: not handed to the connection yet.
    expect(nc.stats().outMsgs).toBe(before);
    wire.publish(`${root}.result`, encoder.encode("3"));
    expect(nc.stats().outMsgs).toBe(before + 3);
    expect(await listener.next(3)).toEqual(["events=1", "events=2", "result=3"]);
  });

  it("goes out alone when nothing follows it", async () => {
    const root = randomRoot();
    const listener = await listen(root);
    const nc = await connect("test-writer");
    wireOf(nc).sendWithNext(`${root}.events`, encoder.encode("alone"));
    expect(await listener.next(1)).toEqual(["events=alone"]);
  });

  it("is not overtaken by an answer, nor by a request, of the same connection", async () => {
    const root = randomRoot();
    const asker = await connect("test-asker");
    const seen: string[] = [];
    asker.subscribe(`${root}.events`, { callback: (_err, msg) => void seen.push(`event ${decoder.decode(msg.data)}`) });
    const responder = new NatsBus(await connect("test-responder"), { onError });
    const wire = wireOf(responder.connection);
    responder.subscribe(`${root}.ask`, (msg) => {
      wire.sendWithNext(`${root}.events`, encoder.encode("before the answer"));
      msg.respond(encoder.encode("answer"));
    });
    await responder.flush();
    await asker.flush();
    const answer = await asker.request(`${root}.ask`, encoder.encode("?"), { timeout: 5000 });
    seen.push(decoder.decode(answer.data));
    expect(seen).toEqual(["event before the answer", "answer"]);
    expect(errors).toEqual([]);
    // A request of the writer's own connection: the held write reaches the service first.
    const heard: string[] = [];
    asker.subscribe(`${root}.events`, { callback: (_err, msg) => void heard.push(decoder.decode(msg.data)) });
    asker.subscribe(`${root}.service`, {
      callback: (_err, msg) => {
        heard.push("request");
        msg.respond(encoder.encode("ok"));
      },
    });
    await asker.flush();
    wire.sendWithNext(`${root}.events`, encoder.encode("held"));
    await wire.request(`${root}.service`, encoder.encode("?"), { timeoutMs: 5000 });
    expect(heard).toEqual(["held", "request"]);
  });

  it("goes out when the bus is flushed or closed, before the connection drains", async () => {
    const root = randomRoot();
    const listener = await listen(root);
    const nc = await connect("test-writer");
    const bus = new NatsBus(nc, { onError });
    const wire = wireOf(nc);
    const before = nc.stats().outMsgs;
    wire.sendWithNext(`${root}.events`, encoder.encode("flushed"));
    const flushed = bus.flush();
    expect(nc.stats().outMsgs).toBe(before + 1);
    await flushed;
    wire.sendWithNext(`${root}.events`, encoder.encode("closed"));
    const closed = bus.close();
    expect(nc.stats().outMsgs).toBe(before + 2);
    await closed;
    expect(await listener.next(2)).toEqual(["events=flushed", "events=closed"]);
  });

  it("goes out at once when what is held reaches its limit in bytes", async () => {
    const root = randomRoot();
    const nc = await connect("test-writer");
    const before = nc.stats().outMsgs;
    const wire = wireOf(nc);
    const large = new Uint8Array(40 * 1024);
    wire.sendWithNext(`${root}.events`, large);
    expect(nc.stats().outMsgs).toBe(before);
    wire.sendWithNext(`${root}.events`, large);
    expect(nc.stats().outMsgs).toBe(before + 2);
  });
});
