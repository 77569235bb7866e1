/**
 * The Handler's in-flight markers and leases (actors/handler/lease.ts) over a real nats-server KV bucket: a key
 * runs once at a time across two "processes" (two lease sets on the same bucket), a renewed lease is not taken
 * over, a lease left to run out (its process died) is taken over with compare-and-set, a run whose final record is
 * stored leaves its marker unwritten and lets a waiter go at once, a wait stops on cancel, and the run gate joins a
 * run going on in its own process and waits for one in another. Then two Handlers on one
 * root: identical execute (and script) requests sent at once make one session (one command run) and get its answer.
 */
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { ask } from "../../actors/ask.js";
import { Requests, type ExecuteRequest, type ScriptRequest } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";
import { createLeases, createRunGate, markerKey, type JoinedAt } from "../../actors/handler/lease.js";
import { turnKey } from "../../actors/handler/records.js";
import { RemoteError } from "../../actors/ask.js";
import { decode, encode, RunMarker, TurnRecord } from "../../protocol/index.js";
import { openKvStore, type NatsTaskStore } from "../../runtime/nats/store.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { tid } from "../support/ids.js";

/** Short timings, so a lease runs out within the test; the logic is the one of the defaults. */
const TIMING = { heartbeatMs: 100, leaseMs: 300, pollMs: 20 };

let server: TestNatsServer;
let nc: NatsConnection;
let store: NatsTaskStore;
let mock: MockLlmServer;
let workspace: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "one session", delayMs: 600 }] } });
  workspace = await mkdtemp(join(tmpdir(), "dirigent-join-"));
  nc = await connect({ servers: server.url });
  store = await openKvStore(nc, `${randomRoot()}_TURNS`);
});

afterAll(async () => {
  await mock?.close();
  if (workspace) await rm(workspace, { recursive: true, force: true });
  await nc?.close();
  await server?.stop();
});

let n = 0;
const newKey = () => `task-${++n}.tabc${n}`;
const never = new AbortController().signal;
/** A key whose record is not final (yet). */
const notFinished = async () => false;
/** A promise and what resolves it. */
const latch = <T = void>() => {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
};
/** The run gates of two Handler processes on the same bucket. */
const twoProcesses = () => ({
  here: createRunGate(createLeases(store, silentLogger, TIMING)),
  there: createRunGate(createLeases(store, silentLogger, TIMING)),
});
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
    const lease = await one.acquire(key, never, notFinished);
    expect(await markerOf(key)).toMatchObject({ owner: one.owner, v: 1 });
    const waits: string[] = [];
    let acquired = false;
    const second = two.acquire(key, never, notFinished, (marker) => waits.push(marker.owner)).then((l) => ((acquired = true), l));
    // Several heartbeats and lease lengths: the renewed lease keeps the other process waiting.
    await delay(TIMING.leaseMs * 4);
    expect(acquired).toBe(false);
    expect(waits).toEqual([one.owner]);
    await lease.release(false);
    const taken = await second;
    expect(await markerOf(key)).toMatchObject({ owner: two.owner });
    expect((await markerOf(key)).released).toBeUndefined();
    await taken.release(false);
    expect(await markerOf(key)).toMatchObject({ owner: two.owner, released: true });
  });

  it("leaves the marker unwritten when the run's final record is stored, and a waiter goes on once the record is final", async () => {
    const one = createLeases(store, silentLogger, TIMING);
    const two = createLeases(store, silentLogger, TIMING);
    const key = newKey();
    let final = false;
    const lease = await one.acquire(key, never, notFinished);
    const before = await store.getWithRevision(markerKey(key));
    const waiting = latch();
    const second = two.acquire(
      key,
      never,
      async () => final,
      () => waiting.open(),
    );
    // The run's lease is live and renewed: the other process waits, until the record it reads says the run ended.
    await waiting.promise;
    final = true;
    const taken = await second;
    expect(taken.before).toBe(true);
    expect(await markerOf(key)).toMatchObject({ owner: two.owner });
    await lease.release(true);
    await taken.release(true);
    // Neither release wrote: the marker is the one the second process took over with, not released.
    const after = await store.getWithRevision(markerKey(key));
    expect(after?.revision).toBeGreaterThan(before?.revision ?? 0);
    expect((await markerOf(key)).released).toBeUndefined();
    const revision = after?.revision;
    const third = await one.acquire(key, never, async () => true);
    expect(third.before).toBe(true);
    await third.release(true);
    expect((await store.getWithRevision(markerKey(key)))?.revision).toBe((revision ?? 0) + 1);
  });

  it("tells whether the key's marker was there already: a run of it came before", async () => {
    const one = createLeases(store, silentLogger, TIMING);
    const two = createLeases(store, silentLogger, TIMING);
    const key = newKey();
    const first = await one.acquire(key, never, notFinished);
    expect(first.before).toBe(false);
    await first.release(false);
    const second = await two.acquire(key, never, notFinished);
    expect(second.before).toBe(true);
    await second.release(false);
  });

  it("takes over a lease that is no longer renewed (its process died), with compare-and-set", async () => {
    const key = newKey();
    // A marker of a process that died right after writing it.
    await store.put(markerKey(key), encode(RunMarker, { v: 1, owner: "gone:1:dead", until: Date.now() + TIMING.leaseMs }));
    const joiner = createLeases(store, silentLogger, TIMING);
    let waitedFor: string | undefined;
    const lease = await joiner.acquire(key, never, notFinished, (marker) => (waitedFor = marker.owner));
    expect(waitedFor).toBe("gone:1:dead");
    expect(await markerOf(key)).toMatchObject({ owner: joiner.owner });
    await lease.release(false);
  });

  it("lets exactly one of several joiners take over a lease that ran out", async () => {
    const key = newKey();
    await store.put(markerKey(key), encode(RunMarker, { v: 1, owner: "gone:2:dead", until: 0 }));
    const joiners = Array.from({ length: 4 }, () => createLeases(store, silentLogger, TIMING));
    const order: string[] = [];
    const runs = joiners.map(async (j) => {
      const lease = await j.acquire(key, never, notFinished);
      order.push(`start ${j.owner}`);
      await delay(TIMING.leaseMs * 2);
      order.push(`end ${j.owner}`);
      await lease.release(false);
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
    const lease = await one.acquire(key, never, notFinished);
    const controller = new AbortController();
    const waiting = two.acquire(key, controller.signal, notFinished, () => controller.abort(new RemoteError("UNAVAILABLE", "cancelled")));
    await expect(waiting).rejects.toMatchObject({ code: "UNAVAILABLE", message: "cancelled" });
    await lease.release(false);
  });
});

describe("the run gate", () => {
  it("joins a run of the key going on in its own process: the work runs once, both get its answer", async () => {
    const gate = createRunGate(createLeases(store, silentLogger, TIMING));
    const key = newKey();
    let runs = 0;
    const answer = latch<string>();
    const joins: JoinedAt[] = [];
    const first = gate.run(
      tid("t"),
      key,
      async () => (runs++, answer.promise),
      (at) => joins.push(at),
      notFinished,
    );
    const second = gate.run(
      tid("t"),
      key,
      async () => (runs++, "second"),
      (at) => joins.push(at),
      notFinished,
    );
    answer.open("the answer");
    expect(await Promise.all([first, second])).toEqual(["the answer", "the answer"]);
    expect(runs).toBe(1);
    expect(joins).toEqual(["here"]);
  });

  it("waits for a run in another process until its final record is stored, then runs knowing it waited", async () => {
    const { here, there } = twoProcesses();
    const key = newKey();
    let stored = false;
    const written = latch<boolean>();
    const write = () => written.open((stored = true));
    const answer = latch();
    const marked = latch();
    const ran: string[] = [];
    const first = here.run(
      tid("t"),
      key,
      async (waited, finalWrite) => {
        // A run that is not fresh starts once its marker is stored.
        marked.open();
        await answer.promise;
        finalWrite(written.promise);
        ran.push(`first waited=${waited}`);
        return "first";
      },
      () => undefined,
      async () => stored,
    );
    // The first run has its marker before the second asks.
    await marked.promise;
    const joins: JoinedAt[] = [];
    const second = there.run(
      tid("t"),
      key,
      async (waited) => (ran.push(`second waited=${waited}`), "second"),
      (at) => joins.push(at),
      async () => stored,
    );
    answer.open();
    expect(await first).toBe("first");
    // Answered, but its record not yet written: the other process still waits, past its lease (renewed).
    await delay(TIMING.leaseMs * 2);
    expect(ran).toEqual(["first waited=false"]);
    write();
    expect(await second).toBe("second");
    expect(ran).toEqual(["first waited=false", "second waited=true"]);
    expect(joins).toEqual(["elsewhere"]);
  });

  it("starts a fresh request's run at once, while its marker is created, and lets it go on once the lease is held", async () => {
    const gate = createRunGate(createLeases(store, silentLogger, TIMING));
    const key = newKey();
    const seen: string[] = [];
    const answer = await gate.run(
      tid("t"),
      key,
      async (before, _finalWrite, held) => {
        seen.push(`before=${before}`);
        seen.push(`held=${await held}`);
        return "answer";
      },
      () => undefined,
      notFinished,
      true,
    );
    expect(answer).toBe("answer");
    expect(seen).toEqual(["before=false", "held=true"]);
    expect(await markerOf(key)).toMatchObject({ v: 1 });
  });

  it("drops the answer of a fresh request's run whose marker was there, and runs it the usual way after the run it found", async () => {
    const { here, there } = twoProcesses();
    const key = newKey();
    let stored = false;
    const answer = latch();
    const marked = latch();
    const first = there.run(
      tid("t"),
      key,
      async (_before, finalWrite) => {
        marked.open();
        await answer.promise;
        stored = true;
        finalWrite(Promise.resolve(true));
        return "first";
      },
      () => undefined,
      async () => stored,
    );
    await marked.promise;
    const ran: string[] = [];
    const joins: JoinedAt[] = [];
    const waiting = latch();
    const second = here.run(
      tid("t"),
      key,
      async (before, _finalWrite, held) => {
        const ok = await held;
        ran.push(`before=${before} held=${ok}`);
        return ok ? "second" : "dropped";
      },
      (at) => (joins.push(at), waiting.open()),
      async () => stored,
      true,
    );
    // Its first run dropped, it waits for the run it found, which then ends.
    await waiting.promise;
    answer.open();
    expect(await first).toBe("first");
    expect(await second).toBe("second");
    expect(ran).toEqual(["before=false held=false", "before=true held=true"]);
    expect(joins).toEqual(["elsewhere"]);
  });

  it("answers a wait of a cancelled task with UNAVAILABLE, and the run it waited for goes on", async () => {
    const { here, there } = twoProcesses();
    const key = newKey();
    const answer = latch();
    const marked = latch();
    const first = here.run(
      tid("t1"),
      key,
      async () => (marked.open(), await answer.promise, "first"),
      () => undefined,
      notFinished,
    );
    await marked.promise;
    const waiting = latch();
    const second = there.run(
      tid("t1"),
      key,
      async () => "second",
      () => waiting.open(),
      notFinished,
    );
    await waiting.promise;
    there.cancel(tid("t1"));
    await expect(second).rejects.toMatchObject({ code: "UNAVAILABLE" });
    answer.open();
    expect(await first).toBe("first");
  });
});

describe("two Handlers asked for the same run at once", () => {
  const deps = (s: Stack) => ({
    bus: s.transport.bus,
    subjects: s.system.subjects,
    log: silentLogger,
    now: () => new Date(),
    newId: () => "x",
  });
  const twoHandlers = async () => {
    const root = randomRoot();
    const config = { workspaceRoot: workspace, tools: ["run_script" as const], continuationTools: [], commands: [process.execPath] };
    return [
      await startStack({ url: server.url, mock, root, roles: ["handler"], config }),
      await startStack({ url: server.url, mock, root, roles: ["handler"], config }),
    ] as const;
  };

  it("make one session: every request gets its answer, the model is asked once", async () => {
    const [a, b] = await twoHandlers();
    await using _a = a;
    await using _b = b;
    const request: ExecuteRequest = {
      type: "handler.execute",
      taskId: newTaskId() as ExecuteRequest["taskId"],
      nodePath: "0",
      prompt: "JOINED once",
      occurrence: 1,
    };
    const asked = () => mock.requests.filter((r) => JSON.stringify(r.body).includes("JOINED once")).length;
    // Sent over NATS from both sides: the queue group hands them to either Handler.
    const replies = await Promise.all([a, b, a, b, a, b].map((s) => ask(deps(s), Requests.execute, request, { timeoutMs: 20_000 })));
    expect(asked()).toBe(1);
    for (const reply of replies) expect(reply.result).toEqual(replies[0]?.result);
    expect(replies[0]?.result).toMatchObject({ status: "COMPLETE", content: "one session" });
  });

  it("replay a finished session to a request marked fresh whose marker shows it ran before (a redelivery counted as a first delivery): the model call it made while its marker was created is dropped", async () => {
    const [a, b] = await twoHandlers();
    await using _a = a;
    await using _b = b;
    const request: ExecuteRequest = {
      type: "handler.execute",
      taskId: newTaskId() as ExecuteRequest["taskId"],
      nodePath: "0",
      prompt: "FRESH again",
      occurrence: 1,
      fresh: true,
    };
    const asked = () => mock.requests.filter((r) => JSON.stringify(r.body).includes("FRESH again")).length;
    const first = await ask(deps(a), Requests.execute, request, { timeoutMs: 20_000 });
    const turns = await openKvStore(nc, a.system.subjects.turnsBucket);
    const key = turnKey(request) ?? "";
    const final = async () => {
      const bytes = await turns.get(key);
      const decoded = bytes && decode(TurnRecord, bytes);
      return decoded !== undefined && decoded.ok && decoded.value.status === "done";
    };
    // The run is over once its final record is stored (written behind the reply), so the next request is not joined
    // to it; its marker is left as it was, live and not released: the record says the run ended. Each write of the
    // record (the watch also gives the one stored already) is when to look.
    const writes = await (await new Kvm(nc).open(a.system.subjects.turnsBucket)).watch({ key });
    for await (const _ of writes) if (await final()) break;
    writes.stop();
    const marker = decode(RunMarker, (await turns.get(markerKey(key))) ?? new Uint8Array());
    expect(marker.ok && marker.value.released).toBeUndefined();
    const recorded = await turns.getWithRevision(key);
    const again = await ask(deps(b), Requests.execute, request, { timeoutMs: 20_000 });
    // A fresh request asks the model while its marker is created; finding the marker there, it drops that answer
    // and answers from the record, which it leaves as it was.
    expect(asked()).toBe(2);
    expect(again.result).toEqual(first.result);
    expect((await turns.getWithRevision(key))?.revision).toBe(recorded?.revision);
  });

  it("run a script command once: every request gets its outcome", async () => {
    const [a, b] = await twoHandlers();
    await using _a = a;
    await using _b = b;
    const log = join(workspace, "once.txt");
    const request: ScriptRequest = {
      type: "handler.script",
      taskId: newTaskId() as ScriptRequest["taskId"],
      nodePath: "0",
      argv: [
        process.execPath,
        "-e",
        `require('node:fs').appendFileSync(${JSON.stringify(log)}, 'ran\\n'); setTimeout(() => console.log('done'), 600)`,
      ],
      timeoutMs: 10_000,
      occurrence: 1,
    };
    const replies = await Promise.all([a, b, a, b].map((s) => ask(deps(s), Requests.script, request, { timeoutMs: 20_000 })));
    expect((await readFile(log, "utf8")).split("\n").filter((l) => l !== "")).toEqual(["ran"]);
    for (const reply of replies) expect(reply).toEqual(replies[0]);
    expect(replies[0]).toMatchObject({ exitCode: 0, stdout: "done\n" });
  });
});
