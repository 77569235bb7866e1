/**
 * How `DirigentClient` reports a task's events, against a scripted Director on a real nats-server.
 *
 * - The last events before returning, even when it reads the task's record in between (its guard against a result
 *   lost in a reconnect): a Director stores the result first, then publishes the last events (each acknowledged by
 *   the events stream, in order), then the result, so a read in between finds a result whose events are still on
 *   their way.
 * - Each event once: a Director's write sent again (after a lost connection, or around a leader loss) reaches a live
 *   subscriber a second time, byte for byte (docs/deploy.md, "What a subscriber can see twice"); two different
 *   events that share a number around a takeover are both reported.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createSubjects, TaskId, type TaskEvent, type TaskOutcome } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { NatsBus } from "../../runtime/nats/bus.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";

let server: TestNatsServer;
let director: NatsConnection;
let clientConnection: NatsConnection;

beforeAll(async () => {
  server = await startTestNatsServer({ jetstream: false });
  director = await connect({ servers: server.url, name: "scripted-director" });
  clientConnection = await connect({ servers: server.url, name: "client" });
});

afterAll(async () => {
  await clientConnection?.close();
  await director?.close();
  await server?.stop();
});

it("reports the task's last events before returning a result it found in the record first", async () => {
  const root = randomRoot();
  const subjects = createSubjects(root);
  const taskId = TaskId.parse("last-events");
  const outcome: TaskOutcome = { taskId, status: "COMPLETE", content: "done", notes: {} };
  const event = (seq: number, type: string, state: TaskEvent["state"]): TaskEvent => ({
    taskId,
    seq,
    type,
    state,
    at: new Date().toISOString(),
  });
  director.subscribe(subjects.submit, {
    callback: (_err, msg) => {
      msg.respond(JSON.stringify({ taskId, status: "accepted" }));
      director.publish(subjects.taskEvents(taskId), JSON.stringify(event(1, "task.queued", "queued")));
    },
  });
  let reads = 0;
  director.subscribe(subjects.taskGet(taskId), {
    callback: (_err, msg) => {
      reads++;
      // The record has the result; the last event and the live result go out only once the client has this answer
      // (the server has passed it on before the client's ping is answered) and has acted on it (a macrotask later).
      msg.respond(JSON.stringify({ taskId, state: "completed", result: outcome }));
      if (reads > 1) return;
      void (async () => {
        await director.flush();
        await clientConnection.flush();
        await new Promise((resolve) => setImmediate(resolve));
        director.publish(subjects.taskEvents(taskId), JSON.stringify(event(2, "task.completed", "completed")));
        director.publish(subjects.taskResult(taskId), JSON.stringify(outcome));
      })();
    },
  });
  await director.flush();

  const client = new DirigentClient(new NatsBus(clientConnection, { onError: () => undefined }), subjects);
  const seen: string[] = [];
  const result = await client.run({ taskId, xml: "<task><description>anything</description></task>" }, (e) => seen.push(e.type));
  seen.push("returned");
  expect(result).toEqual(outcome);
  expect(reads).toBeGreaterThan(0);
  expect(seen).toEqual(["task.queued", "task.completed", "returned"]);
});

it("reports an event that comes again once, and both of two events that share a number", async () => {
  const subjects = createSubjects(randomRoot());
  const taskId = TaskId.parse("repeats");
  const outcome: TaskOutcome = { taskId, status: "COMPLETE", content: "done", notes: {} };
  const event = (seq: number, type: string, state: TaskEvent["state"], second: number): string =>
    JSON.stringify({ taskId, seq, type, state, at: `2026-11-29T10:00:${String(second).padStart(2, "0")}.000Z` });
  const running = event(2, "task.running", "running", 1);
  // The previous owner's event and its successor's `task.resumed`, both numbered 3 (a takeover).
  const previousOwners = event(3, "model.turn", "running", 2);
  const completed = event(4, "task.completed", "completed", 4);
  const published = [
    event(1, "task.queued", "queued", 0),
    running,
    running,
    previousOwners,
    event(3, "task.resumed", "running", 3),
    previousOwners,
    completed,
    completed,
  ];
  director.subscribe(subjects.submit, {
    callback: (_err, msg) => {
      msg.respond(JSON.stringify({ taskId, status: "accepted" }));
      for (const body of published) director.publish(subjects.taskEvents(taskId), body);
      director.publish(subjects.taskResult(taskId), JSON.stringify(outcome));
      director.publish(subjects.taskResult(taskId), JSON.stringify(outcome));
    },
  });
  await director.flush();

  const client = new DirigentClient(new NatsBus(clientConnection, { onError: () => undefined }), subjects);
  const seen: string[] = [];
  const result = await client.run({ taskId, xml: "<task><description>anything</description></task>" }, (e) =>
    seen.push(`${e.seq} ${e.type}`),
  );
  expect(result).toEqual(outcome);
  expect(seen).toEqual(["1 task.queued", "2 task.running", "3 model.turn", "3 task.resumed", "4 task.completed"]);

  // `watch` applies the same rule: the whole sequence published again for a second watch.
  const watched: string[] = [];
  const watch = client.watch(taskId, (e) => watched.push(`${e.seq} ${e.type}`));
  await clientConnection.flush();
  for (const body of published) director.publish(subjects.taskEvents(taskId), body);
  director.publish(subjects.taskResult(taskId), JSON.stringify(outcome));
  await expect(watch.result).resolves.toEqual(outcome);
  await watch.close();
  expect(watched).toEqual(["1 task.queued", "2 task.running", "3 model.turn", "3 task.resumed", "4 task.completed"]);
});
