/**
 * What `get` answers for a task in its first second, when a Director runs it under a pending claim (no record stored
 * yet) and another Director answers: the state the task's last event announced, not `queued`.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { taskRequests } from "../../actors/director/requests.js";
import { PENDING_CLAIM_MS, readTaskRecord } from "../../actors/director/records.js";
import { createSubjects, decode, TaskEvent, TaskStatusReply } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let slow: MockLlmServer;

beforeAll(async () => {
  server = await startTestNatsServer();
  // Long enough to ask while the model works, short enough that the claim stays pending: the task ends within it.
  slow = await startMockLlm({ port: 0, script: { rules: [{ reply: "done", delayMs: PENDING_CLAIM_MS * 0.7 }] } });
});

afterAll(async () => {
  await slow?.close();
  await server?.stop();
});

/** The `get` of a Director that does not run the task (no live machine here), over the stack's stores. */
function otherDirector(stack: Stack, withEvents: boolean) {
  const subjects = createSubjects(stack.root);
  const deps: ActorDeps = { bus: stack.transport.bus, subjects, log: silentLogger, now: () => new Date(), newId: () => randomUUID() };
  const { get } = taskRequests(deps, stack.transport.store, stack.transport.queue, {
    liveState: () => undefined,
    publishEvent: () => undefined,
    ...(withEvents && stack.transport.lastPublished ? { lastPublished: stack.transport.lastPublished } : {}),
  });
  return async (taskId: string): Promise<TaskStatusReply> => {
    let answer: Uint8Array | undefined;
    await get({
      subject: subjects.taskGet(taskId),
      data: new Uint8Array(0),
      expectsReply: true,
      respond: (data) => ((answer = data), true),
    });
    const reply = decode(TaskStatusReply, answer ?? new Uint8Array(0));
    if (!reply.ok) throw reply.error;
    return reply.value;
  };
}

describe("get while a task runs under a pending claim", () => {
  it("answers the state of the task's last event from a Director that does not run it, and its final state after", async () => {
    await using stack = await startStack({ url: server.url, mock: slow });
    const subjects = createSubjects(stack.root);
    const taskId = newTaskId();
    const events = new Recorder<TaskEvent>();
    stack.transport.bus.subscribe(subjects.taskEvents(taskId), (m) => {
      const d = decode(TaskEvent, m.data);
      if (d.ok) events.push(d.value);
    });
    await stack.transport.bus.flush();
    const get = otherDirector(stack, true);
    const blind = otherDirector(stack, false);

    const run = stack.client.run({ xml: "<task><description>take your time</description></task>", taskId });
    // The atomic node started: the model is working, and nothing of the task is stored but its queue item.
    await events.until((e) => e.some((x) => x.type === "node.started"), "node.started");
    expect(await readTaskRecord(stack.transport.store, taskId)).toBeUndefined();
    // The events stream stores what a subscriber saw on its own schedule: ask until it has, round trip by round trip.
    let answer = await get(taskId);
    for (let i = 0; i < 50 && answer.state === "queued"; i++) {
      await stack.transport.bus.flush();
      answer = await get(taskId);
    }
    expect(answer).toEqual({ taskId, state: "running" });
    // Without the events to read, the queue item is all there is (what every Director answered before).
    expect(await blind(taskId)).toEqual({ taskId, state: "queued" });

    expect(await run).toMatchObject({ status: "COMPLETE", content: "done" });
    expect(await get(taskId)).toMatchObject({ taskId, state: "completed", result: { content: "done" } });
  });
});
