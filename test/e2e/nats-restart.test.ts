/**
 * nats-server restarts while tasks run: every role process reconnects, the tasks in flight complete, and the
 * Directors' intake pull consumer resumes, so tasks submitted after the restart complete too. A client waiting in
 * `run` whose result was published while it was still disconnected gets it all the same. The events stream's replay of
 * each task holds every event, in order, then its result: events sent without an acknowledgement before the restart
 * are vouched for, or stored again (actors/director/event-publisher.ts).
 */
import { jetstream, type ConsumerMessages } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, decode, TaskEvent, type TaskId, type TaskOutcome } from "../../protocol/index.js";
import { readStoredTask } from "../../runtime/inspect/replay.js";
import { DirigentClient } from "../../runtime/client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { connectNats, NatsBus } from "../../runtime/nats/bus.js";
import { newTaskId, startStack } from "../support/stack.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";

/** Long enough that the restart falls inside the model calls. */
const MODEL_DELAY_MS = 1500;

let server: TestNatsServer;
let mock: MockLlmServer;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "survived", delayMs: MODEL_DELAY_MS }] } });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

describe("a nats-server restart mid-task", () => {
  it("is survived by every role process: the running tasks complete, and later ones too", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    const env = {
      OPENAI_BASE_URL: mock.url,
      OPENAI_API_KEY: "test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_ACK_WAIT_MS: "3000",
      DIRIGENT_LOG_LEVEL: "info",
    };
    for (const role of ["memory", "handler", "evaluator", "director"]) {
      const p = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
      processes.push(p);
      await p.waitFor(/ready/);
    }
    const nc: NatsConnection = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    const results = new Recorder<{ taskId: string; status: string; content: string }>();
    const consumer = await jetstream(nc).consumers.get(subjects.eventsStream, { filter_subjects: subjects.anyTaskResult });
    const messages: ConsumerMessages = await consumer.consume();
    const reading = (async () => {
      for await (const m of messages) results.push(m.json());
    })();
    const submit = async (taskId: string) => {
      const body = JSON.stringify({ taskId, xml: `<task><description>Outlive a restart: ${taskId}</description></task>` });
      expect((await nc.request(`${root}.tasks.submit`, body, { timeout: 5000 })).json()).toEqual({ taskId, status: "accepted" });
    };
    try {
      const before = ["r-1", "r-2", "r-3"];
      await Promise.all(before.map(submit));
      // Every task is inside its model call: restart the server under it.
      const deadline = Date.now() + 10_000;
      while (mock.requests.length < before.length) {
        if (Date.now() > deadline) throw new Error("the model calls never started");
        await new Promise((r) => setTimeout(r, 20));
      }
      await server.restart();
      const restartedAt = Date.now();
      await results.count(before.length, "the tasks running during the restart", 20_000);
      const after = ["r-4", "r-5"];
      await Promise.all(after.map(submit));
      await results.count(before.length + after.length, "the tasks submitted after the restart", 20_000);
      expect(results.values.map((r) => r.taskId).sort()).toEqual([...before, ...after].sort());
      expect(results.values.every((r) => r.status === "COMPLETE" && r.content === "survived")).toBe(true);
      console.log(`nats restart → last running task completed: ${Date.now() - restartedAt} ms`);
      for (const taskId of [...before, ...after]) {
        const replay = await readStoredTask(nc, subjects, taskId as TaskId);
        const seqs = replay.map((m) => {
          const event = decode(TaskEvent, m.data);
          return event.ok ? event.value.seq : "result";
        });
        expect(seqs, taskId).toEqual([...Array.from({ length: seqs.length - 1 }, (_, i) => i + 1), "result"]);
        expect(seqs.length, taskId).toBeGreaterThanOrEqual(5);
      }
      for (const p of processes) expect(p.child.exitCode).toBeNull();
    } catch (err) {
      for (const p of processes) console.log(p.output().slice(-6000));
      throw err;
    } finally {
      messages.stop();
      await reading.catch(() => undefined);
      await nc.close();
    }
  });

  it("a client waiting in run gets a result that was published while it was disconnected", async () => {
    await using stack = await startStack({ url: server.url, mock });
    // This client reconnects long after the roles (1 s), so the result is published while it is away.
    const nc = await connectNats({ servers: server.url, name: "late-client", reconnectTimeWaitMs: 4000 });
    const bus = new NatsBus(nc, { onError: () => undefined });
    const reconnects: number[] = [];
    bus.onReconnect(() => reconnects.push(Date.now()));
    try {
      const client = new DirigentClient(bus, createSubjects(stack.root));
      const taskId = newTaskId();
      const seen = stack.client.watch(taskId);
      await stack.transport.bus.flush();
      const calls = mock.requests.length;
      const running = client.run({ xml: "<task><description>Wait through a restart</description></task>", taskId });
      const deadline = Date.now() + 10_000;
      while (mock.requests.length === calls) {
        if (Date.now() > deadline) throw new Error("the model call never started");
        await new Promise((r) => setTimeout(r, 20));
      }
      await server.restart();
      const published: TaskOutcome = await seen.result;
      const publishedAt = Date.now();
      await seen.close();
      const outcome = await running;
      expect(outcome).toEqual(published);
      // The scenario held: the result went out before this client was back.
      expect(reconnects[0]).toBeGreaterThan(publishedAt);
      expect(published).toMatchObject({ taskId, status: "COMPLETE", content: "survived" });
    } finally {
      await bus.close();
    }
  });
});
