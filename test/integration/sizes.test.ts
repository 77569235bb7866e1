/**
 * Size limits and large tasks end to end (issue 16): a task whose template description is ~900 KB runs to its end over
 * a real nats-server with the mock model (its record, chunked in the task store, no longer fails every checkpoint); a
 * submission or an input over its limit is answered `PAYLOAD_TOO_LARGE` naming the setting, and nothing is stored; a
 * checkpoint the store refuses for good fails the task once, with a clear reason, and is not retried.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Logger } from "../../actors/deps.js";
import { createSubjects, encodeJson } from "../../protocol/index.js";
import { DirigentClient, RemoteError } from "../../runtime/client.js";
import { loadConfig, type Config } from "../../runtime/config.js";
import { MemoryTaskStore } from "../../runtime/in-process/bus.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startSystem } from "../../runtime/system.js";
import { openMemoryTransport, openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId } from "../support/stack.js";

/** A logger keeping each message (with its fields) for assertions. */
function recordingLogger(): Logger & { lines: Array<{ level: string; msg: string; obj: object }> } {
  const lines: Array<{ level: string; msg: string; obj: object }> = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg: msg ?? "", obj });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

let server: TestNatsServer;
let mock: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: { regex: "^BIG" } }, reply: "read it all" },
        { match: { lastUser: { regex: "^SLOW" } }, reply: "slow answer", delayMs: 1500 },
      ],
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

/** Starts every role on `transport` with the mock model and a recording logger. */
async function start(transport: OpenTransport, root: string, config: Partial<Config> = {}) {
  const log = recordingLogger();
  const full: Config = {
    ...loadConfig({}, {}),
    prefix: root,
    openaiBaseUrl: mock.url,
    openaiApiKey: "test-key",
    modelMaxRetries: 0,
    model: "mock-model",
    ...config,
  };
  const system = await startSystem({ config: full, transport, log });
  const client = new DirigentClient(transport.bus, createSubjects(root));
  const stop = async () => {
    await system.stop();
    await transport.close();
  };
  return { log, client, stop };
}

const notFound = async (client: DirigentClient, taskId: string) => {
  const err = await client.get(taskId).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RemoteError);
  expect((err as RemoteError).code).toBe("NOT_FOUND");
};

describe("sizes over NATS", () => {
  it("runs a task whose template description is ~900 KB to its end, without a checkpoint failing", async () => {
    const root = randomRoot();
    const transport = await openNatsTransport(server.url, createSubjects(root), { name: "sizes", log: recordingLogger() });
    // A context window the description fits (the point here is storage, not the context limit).
    const { log, client, stop } = await start(transport, root, { contextWindowTokens: 2_000_000, maxContextWindowFraction: 1 });
    try {
      const description = `BIG ${"lorem ipsum dolor sit amet ".repeat(34_000)}`;
      expect(description.length).toBeGreaterThan(900_000);
      const taskId = newTaskId();
      const before = mock.requests.length;
      const outcome = await client.run({ xml: `<task><description>${description}</description></task>`, taskId });
      expect(outcome).toMatchObject({ status: "COMPLETE", content: "read it all" });
      // The description reached the model whole.
      const sent = JSON.stringify(mock.requests.slice(before).map((r) => r.body));
      expect(sent.length).toBeGreaterThan(900_000);
      expect((await client.get(taskId)).state).toBe("completed");
      expect(log.lines.filter((l) => l.msg.startsWith("checkpoint"))).toEqual([]);
    } finally {
      await stop();
    }
  }, 120_000);

  it("answers a submission over the limit PAYLOAD_TOO_LARGE naming the setting, and stores nothing", async () => {
    const root = randomRoot();
    const transport = await openNatsTransport(server.url, createSubjects(root), { name: "sizes", log: recordingLogger() });
    const { client, stop } = await start(transport, root, { maxSubmissionBytes: 100_000, maxInputBytes: 10_000 });
    try {
      const taskId = newTaskId();
      const xml = `<task><description>${"x".repeat(150_000)}</description></task>`;
      const raw = await transport.bus.request(createSubjects(root).submit, encodeJson({ taskId, xml }), { timeoutMs: 10_000 });
      const reply = JSON.parse(new TextDecoder().decode(raw)) as {
        error: { code: string; message: string; details: Record<string, unknown> };
      };
      expect(reply.error.code).toBe("PAYLOAD_TOO_LARGE");
      expect(reply.error.message).toMatch(
        /^submission of 15\d{4} bytes exceeds the limit of 100000 bytes \(DIRIGENT_MAX_SUBMISSION_BYTES\)$/,
      );
      expect(reply.error.details).toMatchObject({ what: "submission", limit: 100_000, setting: "DIRIGENT_MAX_SUBMISSION_BYTES" });
      await notFound(client, taskId);

      const inputTask = newTaskId();
      const err = await client
        .submit({ taskId: inputTask, xml: "<task><description>{{doc}}</description></task>", inputs: { doc: "y".repeat(20_000) } })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RemoteError);
      expect((err as RemoteError).code).toBe("PAYLOAD_TOO_LARGE");
      expect((err as RemoteError).message).toBe("input 'doc' of 20000 bytes exceeds the limit of 10000 bytes (DIRIGENT_MAX_INPUT_BYTES)");
      await notFound(client, inputTask);
    } finally {
      await stop();
    }
  });
});

describe("a checkpoint the store refuses for good", () => {
  it("fails the task once with a reason naming what could not be stored, and is not retried", async () => {
    const root = randomRoot();
    const transport = openMemoryTransport(recordingLogger());
    // The queued record (~120 KB) fits; the first checkpoint adds the machine's snapshot (holding the template again).
    transport.store = new MemoryTaskStore({ maxValueBytes: 200_000 });
    const { log, client, stop } = await start(transport, root);
    try {
      const taskId = newTaskId();
      const outcome = await client.run({ xml: `<task><description>SLOW ${"lorem ipsum ".repeat(10_000)}</description></task>`, taskId });
      expect(outcome.status).toBe("FAILED");
      expect(outcome.error).toMatchObject({ type: "TASK_FAILURE" });
      expect(outcome.error?.message).toMatch(
        /^the task's checkpoint \(its state and template\) \(\d+ bytes\) cannot be stored: value of \d+ bytes for '.+' exceeds the store's maximum of 200000 bytes$/,
      );
      expect((await client.get(taskId)).state).toBe("failed");
      expect(log.lines.filter((l) => l.msg === "checkpoint refused by the store; the task fails")).toHaveLength(1);
      expect(log.lines.filter((l) => l.msg.startsWith("checkpoint failed"))).toEqual([]);
    } finally {
      await stop();
    }
  });
});

describe("a submission whose queued record does not fit one intake message (max_payload 64 KiB)", () => {
  it("is stored in the tasks bucket, queued by reference, and runs to its end", async () => {
    const small = await startTestNatsServer({
      config: `max_payload: 65536\njetstream {\n  store_dir: "js"\n  max_memory_store: 64MB\n  max_file_store: 1GB\n}\n`,
    });
    try {
      const root = randomRoot();
      const transport = await openNatsTransport(small.url, createSubjects(root), { name: "sizes-small", log: recordingLogger() });
      const { log, client, stop } = await start(transport, root, { contextWindowTokens: 2_000_000, maxContextWindowFraction: 1 });
      try {
        // A raw XML body of ~55 KB (under max_payload) whose queued record, its quotes escaped in JSON, is ~67 KB: more
        // than one message. The roles share this process (local dispatch), so no request between them carries it.
        const body = new TextEncoder().encode(`<task><description>SLOW ${'say "hi" '.repeat(6000)}</description></task>`);
        expect(body.byteLength).toBeLessThan(60_000);
        const raw = await transport.bus.request(createSubjects(root).submit, body, { timeoutMs: 10_000 });
        const reply = JSON.parse(new TextDecoder().decode(raw)) as { taskId: string; status: string };
        expect(reply.status).toBe("accepted");
        // The model answers after 1.5 s: the watch is open long before the result.
        const watch = client.watch(reply.taskId);
        const outcome = await watch.result;
        await watch.close();
        expect(outcome).toMatchObject({ status: "COMPLETE", content: "slow answer" });
        expect((await client.get(reply.taskId)).state).toBe("completed");
        expect(log.lines.filter((l) => l.level === "warn" || l.level === "error")).toEqual([]);
      } finally {
        await stop();
      }
    } finally {
      await small.stop();
    }
  });
});
