/**
 * No accepted task is stranded by the intake's store-first path (a queued record too large for one intake message is
 * stored in the tasks bucket first, then queued by reference). Over a real nats-server whose max_payload is 64 KiB,
 * the queue publish after the store fails for real: the intake item goes out as a JetStream publish to a subject no
 * stream holds, answered "no responders", as when the intake stream is unavailable. The submission is answered
 * `accepted`, and the task runs to its result, queued from the unqueued list by a Director: the one that accepted it,
 * or, once that one stopped, another.
 */
import { jetstream } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { WorkQueue } from "../../actors/bus.js";
import type { Logger } from "../../actors/deps.js";
import { UNQUEUED_KEY } from "../../actors/director/unqueued.js";
import { createSubjects, decode, TaskOutcome, UnqueuedTasks } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { NatsBus } from "../../runtime/nats/bus.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { startStack } from "../support/stack.js";

const ACK_WAIT_MS = 1000;

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer({
    config: `max_payload: 65536\njetstream {\n  store_dir: "js"\n  max_memory_store: 64MB\n  max_file_store: 1GB\n}\n`,
  });
  mock = await startMockLlm({ port: 0, script: { rules: [{ match: { lastUser: { regex: "^BIG" } }, reply: "read it all" }] } });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

/** A logger keeping each message for assertions. */
function recordingLogger(): Logger & { lines: Array<{ level: string; msg: string }> } {
  const lines: Array<{ level: string; msg: string }> = [];
  const at = (level: string) => (_obj: object, msg?: string) => void lines.push({ level, msg: msg ?? "" });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/**
 * `transport` with an intake queue whose first `failures` items are published where no stream holds them: the real
 * JetStream publish fails ("no responders"), as when the intake stream is unavailable.
 */
function unavailableIntake(transport: OpenTransport, root: string, failures: number): OpenTransport {
  const { queue, bus } = transport;
  if (!(bus instanceof NatsBus)) throw new Error("expected a NATS transport");
  const js = jetstream(bus.connection);
  let failed = 0;
  const enqueue: typeof queue.enqueue = async (id, data) => {
    if (failed >= failures) return queue.enqueue(id, data);
    failed++;
    await js.publish(`${root}.unstreamed.${id}`, data, { msgID: id });
    throw new Error("unreachable: the publish above has no stream to store it");
  };
  const failing: WorkQueue = {
    enqueue,
    peek: (id) => queue.peek(id),
    discard: (id, seq) => queue.discard(id, seq),
    consume: (handler, options) => queue.consume(handler, options),
    ackWaitMs: queue.ackWaitMs,
    ...(queue.maxItemBytes === undefined ? {} : { maxItemBytes: queue.maxItemBytes }),
  };
  return { ...transport, queue: failing };
}

/**
 * Starts every role on a connection of its own (ack wait 1 s), optionally with a failing intake. The roles share the
 * process (local dispatch), so no request between them carries the large template.
 */
async function start(root: string, failures = 0) {
  const log = recordingLogger();
  const stack = await startStack({
    url: server.url,
    mock,
    root,
    log,
    ackWaitMs: ACK_WAIT_MS,
    config: { contextWindowTokens: 2_000_000, maxContextWindowFraction: 1 },
    ...(failures > 0 ? { wrapTransport: (opened: OpenTransport) => unavailableIntake(opened, root, failures) } : {}),
  });
  return Object.assign(stack, { log });
}

/** A client's connection under `root`: it submits, reads the task and the list, and follows the results. */
async function client(root: string) {
  const transport = await openNatsTransport(server.url, createSubjects(root), {
    name: `client-${root}`,
    log: recordingLogger(),
    roles: [],
  });
  const results = new Recorder<TaskOutcome>();
  transport.bus.subscribe(createSubjects(root).anyTaskResult, (msg) => {
    const decoded = decode(TaskOutcome, msg.data);
    if (decoded.ok) results.push(decoded.value);
  });
  await transport.bus.flush();
  const tasks = new DirigentClient(transport.bus, createSubjects(root));
  return {
    /**
     * Submits a raw XML body of ~55 KB (under max_payload) whose queued record, its quotes escaped in JSON, is ~67 KB:
     * stored first, queued by reference. Returns the answer.
     */
    async submitLarge(): Promise<{ taskId: string; status: string }> {
      const body = new TextEncoder().encode(`<task><description>BIG ${'say "hi" '.repeat(6000)}</description></task>`);
      expect(body.byteLength).toBeLessThan(60_000);
      const raw = await transport.bus.request(createSubjects(root).submit, body, { timeoutMs: 10_000 });
      return JSON.parse(new TextDecoder().decode(raw)) as { taskId: string; status: string };
    },
    /** The result of `taskId`, once published. */
    async resultOf(taskId: string): Promise<TaskOutcome | undefined> {
      const all = await results.until((v) => v.some((r) => r.taskId === taskId), `the result of '${taskId}'`, 30_000);
      return all.find((r) => r.taskId === taskId);
    },
    state: async (taskId: string) => (await tasks.get(taskId)).state,
    /** The task ids on the unqueued list. */
    async listed(): Promise<string[]> {
      const value = await transport.store.get(UNQUEUED_KEY);
      const list = value === undefined ? undefined : decode(UnqueuedTasks, value);
      return list?.ok ? list.value.tasks.map((t) => t.taskId) : [];
    },
    [Symbol.asyncDispose]: () => transport.close(),
  };
}

const QUEUED_BY_LIST = "queued a stored task whose submission could not queue it";

describe("a large submission whose queue publish fails after its record is stored", () => {
  it("is accepted, and another Director queues and runs it once the accepting one stopped", async () => {
    const root = randomRoot();
    await using user = await client(root);
    const accepting = await start(root, Number.POSITIVE_INFINITY);
    const reply = await user.submitLarge();
    expect(reply.status).toBe("accepted");
    expect(accepting.log.lines.map((l) => l.msg)).toContain(
      "a stored task could not be queued; a Director queues it from the unqueued list",
    );
    expect(await user.listed()).toEqual([reply.taskId]);
    // Stored, not queued: without a Director that queues it, it would wait for ever.
    expect(await user.state(reply.taskId)).toBe("queued");
    await accepting.stop();

    await using other = await start(root);
    expect(await user.resultOf(reply.taskId)).toMatchObject({ status: "COMPLETE", content: "read it all" });
    expect(await user.state(reply.taskId)).toBe("completed");
    expect(other.log.lines.filter((l) => l.msg === QUEUED_BY_LIST)).toHaveLength(1);
    expect(await user.listed()).toEqual([]);
  }, 60_000);

  it("is queued by the Director that accepted it, once the queue works again", async () => {
    const root = randomRoot();
    await using user = await client(root);
    await using system = await start(root, 1);
    const reply = await user.submitLarge();
    expect(reply.status).toBe("accepted");
    expect(await user.resultOf(reply.taskId)).toMatchObject({ status: "COMPLETE", content: "read it all" });
    expect(system.log.lines.filter((l) => l.msg === QUEUED_BY_LIST)).toHaveLength(1);
    expect(await user.listed()).toEqual([]);
  }, 60_000);

  it("a submission queued as usual is taken off the list at once", async () => {
    const root = randomRoot();
    await using user = await client(root);
    await using system = await start(root);
    const reply = await user.submitLarge();
    expect(reply.status).toBe("accepted");
    expect(await user.listed()).toEqual([]);
    expect(await user.resultOf(reply.taskId)).toMatchObject({ status: "COMPLETE", content: "read it all" });
    expect(system.log.lines.filter((l) => l.level === "warn" || l.level === "error")).toEqual([]);
  }, 60_000);
});
