/**
 * SIGTERM drains a role process: it takes no new work, hands back (Director) or finishes (Handler) what it holds,
 * and exits with code 0. A Director's tasks resume on another Director at once, not after the ack wait.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, decode, TaskEvent, TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, randomRoot, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

/** Far longer than the test waits for the resume: only a hand-back can make it in time. */
const ACK_WAIT_MS = 120_000;

let server: TestNatsServer;
let mock: MockLlmServer;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  // Every model call is held until the test opens the gate: a signal always lands while the session runs.
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "answer while draining" }, reply: "drained answer", gate: { name: "director", count: 1000 } },
        { match: { lastUser: "finish before leaving" }, reply: "drained answer", gate: { name: "handler", count: 1000 } },
      ],
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

function watch(stack: Stack, taskId: string) {
  const subjects = createSubjects(stack.root);
  const events = new Recorder<{ event: TaskEvent; at: number }>();
  const results = new Recorder<TaskOutcome>();
  stack.transport.bus.subscribe(subjects.taskEvents(taskId), (m) => {
    const d = decode(TaskEvent, m.data);
    if (d.ok) events.push({ event: d.value, at: Date.now() });
  });
  stack.transport.bus.subscribe(subjects.taskResult(taskId), (m) => {
    const d = decode(TaskOutcome, m.data);
    if (d.ok) results.push(d.value);
  });
  return { events, results };
}

const env = { DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS), DIRIGENT_LOG_LEVEL: "info", DIRIGENT_MODEL_MAX_RETRIES: "0" };

describe("SIGTERM drains a role process", () => {
  it("a Director hands its task back: another Director resumes it at once, and the process exits 0", async () => {
    const root = randomRoot();
    await using stack = await startStack({
      url: server.url,
      mock,
      root,
      roles: ["evaluator", "handler", "memory"],
      config: { ackWaitMs: ACK_WAIT_MS },
    });
    const directors = ["a", "b"].map(() =>
      startCli(["worker", "--role", "director", "--nats", server.url, "--prefix", root, "--concurrency", "2"], env),
    );
    processes.push(...directors);
    await Promise.all(directors.map((d) => d.waitFor(/ready/)));

    const taskId = newTaskId();
    const { events, results } = watch(stack, taskId);
    await stack.transport.bus.flush();
    await stack.client.submit({ xml: "<task><description>answer while draining</description></task>", taskId });
    const claimed = new RegExp(`"taskId":"${taskId}"[^\\n]*"task claimed"`);
    const owner = await Promise.race(directors.map((d) => d.waitFor(claimed).then(() => d)));
    const survivor = directors.find((d) => d !== owner);
    if (!survivor) throw new Error("unreachable");
    await events.until((v) => v.some((e) => e.event.type === "node.started"), "the evaluation to start");

    owner.child.kill("SIGTERM");
    const termAt = Date.now();
    expect(await owner.exited).toBe(0);
    expect(owner.output()).toMatch(/draining/);
    expect(owner.output()).toMatch(new RegExp(`"taskId":"${taskId}"[^\\n]*"task handed back: draining"`));

    // Handed back, not redelivered: the other Director resumes it long before an ack wait (2 min) could pass.
    await events.until((v) => v.some((e) => e.event.type === "task.resumed"), "the resume on the other Director", ACK_WAIT_MS / 2);
    const resumedAt = events.values.find((e) => e.event.type === "task.resumed")?.at ?? Number.NaN;
    expect(survivor.output()).toMatch(new RegExp(`"taskId":"${taskId}"[^\\n]*"previousOwner":"director-`));
    mock.openGate("director");
    await results.count(1, "the result", 60_000);
    expect(results.values[0]).toMatchObject({ taskId, status: "COMPLETE", content: "drained answer" });
    console.log(`SIGTERM → task.resumed: ${resumedAt - termAt} ms (ack wait ${ACK_WAIT_MS} ms)`);
  });

  it("a Handler finishes its session in flight, answers it, and exits 0; the task makes no second model call", async () => {
    const root = randomRoot();
    await using stack = await startStack({
      url: server.url,
      mock,
      root,
      roles: ["director", "evaluator", "memory"],
      config: { ackWaitMs: ACK_WAIT_MS },
    });
    const handler = startCli(["worker", "--role", "handler", "--nats", server.url, "--prefix", root], {
      ...env,
      OPENAI_BASE_URL: mock.url,
      OPENAI_API_KEY: "test",
    });
    processes.push(handler);
    await handler.waitFor(/ready/);
    const taskId = newTaskId();
    const { results } = watch(stack, taskId);
    await stack.transport.bus.flush();
    const before = mock.requests.length;
    await stack.client.submit({ xml: `<task><description>finish before leaving ${taskId}</description></task>`, taskId });
    const started = new Recorder<number>();
    const poll = setInterval(() => started.push(mock.requests.length), 20);
    try {
      await started.until(() => mock.requests.length > before, "the model call", 60_000);
    } finally {
      clearInterval(poll);
    }
    handler.child.kill("SIGTERM");
    // Draining, the session still in flight (held): the Handler waits for it.
    await handler.waitFor(/draining/);
    expect(handler.output()).not.toMatch(/drained/);
    mock.openGate("handler");
    expect(await handler.exited).toBe(0);
    expect(handler.output()).toMatch(/drained/);
    await results.count(1, "the result", 60_000);
    expect(results.values[0]).toMatchObject({ taskId, status: "COMPLETE", content: "drained answer" });
    expect(mock.requests.length - before).toBe(1);
  });
});
