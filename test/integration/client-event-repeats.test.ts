/**
 * `DirigentClient` reports each of a task's events once. A Director's write sent again (after a lost connection, or
 * around a leader loss) reaches a live subscriber a second time, byte for byte (docs/deploy.md, "What a subscriber
 * can see twice"); two different events that share a number around a takeover are both reported. Here a scripted
 * Director on a real nats-server publishes a task's events with such repeats, and its result twice.
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
