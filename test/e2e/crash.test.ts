/**
 * A Director dies mid-task (`kill -9`): the intake message, no longer marked as in progress, is redelivered after
 * the ack wait to another Director process, which resumes the task and publishes exactly one result, without
 * calling the model again for the session the Handler ran. The model call is held at a gate until the kill has
 * landed, so the kill always falls inside the task, however fast the machine.
 */
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readTaskRecord } from "../../actors/director/records.js";
import { createSubjects, decode, TaskEvent, TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { JetStreamWorkQueue } from "../../runtime/nats/queue.js";
import { startTestNatsServer, randomRoot, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { pollUntil } from "../support/process-group.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const ACK_WAIT_MS = 1500;

let server: TestNatsServer;
let mock: MockLlmServer;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "slow answer", gate: { name: "held", count: 1000 } }] } });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

describe("a Director killed mid-task", () => {
  it("is replaced by another Director process: the task resumes and ends with exactly one result", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    // Evaluator, Handler and Memory in this process; opened first, because the last process to open the intake
    // consumer sets its ack wait.
    await using stack = await startStack({ url: server.url, mock, root, roles: ["evaluator", "handler", "memory"] });
    const env = { DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS), DIRIGENT_LOG_LEVEL: "info" };
    const directors = ["a", "b"].map(() =>
      startCli(["worker", "--role", "director", "--nats", server.url, "--prefix", root, "--concurrency", "2"], env),
    );
    processes.push(...directors);
    await Promise.all(directors.map((d) => d.waitFor(/ready/)));

    const taskId = newTaskId();
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
    await stack.transport.bus.flush();
    await stack.client.submit({ xml: "<task><description>answer slowly</description></task>", taskId });

    const claimed = new RegExp(`"taskId":"${taskId}"[^\\n]*"task claimed"`);
    const owner = await Promise.race(directors.map((d) => d.waitFor(claimed).then(() => d)));
    const survivor = directors.find((d) => d !== owner);
    if (!survivor) throw new Error("unreachable");
    await pollUntil(() => (mock.requests.length === 1 ? true : undefined), "the session's model call");
    owner.child.kill("SIGKILL");
    const killedAt = Date.now();
    await owner.exited;
    // The session goes on in this process's Handler; its answer is recorded, or joined by the resumed walk.
    mock.openGate("held");

    await events.until((v) => v.some((e) => e.event.type === "task.resumed"), "the resume", 60_000);
    const resumed = events.values.find((e) => e.event.type === "task.resumed");
    // Killed before its claim was stored (a task's first second runs under a pending claim), the survivor takes the
    // redelivery and starts the task over; killed after, it takes the claim over from the dead owner. Either way it
    // claims the task on the intake message's second delivery.
    expect(survivor.output()).toMatch(new RegExp(`"taskId":"${taskId}"[^\\n]*"deliveries":2[^\\n]*"task claimed"`));
    expect(resumed?.event.data?.["deliveries"] === 2 || typeof resumed?.event.data?.["previousOwner"] === "string").toBe(true);
    await results.count(1, "the result", 60_000);
    expect(results.values[0]).toMatchObject({ taskId, status: "COMPLETE", content: "slow answer" });

    // Nothing signals "no second result"; wait until the survivor acked the intake message, then look.
    const queue = stack.transport.queue;
    if (!(queue instanceof JetStreamWorkQueue)) throw new Error("expected the JetStream work queue");
    const deadline = Date.now() + 10_000;
    while ((await queue.size()) !== 0) {
      if (Date.now() > deadline) throw new Error("the intake message was never acked");
      await delay(50);
    }
    await stack.transport.bus.flush();
    expect(results.values).toHaveLength(1);
    expect(events.values.filter((e) => e.event.type.startsWith("task.completed"))).toHaveLength(1);
    const record = (await readTaskRecord(stack.transport.store, taskId))?.record;
    expect(record).toMatchObject({ state: "completed", result: { content: "slow answer" } });
    // The dead Director's evaluation ran on in this process's Evaluator; the resumed evaluation joined its session in
    // flight or replayed its record instead of calling the model again.
    expect(mock.requests).toHaveLength(1);
    expect(events.values.some((e) => e.event.type === "model.replayed" || e.event.type === "model.joined")).toBe(true);
    // The node's record, read from the surviving Director: its conversation is that one model call's.
    const node = await stack.client.node(taskId, "0");
    expect(node.node).toMatchObject({ state: "completed", output: { content: "slow answer" } });
    expect(node.conversations.at(-1)?.messages.at(-1)).toMatchObject({ role: "assistant", content: "slow answer" });
    expect(node.conversations.at(-1)?.turns).toHaveLength(1);
    console.log(`kill -9 → task.resumed: ${(resumed?.at ?? Number.NaN) - killedAt} ms (ack wait ${ACK_WAIT_MS} ms)`);
  });
});
