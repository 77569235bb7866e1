/**
 * Which requests a full Handler passes on, and to whom (actors/handler/peers.ts): reports heard over the in-process
 * bus, a clock the test moves, and messages that record where they were forwarded.
 */
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import type { BusMessage } from "../../actors/bus.js";
import { HandlerPeers, STALE_AFTER_MS } from "../../actors/handler/peers.js";
import { Semaphore } from "../../actors/limit.js";
import { createSubjects, decode, FORWARDED_HEADER, HandlerLoad } from "../../protocol/index.js";
import { MemoryBus } from "../../runtime/in-process/bus.js";

const subjects = createSubjects("t");
let bus: MemoryBus;
let now = 0;
const started: HandlerPeers[] = [];

afterEach(async () => {
  for (const p of started.splice(0)) await p.stop();
  await bus?.close();
});

function peer(id: string, sizes: { execute: number; script: number }) {
  const deps: ActorDeps = { bus, subjects, log: silentLogger, now: () => new Date(now), newId: () => id };
  const slots = { execute: new Semaphore(sizes.execute), script: new Semaphore(sizes.script) };
  const peers = new HandlerPeers(deps, id, slots);
  started.push(peers);
  return { peers, slots };
}

/** A request as NATS hands it over, recording where it is passed. */
function request(headers?: Record<string, string>) {
  const forwarded: { subject: string; headers: Record<string, string> }[] = [];
  const msg: BusMessage = {
    subject: subjects.execute,
    data: new Uint8Array(0),
    expectsReply: true,
    respond: () => true,
    ...(headers ? { headers: new Map(Object.entries(headers)) } : {}),
    forward: (subject, added) => void forwarded.push({ subject, headers: added }),
  };
  return { msg, forwarded };
}

/** Holds `n` slots of `semaphore` until the returned function is called. */
function hold(semaphore: Semaphore, n: number): () => void {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  for (let i = 0; i < n; i++) void semaphore.run(() => released);
  return release;
}

/**
 * Handler `id` with one slot of each kind, its execute slot held: `wait` hands it a request, which it does not pass on
 * arrival (no peer is known yet, or the request was passed already), so the request waits in its line.
 */
function fullHandler(id: string) {
  const { peers, slots } = peer(id, { execute: 1, script: 1 });
  peers.start();
  const release = hold(slots.execute, 1);
  const execute = peers.overflow("execute");
  const wait = (headers?: Record<string, string>) => {
    const r = request(headers);
    expect(execute.pass(r.msg)).toBe(false);
    const ticket = slots.execute.ticket();
    execute.waiting(r.msg, ticket);
    return { ...r, ticket };
  };
  return { release, wait };
}

describe("a full Handler passing requests to its peers", () => {
  it("reports its free slots, and passes to the freshest peer with the most free slots, each pass counted", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const reports: HandlerLoad[] = [];
    void bus.subscribe(subjects.handlerLoad, (m) => {
      const decoded = decode(HandlerLoad, m.data);
      if (decoded.ok) reports.push(decoded.value);
    });
    const a = peer("a", { execute: 1, script: 1 });
    const release = hold(a.slots.execute, 1);
    a.peers.start();
    peer("b", { execute: 2, script: 1 }).peers.start();
    peer("c", { execute: 1, script: 3 }).peers.start();
    await bus.flush();
    expect(reports).toEqual([
      { type: "handler.load", handler: "a", free: { execute: 0, script: 1 } },
      { type: "handler.load", handler: "b", free: { execute: 2, script: 1 } },
      { type: "handler.load", handler: "c", free: { execute: 1, script: 3 } },
    ]);

    const execute = a.peers.overflow("execute");
    expect(execute.direct).toBe("t.handler.direct.a.execute");
    const passedTo = () => {
      const r = request();
      return execute.pass(r.msg) ? r.forwarded[0] : undefined;
    };
    // b has two free, c one: b, then either (b and c at one each: the first found), then the other, then none.
    expect(passedTo()).toEqual({ subject: "t.handler.direct.b.execute", headers: { [FORWARDED_HEADER]: "a" } });
    expect([passedTo()?.subject, passedTo()?.subject].sort()).toEqual(["t.handler.direct.b.execute", "t.handler.direct.c.execute"]);
    expect(passedTo()).toBeUndefined();
    // Scripts go by their own count: c has three.
    const r = request();
    expect(a.peers.overflow("script").pass(r.msg)).toBe(true);
    expect(r.forwarded[0]?.subject).toBe("t.handler.direct.c.script");
    release();
  });

  it("never passes on arrival a request passed once already, one that wants no answer, or to a peer not heard from lately", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const a = peer("a", { execute: 1, script: 1 });
    a.peers.start();
    const b = peer("b", { execute: 4, script: 4 });
    b.peers.start();
    await bus.flush();
    const execute = a.peers.overflow("execute");

    expect(execute.pass(request({ [FORWARDED_HEADER]: "c" }).msg)).toBe(false);
    const noReply = request();
    expect(execute.pass({ ...noReply.msg, expectsReply: false })).toBe(false);
    const { forward: _dropped, ...inProcess } = request().msg;
    expect(execute.pass(inProcess)).toBe(false);
    // The same request, as it came, is passed.
    expect(execute.pass(request().msg)).toBe(true);

    now += STALE_AFTER_MS + 1;
    expect(execute.pass(request().msg)).toBe(false);
    // b reports again (its timer, here by hand through a stop and a new report): passed again; once stopped, not.
    now += 1;
    const b2 = peer("b", { execute: 4, script: 4 });
    b2.peers.start();
    await bus.flush();
    expect(execute.pass(request().msg)).toBe(true);
    await b2.peers.stop();
    await bus.flush();
    expect(execute.pass(request().msg)).toBe(false);
  });

  it("passes the requests waiting here, oldest first, to a peer once it reports free slots; one granted meanwhile runs here", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const { release, wait } = fullHandler("a");
    // Three requests wait for a's one slot; no peer is known, so none is passed on arrival.
    const waiting = [wait(), wait(), wait()];
    // a's slot frees: the oldest is granted it here, and is no longer in line.
    release();
    expect(await waiting[0]?.ticket.ready).toBe(true);
    // b starts with one free slot: the next oldest goes to it, its wait here cancelled; the last stays.
    peer("b", { execute: 1, script: 1 }).peers.start();
    await bus.flush();
    expect(waiting.map((w) => w.forwarded.map((f) => f.subject))).toEqual([[], ["t.handler.direct.b.execute"], []]);
    expect(await waiting[1]?.ticket.ready).toBe(false);
    waiting[0]?.ticket.release();
    expect(await waiting[2]?.ticket.ready).toBe(true);
    waiting[2]?.ticket.release();
  });

  it("lets a peer with a free slot take a passed request waiting here, up to two passes and never back to who passed it", async () => {
    bus = new MemoryBus({ onError: () => undefined });
    const { release, wait } = fullHandler("b");
    // Passed here by a (once), by c (once), and by a then d (twice): none is passed on arrival; all wait.
    const waiting = [wait({ [FORWARDED_HEADER]: "a" }), wait({ [FORWARDED_HEADER]: "c" }), wait({ [FORWARDED_HEADER]: "a,d" })];
    // c reports three free slots: it takes the one a passed; not the one it passed itself, nor the one passed twice
    // (MAX_PASSES).
    peer("c", { execute: 3, script: 1 }).peers.start();
    await bus.flush();
    expect(waiting.map((w) => w.forwarded)).toEqual([
      [{ subject: "t.handler.direct.c.execute", headers: { [FORWARDED_HEADER]: "a,b" } }],
      [],
      [],
    ]);
    expect(await waiting[0]?.ticket.ready).toBe(false);
    // The other two keep their places here: b's slot frees, the older of them is granted it.
    release();
    expect(await waiting[1]?.ticket.ready).toBe(true);
    waiting[1]?.ticket.release();
    expect(await waiting[2]?.ticket.ready).toBe(true);
    waiting[2]?.ticket.release();
  });
});
