/**
 * `DirigentClient.run` delivers a task's last events before it returns, even when it reads the task's record in
 * between (its guard against a result lost in a reconnect): a Director stores the result first, then publishes the
 * last events (each acknowledged by the events stream, in order), then the result, so a read in between finds a
 * result whose events are still on their way. Here a scripted Director on a real nats-server answers the submission
 * and the record read with a stored result, and publishes `task.completed` and the result only once the client has
 * read the record: `run` still reports `task.completed` before it returns.
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
