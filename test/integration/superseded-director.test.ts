/**
 * A Director that is alive but lost its task's delivery to another (its in-progress signals never reached the intake
 * stream, as when they are lost with a killed stream leader): once the other Director took the task over, the first
 * publishes no event of the task and no result, though reports of the task's walk still reach it. Real nats-server
 * and real Directors; the test plays the Evaluator, so it decides when the walk reports and when it ends. The Director
 * that took the task over numbers its events from the last one stored, and a redelivery that reaches it while it tells
 * the first joins its run rather than run the task twice. (A Director taking over from one that is gone, which answers
 * no notice, is test/integration/durability-tasks.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { Logger } from "../../actors/deps.js";
import { KEEPALIVE_HEADER, type Bus, type BusMessage, type WorkItem, type WorkQueue } from "../../actors/bus.js";
import { readTaskRecord } from "../../actors/director/records.js";
import { decode, encode, encodeJson, EvaluateRequest, Progress, TakeoverNotice, TaskRecord, type TaskEvent } from "../../protocol/index.js";
import type { OpenTransport } from "../../runtime/transport.js";
import { XML, watch } from "../support/durability.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

const ACK_WAIT_MS = 1500;

let server: TestNatsServer;

beforeAll(async () => {
  server = await startTestNatsServer();
});

afterAll(async () => {
  await server?.stop();
});

/** A logger that records each line's message with its fields. */
function recordingLogger(): { log: Logger; lines: Recorder<{ msg: string | undefined; taskId?: unknown }> } {
  const lines = new Recorder<{ msg: string | undefined; taskId?: unknown }>();
  const line = (obj: object, msg?: string) => lines.push({ ...obj, msg });
  return { log: { debug: () => undefined, info: line, warn: line, error: line }, lines };
}

/**
 * The transport with its intake items' in-progress signals dropped: the item is redelivered after its ack wait. Each
 * delivery handed to the Director is recorded in `delivered`, when given.
 */
function silentProgress(opened: OpenTransport, delivered?: Recorder<{ id: string; deliveries: number }>): OpenTransport {
  const queue = opened.queue;
  const silent = (item: WorkItem): WorkItem =>
    new Proxy(item, {
      get: (target, name) => {
        if (name === "working") return () => undefined;
        const value: unknown = Reflect.get(target, name, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  const wrapped: WorkQueue = new Proxy(queue, {
    get: (target, name) => {
      if (name === "consume")
        return (handler: (item: WorkItem) => Promise<void>, options: { concurrency: number }) =>
          target.consume((item) => (delivered?.push({ id: item.id, deliveries: item.deliveries }), handler(silent(item))), options);
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { ...opened, queue: wrapped };
}

/** The transport with the Director's takeover notices unheard: a previous owner cut off from NATS, which never answers. */
function deafToTakeovers(opened: OpenTransport): OpenTransport {
  const bus = new Proxy(opened.bus, {
    get: (target, name) => {
      if (name === "subscribe")
        return (subject: string, handler: (msg: BusMessage) => void) =>
          target.subscribe(subject.endsWith(".takeover") ? `${subject}.unheard` : subject, handler);
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { ...opened, bus };
}

/**
 * A first Director running a task, its evaluation held by the test (which plays the Evaluator), its claim stored, and
 * its walk's first report published; the intake item's in-progress signals are dropped, so the item is redelivered
 * to the next Director after the ack wait.
 */
async function firstDirectorRunning(options: { deaf?: boolean } = {}) {
  const root = randomRoot();
  const first = recordingLogger();
  /** Its connection's bus as it is, where the test hears what the Director may not. */
  let plain: Bus | undefined;
  // One task at a time: while it runs the task, the first Director asks for no other delivery, so the redelivery
  // goes to the second.
  const a = await startStack({
    url: server.url,
    root,
    roles: ["director"],
    ackWaitMs: ACK_WAIT_MS,
    config: { concurrency: 1 },
    wrapTransport: (opened) => ((plain = opened.bus), silentProgress(options.deaf === true ? deafToTakeovers(opened) : opened)),
    log: first.log,
  });
  onTestFinished(() => a.stop());
  const taskId = newTaskId();
  const { events, results, subjects } = watch(a, taskId);
  // The Evaluator: holds every evaluation; the second Director's is answered when the test says.
  const evaluations = new Recorder<{ request: EvaluateRequest; respond: (data: Uint8Array) => boolean }>();
  const keepalives = new Set<ReturnType<typeof setInterval>>();
  onTestFinished(() => keepalives.forEach(clearInterval));
  a.transport.bus.subscribe(subjects.evaluate, (msg) => {
    const decoded = decode(EvaluateRequest, msg.data);
    if (!decoded.ok) return;
    // Signs of life while it holds the evaluation, as an Evaluator sends them (actors/serve.ts): else the Director
    // asks again after 6 s of silence (a loaded machine), and the answer to the first request goes unread.
    const every = Number(msg.headers?.get(KEEPALIVE_HEADER));
    const keepalive = every > 0 ? setInterval(() => msg.respond(new Uint8Array(0)), every) : undefined;
    if (keepalive) keepalives.add(keepalive);
    evaluations.push({ request: decoded.value, respond: (data) => (clearInterval(keepalive), msg.respond(data)) });
  });
  const report = (event: string, message: string) =>
    a.transport.bus.publish(
      subjects.progress(taskId),
      encode(Progress, { type: "task.progress", taskId: taskId as Progress["taskId"], event, message }),
    );
  // Each write of the task's record is a message on its key's subject.
  const claims = new Recorder<string | undefined>();
  a.transport.bus.subscribe(`$KV.${subjects.tasksBucket}.${taskId}`, (msg) => {
    const decoded = decode(TaskRecord, msg.data);
    if (decoded.ok) claims.push(decoded.value.owner);
  });
  await a.transport.bus.flush();

  await a.client.submit({ xml: XML, inputs: { country: "France" }, taskId });
  await evaluations.count(1, "the first Director's evaluation");
  const firstOwner = evaluations.values[0]?.request.owner ?? "";
  expect(firstOwner).toMatch(/^director-/);
  // Its walk reports while it owns the task.
  report("node.started", "before the takeover");
  await events.until((v) => v.some((e) => e.type === "node.started"), "the first Director's report");
  // Its claim is stored (by its first heartbeat) before the second Director starts.
  await claims.until((v) => v.includes(firstOwner), "the first Director's stored claim");
  if (plain === undefined) throw new Error("no transport");
  /** The second Director's evaluation answered once it asks: the task completes under `second`. */
  const completedBySecond = async (second: Stack) => {
    await evaluations.until((v) => v.some((e) => e.request.owner !== firstOwner), "the second Director's evaluation", 20_000);
    const successor = evaluations.values.find((e) => e.request.owner !== firstOwner);
    successor?.respond(encodeJson({ type: "evaluator.result", taskId, result: { content: "Paris", status: "COMPLETE", notes: {} } }));
    await results.count(1, "the result");
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    await second.transport.bus.flush();
  };
  return { root, a, plain, first, taskId, events, results, subjects, evaluations, firstOwner, report, completedBySecond };
}

describe("a Director that lost its task's delivery to another", () => {
  it("publishes no event and no result of the task once the other took it over", async () => {
    const { root, first, taskId, events, results, evaluations, firstOwner, report, a } = await firstDirectorRunning();
    const second = recordingLogger();
    await using b = await startStack({ url: server.url, root, roles: ["director"], ackWaitMs: ACK_WAIT_MS, log: second.log });
    await evaluations.until((v) => v.some((e) => e.request.owner !== firstOwner), "the second Director's evaluation", 20_000);
    const successor = evaluations.values.find((e) => e.request.owner !== firstOwner);
    // Its task.resumed comes through the events stream, which may deliver it after the evaluation request.
    await events.until((v) => v.some((e) => e.type === "task.resumed"), "the second Director's task.resumed", 20_000);
    const resumed = events.values.find((e) => e.type === "task.resumed");
    expect(resumed).toMatchObject({ data: { previousOwner: firstOwner } });

    // The walk reports to both Directors (progress is not addressed to one); only the owner republishes.
    report("model.turn", "after the takeover");
    await events.until((v) => v.some((e) => e.type === "model.turn"), "the report republished");
    successor?.respond(encodeJson({ type: "evaluator.result", taskId, result: { content: "Paris", status: "COMPLETE", notes: {} } }));
    await results.count(1, "the result");
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    // A report that comes late (the first walk's) after the task completed.
    report("node.finished", "after the end");
    // The second told the first, which stopped there.
    expect(first.lines.values.some((l) => l.msg === "another Director took the task over and said so; stopping here")).toBe(true);
    expect(second.lines.values.some((l) => l.msg === "the previous owner stopped publishing the task")).toBe(true);
    await first.lines.until((lines) => lines.some((l) => l.msg === "claim taken over; nothing published"), "the first run's end", 20_000);
    await a.transport.bus.flush();
    await b.transport.bus.flush();

    expect(results.values).toHaveLength(1);
    const after = events.values.slice(events.values.findIndex((e) => e.type === "task.resumed"));
    const seqs = after.map((e: TaskEvent) => e.seq);
    expect(after.map((e) => e.type)).toEqual(["task.resumed", "model.turn", "task.completed"]);
    expect(seqs).toEqual(seqs.map((_, i) => (resumed?.seq ?? 0) + i));
  }, 60_000);

  it("numbers its events from the last one stored, where the checkpoint counted events never stored", async () => {
    const { root, taskId, events, a, completedBySecond } = await firstDirectorRunning();
    // The first Director's record counts three events more than the events stream holds, as when it was told of a
    // takeover with events not sent yet (it drops them), or died with events in flight.
    const stored = await readTaskRecord(a.transport.store, taskId);
    if (stored === undefined) throw new Error("no record");
    const counted = (stored.record.seq ?? 1) + 3;
    const written = await a.transport.store.update(taskId, encode(TaskRecord, { ...stored.record, seq: counted }), stored.revision);
    expect(written).toBeDefined();
    const lastStored = events.values.at(-1);

    const second = recordingLogger();
    await using b = await startStack({ url: server.url, root, roles: ["director"], ackWaitMs: ACK_WAIT_MS, log: second.log });
    await events.until((v) => v.some((e) => e.type === "task.resumed"), "the second Director's task.resumed", 20_000);
    const resumed = events.values.find((e) => e.type === "task.resumed");
    // Right after the last event stored, not after the count of the checkpoint (which would leave a gap of three).
    expect(resumed?.seq).toBe((lastStored?.seq ?? 0) + 1);
    expect(resumed?.seq).toBeLessThan(counted);
    await completedBySecond(b);
    // Every seq once, from 1 to the end.
    const seqs = events.values.map((e: TaskEvent) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
  }, 60_000);

  it("runs the task once when its delivery comes again while it tells the previous owner", async () => {
    // The first Director hears no notice: the test answers for it, once the item was delivered again.
    const { root, taskId, events, results, evaluations, firstOwner, plain, subjects, completedBySecond } = await firstDirectorRunning({
      deaf: true,
    });
    const notices = new Recorder<BusMessage>();
    plain.subscribe(subjects.directorTakeover(firstOwner), (msg) => notices.push(msg));
    await plain.flush();

    const second = recordingLogger();
    const delivered = new Recorder<{ id: string; deliveries: number }>();
    // Room for more than one delivery at a time, and its in-progress signals dropped too: the item comes again to it
    // an ack wait after it came, while it still waits for the previous owner's answer.
    await using b = await startStack({
      url: server.url,
      root,
      roles: ["director"],
      ackWaitMs: ACK_WAIT_MS,
      config: { concurrency: 4 },
      wrapTransport: (opened) => silentProgress(opened, delivered),
      log: second.log,
    });
    const notice = await notices.count(1, "the takeover notice");
    await delivered.until((v) => v.filter((d) => d.id === taskId).length >= 2, "the item delivered again to the second Director", 20_000);
    const told = decode(TakeoverNotice, notice[0]?.data ?? new Uint8Array(0));
    expect(told.ok && told.value.previousOwner).toBe(firstOwner);
    notice[0]?.respond(encodeJson({ type: "task.released", taskId, held: true }));

    await completedBySecond(b);
    // Claimed once here: the second delivery joined the run under way instead of claiming the task again (which
    // would have resumed it twice, and published its events twice).
    const claimed = second.lines.values.filter((l) => l.msg === "task claimed" && l.taskId === taskId);
    expect(claimed).toHaveLength(1);
    expect(evaluations.values.filter((e) => e.request.owner !== firstOwner)).toHaveLength(1);
    expect(events.values.filter((e) => e.type === "task.resumed")).toHaveLength(1);
    expect(results.values).toHaveLength(1);
  }, 60_000);
});
