/**
 * A Director that is alive but lost its task's delivery to another (its in-progress signals never reached the intake
 * stream, as when they are lost with a killed stream leader): once the other Director took the task over, the first
 * publishes no event of the task and no result, though reports of the task's walk still reach it. Real nats-server
 * and real Directors; the test plays the Evaluator, so it decides when the walk reports and when it ends. (A Director
 * taking over from one that is gone, which answers no notice, is test/integration/durability-tasks.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { Logger } from "../../actors/deps.js";
import { KEEPALIVE_HEADER, type WorkItem, type WorkQueue } from "../../actors/bus.js";
import { decode, encode, encodeJson, EvaluateRequest, Progress, TaskRecord, type TaskEvent } from "../../protocol/index.js";
import type { OpenTransport } from "../../runtime/transport.js";
import { XML, watch } from "../support/durability.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

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

/** The transport with its intake items' in-progress signals dropped: the item is redelivered after its ack wait. */
function silentProgress(opened: OpenTransport): OpenTransport {
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
          target.consume((item) => handler(silent(item)), options);
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { ...opened, queue: wrapped };
}

describe("a Director that lost its task's delivery to another", () => {
  it("publishes no event and no result of the task once the other took it over", async () => {
    const root = randomRoot();
    const first = recordingLogger();
    // One task at a time: while it runs the task, the first Director asks for no other delivery, so the redelivery
    // goes to the second.
    await using a = await startStack({
      url: server.url,
      root,
      roles: ["director"],
      ackWaitMs: ACK_WAIT_MS,
      config: { concurrency: 1 },
      wrapTransport: silentProgress,
      log: first.log,
    });
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
    const firstOwner = evaluations.values[0]?.request.owner;
    expect(firstOwner).toMatch(/^director-/);
    // Its walk reports while it owns the task.
    report("node.started", "before the takeover");
    await events.until((v) => v.some((e) => e.type === "node.started"), "the first Director's report");
    // Its claim is stored (by its first heartbeat) before the second Director starts.
    await claims.until((v) => v.includes(firstOwner), "the first Director's stored claim");

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
});
