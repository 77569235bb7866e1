/**
 * `--concurrency` bounds the tasks a Director process runs at once: with more tasks queued than that, the process
 * runs exactly that many at a time and takes the next one only when one has ended.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, decode, TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const CONCURRENCY = 2;
const TASKS = 6;

let server: TestNatsServer;
let mock: MockLlmServer;
let director: CliProcess | undefined;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "done", delayMs: 400 }] } });
});

afterAll(async () => {
  await director?.stop();
  await mock?.close();
  await server?.stop();
});

describe("a Director process's --concurrency", () => {
  it("runs at most that many tasks at once, and that many when more are queued", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    // The other roles may run many tasks at once; only the Director bounds them here.
    await using stack = await startStack({
      url: server.url,
      mock,
      root,
      roles: ["evaluator", "handler", "memory"],
      config: { concurrency: 16 },
    });
    director = startCli(["worker", "--role", "director", "--nats", server.url, "--prefix", root, "--concurrency", String(CONCURRENCY)]);
    await director.waitFor(/ready/);

    const running = new Set<string>();
    const sizes = new Recorder<number>();
    const ids = Array.from({ length: TASKS }, () => newTaskId());
    for (const id of ids) {
      stack.transport.bus.subscribe(subjects.taskEvents(id), (m) => {
        const d = decode(TaskEvent, m.data);
        if (!d.ok) return;
        if (d.value.type === "task.running") running.add(id);
        else if (d.value.type === "task.completed" || d.value.type === "task.failed") running.delete(id);
        else return;
        sizes.push(running.size);
      });
    }
    await stack.transport.bus.flush();
    await Promise.all(ids.map((taskId) => stack.client.submit({ taskId, xml: "<task><description>take a while</description></task>" })));
    // Every task started and ended once.
    await sizes.count(TASKS * 2, "every task to start and end", 30_000);
    expect(running.size).toBe(0);
    expect(Math.max(...sizes.values)).toBe(CONCURRENCY);
  });
});
