/**
 * Keepalives on long requests over NATS: a responder that works longer than the idle timeout keeps the request
 * alive; one that goes silent (its process died) fails the request after the idle timeout, not the full timeout;
 * `askRetrying` then asks again and another responder answers.
 */
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInbox, headers as natsHeaders } from "@nats-io/transport-node";
import { KEEPALIVE_HEADER, ResponderSilentError } from "../../actors/bus.js";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { askRetrying } from "../../actors/ask.js";
import { serve } from "../../actors/serve.js";
import { createSubjects, defineRequest } from "../../protocol/index.js";
import { connectNats, NatsBus } from "../../runtime/nats/bus.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { text } from "../support/recorder.js";

let server: TestNatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await startTestNatsServer({ jetstream: false });
  bus = new NatsBus(await connectNats({ servers: server.url, name: "keepalive-test" }), { onError: () => undefined });
});

afterAll(async () => {
  await bus?.close();
  await server?.stop();
});

const deps = (): ActorDeps => ({
  bus,
  subjects: createSubjects(randomRoot()),
  log: silentLogger,
  now: () => new Date(),
  newId: () => "id",
});
const Echo = z.object({ value: z.string() });
/** An echo request on a subject of the test's own. */
const echo = (subject: string) => defineRequest("echo", () => subject, Echo, Echo);

describe("keepalives", () => {
  it("keep a request alive past the idle timeout while the responder works", async () => {
    const d = deps();
    const subject = `${d.subjects.root}.slow`;
    const sub = serve(d, echo(subject), {
      concurrency: 1,
      handle: async (req) => {
        await new Promise((r) => setTimeout(r, 1500));
        return { value: `${req.value}!` };
      },
    });
    await bus.flush();
    const answer = await bus.request(subject, text.encode(JSON.stringify({ value: "hi" })), { timeoutMs: 10_000, idleTimeoutMs: 500 });
    expect(JSON.parse(text.decode(answer))).toEqual({ value: "hi!" });
    await sub.unsubscribe();
  });

  it("fail a request whose responder went silent after the idle timeout, and askRetrying asks again", async () => {
    const d = deps();
    const subject = `${d.subjects.root}.dies`;
    // A responder that takes the request and never answers nor keeps it alive: a process killed mid-request.
    const dead = bus.subscribe(subject, () => undefined, { queue: "q" });
    await bus.flush();
    const started = Date.now();
    await expect(bus.request(subject, text.encode("{}"), { timeoutMs: 30_000, idleTimeoutMs: 500 })).rejects.toBeInstanceOf(
      ResponderSilentError,
    );
    // Told by the idle timeout, not the request's (30 s): the margin is for a loaded machine.
    expect(Date.now() - started).toBeLessThan(15_000);

    // askRetrying: the first attempt lands on the dead one; then it leaves, a live one starts and takes the retry.
    let taken!: () => void;
    const reachedDead = new Promise<void>((resolve) => (taken = resolve));
    const dead2 = bus.subscribe(`${subject}2`, () => taken(), { queue: "q" });
    await bus.flush();
    const asking = askRetrying(d, echo(`${subject}2`), { value: "again" }, { timeoutMs: 20_000 });
    await reachedDead;
    await dead2.unsubscribe();
    const live = serve(d, echo(`${subject}2`), { queue: "q", concurrency: 1, handle: async (req) => ({ value: req.value }) });
    await bus.flush();
    expect(await asking).toEqual({ value: "again" });
    await Promise.all([live.unsubscribe(), dead.unsubscribe()]);
  });

  it("clamp a keepalive period no timer can hold, instead of answering every millisecond", async () => {
    const d = deps();
    const subject = `${d.subjects.root}.clamped`;
    const sub = serve(d, echo(subject), {
      concurrency: 1,
      handle: async (req) => {
        await new Promise((r) => setTimeout(r, 300));
        return { value: req.value };
      },
    });
    await bus.flush();
    const nc = bus.connection;
    const inbox = createInbox();
    const replies = nc.subscribe(inbox);
    const h = natsHeaders();
    h.set(KEEPALIVE_HEADER, "1e12");
    nc.publish(subject, JSON.stringify({ value: "hi" }), { reply: inbox, headers: h });
    let keepalives = 0;
    for await (const m of replies) {
      if (m.data.length > 0) break;
      keepalives++;
    }
    // Node runs a timer of more than 2^31-1 ms every millisecond: unclamped, this request got hundreds.
    expect(keepalives).toBe(0);
    await sub.unsubscribe();
  });

  it("answer a structured error when the handler throws, synchronously or with an answer that cannot be encoded", async () => {
    const d = deps();
    const subject = `${d.subjects.root}.throws`;
    const subs = [
      serve(d, echo(subject), {
        concurrency: 1,
        handle: (req) => {
          if (req.value === "sync") throw new RangeError("Maximum call stack size exceeded");
          return Promise.resolve({ big: BigInt(1) } as never);
        },
      }),
    ];
    await bus.flush();
    for (const value of ["sync", "bigint"]) {
      const answer = await bus.request(subject, text.encode(JSON.stringify({ value })), { timeoutMs: 5000 });
      expect(JSON.parse(text.decode(answer)), value).toMatchObject({ error: { code: "INTERNAL", message: expect.any(String) } });
    }
    await Promise.all(subs.map((s) => s.unsubscribe()));
  });
});
