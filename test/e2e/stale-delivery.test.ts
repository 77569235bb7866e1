/**
 * The delivery-count bug of nats-server before 2.10.16, on the real 2.9 server, on the Director side: a redelivery
 * that finds only pull requests of clients that are gone rewinds the consumer, and the next pull gets the message
 * again as a *first* delivery (a delivery count of 1). The Director that gets it must not take it for a task that
 * never ran: it reads the task's record and takes the dead Director's claim over at once, as on any redelivery.
 *
 * The setting is built so the rewind happens every time: two Directors of one slot each, both busy (neither pulls);
 * a pull request left waiting by a connection that then closed; the Director owning the task killed. Its message's
 * redelivery finds only that dead pull, and the consumer rewinds (seen in its info). The other Director, given its
 * slot back, pulls and gets the message counted as a first delivery.
 */
import { connect, createInbox, nanos, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readTaskRecord } from "../../actors/director/records.js";
import { createSubjects } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, randomRoot, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { pollUntil } from "../support/process-group.js";
import { newTaskId, startStack } from "../support/stack.js";
import { recordTask } from "../support/takeover.js";

/** Long enough for the other Director to pull once its slot is free, before the rewound message is due again. */
const ACK_WAIT_MS = 6000;

let server: TestNatsServer;
let mock: MockLlmServer;
let nc: NatsConnection;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  nc = await connect({ servers: server.url });
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "first" }, reply: "first answer", gate: { name: "first", count: 1000 } },
        { match: { lastUser: "second" }, reply: "second answer", gate: { name: "second", count: 1000 } },
      ],
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await nc?.close();
  await mock?.close();
  await server?.stop();
});

describe("a redelivery counted as a first delivery (nats-server before 2.10.16)", () => {
  it("is claimed from the task's record: the dead Director's claim is taken over at once, nothing runs twice", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    // Evaluator, Handler and Memory in this process, opened first: the last process to open the consumer sets its ack wait.
    await using stack = await startStack({
      url: server.url,
      mock,
      root,
      roles: ["evaluator", "handler", "memory"],
      ackWaitMs: ACK_WAIT_MS,
    });
    const env = { DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS), DIRIGENT_LOG_LEVEL: "info" };
    const director = () => {
      const d = startCli(["worker", "--role", "director", "--nats", server.url, "--prefix", root, "--concurrency", "1"], env);
      processes.push(d);
      return d;
    };
    const claimedLine = (taskId: string) => new RegExp(`"taskId":"${taskId}"[^\\n]*"task claimed"`, "g");

    // B takes the first task and holds it (its one slot taken: it does not pull).
    const b = director();
    await b.waitFor(/ready/);
    const first = newTaskId();
    await stack.client.submit({ xml: "<task><description>first</description></task>", taskId: first });
    await b.waitFor(claimedLine(first));
    await pollUntil(() => (mock.requests.length === 1 ? true : undefined), "the first task's model call");

    // A takes the second, the one under test, and stores its claim (a task's first second runs under a pending one).
    const a = director();
    await a.waitFor(/ready/);
    const taskId = newTaskId();
    const { events, results } = await recordTask(stack, taskId);
    await stack.client.submit({ xml: "<task><description>second</description></task>", taskId });
    await a.waitFor(claimedLine(taskId));
    await pollUntil(() => (mock.requests.length === 2 ? true : undefined), "the second task's model call");
    const owner = await pollUntil(async () => (await readTaskRecord(stack.transport.store, taskId))?.record.owner, "A's stored claim");

    const jsm = await jetstreamManager(nc);
    const before = await jsm.consumers.info(subjects.intakeStream, subjects.directorConsumer);
    a.child.kill("SIGKILL");
    await a.exited;
    // One ack wait later the message is due again. A pull request whose reply nobody hears (a client that is gone)
    // takes it then: the server finds no interest, drops the request and rewinds the consumer. (Reading the
    // consumer's info drops such a request too, so one is sent before each look.)
    const next = `$JS.API.CONSUMER.MSG.NEXT.${subjects.intakeStream}.${subjects.directorConsumer}`;
    await pollUntil(
      async () => {
        nc.publish(next, JSON.stringify({ batch: 1, expires: nanos(60_000) }), { reply: createInbox("_GONE") });
        await nc.flush();
        const info = await jsm.consumers.info(subjects.intakeStream, subjects.directorConsumer);
        return info.delivered.stream_seq < before.delivered.stream_seq ? true : undefined;
      },
      "the server to rewind the consumer after redelivering to a gone pull",
      60_000,
    );

    // B's slot comes free: it pulls, and gets the second task's message counted as a first delivery.
    mock.openGate("first");
    await b.waitFor(claimedLine(taskId));
    expect(b.output()).toMatch(new RegExp(`"taskId":"${taskId}"[^\\n]*"deliveries":1[^\\n]*"task claimed"`));
    await events.until((v) => v.some((e) => e.type === "task.resumed"), "the resume", 60_000);
    mock.openGate("second");
    await results.count(1, "the result", 60_000);
    expect(results.values[0]).toMatchObject({ taskId, status: "COMPLETE", content: "second answer" });

    // B took A's claim over on that delivery (not a start from scratch that loses its claim at its first write).
    const resumedAt = events.values.findIndex((e) => e.type === "task.resumed");
    expect(events.values[resumedAt]?.data).toMatchObject({ previousOwner: owner });
    expect(b.output().match(claimedLine(taskId))).toHaveLength(1);
    expect(b.output()).not.toMatch(new RegExp(`"taskId":"${taskId}"[^\\n]*"another Director took the task over`));
    // Every event of the task comes once, in order: nothing restarted its numbering.
    const seqs = events.values.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    expect(new Set(seqs).size).toBe(seqs.length);
    // The session A's evaluation started ran on in this process's Handler: nothing asked the model again.
    expect(mock.requests).toHaveLength(2);
  });
});
