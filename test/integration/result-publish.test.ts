/**
 * A task's result is stored once in the events stream even when its acknowledged write fails after it landed (the
 * answer lost while a clustered stream elects a leader): the Director then publishes it plainly, with the same
 * message id, and the stream keeps one copy (actors/director/results.ts). Over a real nats-server.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { publishResult } from "../../actors/director/results.js";
import { createSubjects, decode, encode, TaskOutcome, type TaskId } from "../../protocol/index.js";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startTestNatsServer();
  nc = await connect({ servers: server.url });
});

afterAll(async () => {
  await nc?.close();
  await server?.stop();
});

describe("a task's result in the events stream", () => {
  it("is stored once when the acknowledged write landed but failed, and the plain publish follows it", async () => {
    await using stack = await startStack({ url: server.url });
    const subjects = createSubjects(stack.root);
    const deps: ActorDeps = { bus: stack.transport.bus, subjects, log: silentLogger, now: () => new Date(), newId: () => randomUUID() };
    const { publishStored } = stack.transport;
    if (publishStored === undefined) throw new Error("a NATS transport stores results with an acknowledgement");
    const taskId = newTaskId() as TaskId;
    const body = encode(TaskOutcome, { taskId, content: "once", status: "COMPLETE", notes: {} });
    let writes = 0;
    // The write lands, and then its answer is lost.
    const landedThenFailed = async (subject: string, data: Uint8Array, id: string) => {
      writes++;
      await publishStored(subject, data, id);
      throw new Error("no answer: the stream was electing a leader");
    };
    await publishResult(deps, landedThenFailed, taskId, body);
    await stack.transport.bus.flush();
    expect(writes).toBe(1);

    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(subjects.eventsStream, { subjects_filter: subjects.taskResult(taskId) });
    expect(info.state.subjects?.[subjects.taskResult(taskId)]).toBe(1);
    const stored = await jsm.streams.getMessage(subjects.eventsStream, { last_by_subj: subjects.taskResult(taskId) });
    if (!stored) throw new Error("no result stored");
    const decoded = decode(TaskOutcome, stored.data);
    expect(decoded.ok && decoded.value.content).toBe("once");
  });

  it("is stored by the plain publish when the acknowledged write never landed", async () => {
    await using stack = await startStack({ url: server.url });
    const subjects = createSubjects(stack.root);
    const deps: ActorDeps = { bus: stack.transport.bus, subjects, log: silentLogger, now: () => new Date(), newId: () => randomUUID() };
    const taskId = newTaskId() as TaskId;
    const body = encode(TaskOutcome, { taskId, content: "sent plainly", status: "COMPLETE", notes: {} });
    await publishResult(
      deps,
      async () => {
        throw new Error("stream unavailable");
      },
      taskId,
      body,
    );
    await stack.transport.bus.flush();
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(subjects.eventsStream, { subjects_filter: subjects.taskResult(taskId) });
    expect(info.state.subjects?.[subjects.taskResult(taskId)]).toBe(1);
  });
});
