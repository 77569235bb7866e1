/**
 * Work goes to a Handler with a free slot (actors/handler/peers.ts). Two Handler processes' worth of roles share a real
 * nats-server: H1 with one slot, held by a session waiting at a gate of the mock model; H2 with eight. NATS hands
 * each new session request to H1 or H2 at random; H1, full, passes the ones it receives to H2, which answers the
 * Evaluator directly. Without that, a request handed to H1 would wait behind the held session, which is released
 * only after the others finished: the test would never end.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NoRespondersError } from "../../actors/bus.js";
import { createSubjects, decode, encode, ExecuteRequest, HandlerLoad, TaskId } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let arrivedAtGate!: () => void;
const heldSessionArrived = new Promise<void>((resolve) => (arrivedAtGate = resolve));

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "HOLD" }, reply: "held", gate: { name: "h", count: 2 } },
        { match: { lastUser: "RELEASE" }, reply: "released", gate: { name: "h", count: 2 } },
        { reply: "quick" },
      ],
    },
    log: (line) => {
      if (line.includes("at gate 'h'")) arrivedAtGate();
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

const task = (words: string) => ({ taskId: newTaskId(), xml: `<task><description>${words}</description></task>` });

describe("Handler processes sharing the work", () => {
  it("a full Handler passes session requests to a peer with free slots, which answers the Evaluator", async () => {
    await using pipeline = await startStack({ url: server.url, mock, roles: ["director", "evaluator", "memory"] });
    const { root } = pipeline;
    const subjects = createSubjects(root);
    await using _h1 = await startStack({ url: server.url, root, mock, roles: ["handler"], config: { concurrency: 1 } });

    // H1 alone: the held session takes its only slot.
    const held = pipeline.client.run(task("HOLD"));
    await heldSessionArrived;

    // H2 joins; once H1 has had its report (the second one H2 sends, a second after the first), H1 knows it is free.
    const reports: HandlerLoad[] = [];
    let secondReport!: () => void;
    const heardTwice = new Promise<void>((resolve) => (secondReport = resolve));
    const listen = pipeline.transport.bus.subscribe(subjects.handlerLoad, (msg) => {
      const decoded = decode(HandlerLoad, msg.data);
      if (!decoded.ok || decoded.value.free.execute < 2) return;
      reports.push(decoded.value);
      if (reports.length === 2) secondReport();
    });
    await using _h2 = await startStack({ url: server.url, root, mock, roles: ["handler"], config: { concurrency: 8 } });
    await heardTwice;
    await listen.unsubscribe();
    expect(new Set(reports.map((r) => r.handler)).size).toBe(1);

    // Six sessions while H1 stays full: each one NATS hands to H1 goes on to H2.
    const quick = await Promise.all(Array.from({ length: 6 }, () => pipeline.client.run(task("Say something quick."))));
    expect(quick.map((r) => [r.status, r.content])).toEqual(Array.from({ length: 6 }, () => ["COMPLETE", "quick"]));

    // The held session was waiting all along; the seventh request at its gate lets both through.
    const released = await pipeline.client.run(task("RELEASE"));
    expect([released.content, (await held).content]).toEqual(["released", "held"]);
  });

  it("a Handler process that begins to stop takes no request routed after that, while it tells its peers it is full", async () => {
    // The Handler's queue-group UNSUB must leave with the stop's first step: its report to the peers and the ping
    // responder each wait for a round trip to the server, and a request routed meanwhile would still reach it (a
    // draining Handler would then take a subtask meant for the Handler that stays).
    await using handler = await startStack({ url: server.url, mock, roles: ["handler"] });
    const { bus } = handler.transport;
    const request = encode(ExecuteRequest, {
      type: "handler.execute",
      taskId: TaskId.parse(newTaskId()),
      nodePath: "",
      prompt: "Say something quick.",
    });
    const stopping = handler.system.stop();
    // Same connection: this request reaches the server after whatever the stop sent before it first waited.
    const asked = bus.request(createSubjects(handler.root).execute, request, { timeoutMs: 5_000 });
    await expect(asked).rejects.toBeInstanceOf(NoRespondersError);
    await stopping;
  });
});
