/**
 * Two subject roots on one nats-server, each with its own users (runtime/nats/conf/permissions.ts): the server runs the
 * block `dirigent nats-conf --prefix A --prefix B` prints, every runtime role of both roots connects as its root's
 * user, and each user reads replies in inboxes of its own (`_INBOX_<user>`). A submitter of root A runs its own task;
 * its subscriptions to root B's results, events and inboxes, and to the shared `_INBOX`, are refused, and it cannot
 * publish B's requests; B's task, running meanwhile, completes.
 *
 * Each root is a NATS account of its own, and its streams are made by `dirigent nats-setup` as its admin. The
 * cross-root attacks of issue 31 through JetStream fail: A's role users may create no stream (one sourcing B's
 * streams, one capturing B's subjects) and no consumer (one delivering into B's `control.cancel`); A's admin, who may,
 * creates them in A's account, where they neither see B's messages nor reach B's subscribers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects, type Subjects } from "../../protocol/index.js";
import { DirigentClient } from "../../runtime/client.js";
import { loadConfig, type Config } from "../../runtime/config.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { AckPolicy, DeliverPolicy, jetstreamManager } from "@nats-io/jetstream";
import { connectNats, type NatsConnection } from "../../runtime/nats/bus.js";
import { userInboxPrefix } from "../../runtime/nats/conf/permissions.js";
import { startSystem, type SystemHandle } from "../../runtime/system.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { natsSetup, rootUsers, RUNTIME, type RootUser, type RootUsers } from "../support/permissions-stack.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli } from "../support/processes.js";
import { newTaskId } from "../support/stack.js";
import { pollUntil } from "../support/process-group.js";

interface Tenant extends RootUsers {
  subjects: Subjects;
}

function tenant(root: string): Tenant {
  return { ...rootUsers(root), subjects: createSubjects(root) };
}

const a = tenant(randomRoot());
const b = tenant(randomRoot());
let server: TestNatsServer;
let mock: MockLlmServer;
const transports: OpenTransport[] = [];
const systems: SystemHandle[] = [];
const connections: NatsConnection[] = [];

beforeAll(async () => {
  const generated = startCli(["nats-conf", "--prefix", a.root, "--prefix", b.root]);
  expect(await generated.exited).toBe(0);
  const block = generated.output();
  expect(block.match(/accounts \{/g)).toHaveLength(1);
  expect(block).not.toMatch(/authorization/);
  // The production form: passwords from variables (set here in the file), no `dev` user, no anonymous clients.
  const variables = Object.entries({ ...a.variables, ...b.variables }).map(([name, value]) => `${name}: "${value}"`);
  server = await startTestNatsServer({ config: `jetstream { store_dir: ".dirigent/jetstream" }\n${variables.join("\n")}\n${block}` });
  // Each root's admin step, as its admin user, before its roles start.
  for (const t of [a, b]) await natsSetup(server.url, t.root, t.as("admin"));
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "slowly" }, reply: "slow answer of B", delayMs: 1500 },
        // Held until the test has tried to cancel it from root A.
        { match: { lastUser: "held at the gate" }, reply: "held answer of B", gate: { name: "b-held", count: 1000 } },
      ],
      default: { reply: "answer" },
    },
  });
  for (const t of [a, b]) {
    const config: Config = {
      ...loadConfig({}, {}),
      prefix: t.root,
      openaiBaseUrl: mock.url,
      openaiApiKey: "test-key",
      modelMaxRetries: 0,
      model: "mock-model",
    };
    for (const role of RUNTIME) {
      const transport = await openNatsTransport(server.url, t.subjects, {
        name: `${t.root}-${role}`,
        log: silentLogger,
        auth: t.as(role),
        roles: [role],
      });
      transports.push(transport);
      systems.push(await startSystem({ config, transport, roles: [role] }));
    }
  }
});

afterAll(async () => {
  for (const system of systems.reverse()) await system.stop();
  for (const transport of transports) await transport.close();
  for (const nc of connections) await nc.close();
  await mock?.close();
  await server?.stop();
});

async function submitterOf(t: Tenant): Promise<DirigentClient> {
  const transport = await openNatsTransport(server.url, t.subjects, {
    name: `${t.root}-client`,
    log: silentLogger,
    auth: t.as("submitter"),
    roles: [],
  });
  transports.push(transport);
  return new DirigentClient(transport.bus, t.subjects);
}

/** How a subscription ends: nats.js closes it with the server's permissions violation, or it gets a message. */
async function subscriptionEnd(nc: NatsConnection, subject: string): Promise<string> {
  const sub = nc.subscribe(subject);
  try {
    for await (const _ of sub) return "message";
    return "closed";
  } catch (err) {
    return String(err);
  }
}

const violations = () =>
  server
    .stderr()
    .split("\n")
    .filter((line) => /violation/i.test(line));

describe("two subject roots on one server", () => {
  it("give every user a name and an inbox of its own", () => {
    expect(a.as("submitter").user).toBe(`${a.root}-submitter`);
    expect(userInboxPrefix(a.as("submitter").user)).toBe(`_INBOX_${a.root}-submitter`);
  });

  it("run A's task for A's submitter, while A's submitter can read none of B's results, events or replies", async () => {
    const clientA = await submitterOf(a);
    const clientB = await submitterOf(b);
    const taskB = newTaskId();
    const runB = clientB.run({ taskId: taskB, xml: "<task><description>Answer slowly</description></task>" });

    const outcome = await clientA.run({ xml: "<task><description>A's own task</description></task>" });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "answer" });

    const spy = await connectNats({ servers: server.url, name: "a-spy", ...a.as("submitter") });
    connections.push(spy);
    const refused = [
      b.subjects.anyTaskEvents,
      b.subjects.anyTaskResult,
      b.subjects.taskResult(taskB),
      b.subjects.taskEvents(taskB),
      `${userInboxPrefix(b.as("submitter").user)}.>`,
      `${userInboxPrefix(b.as("director").user)}.>`,
      `${userInboxPrefix(b.as("supervisor").user)}.>`,
      "_INBOX.>",
      ">",
    ];
    for (const subject of refused) expect(await subscriptionEnd(spy, subject)).toMatch(/permissions violation/i);
    // Nor can it ask B's Directors about B's task, nor submit to root B.
    for (const subject of [b.subjects.taskGet(taskB), b.subjects.submit])
      await expect(spy.request(subject, "{}", { timeout: 2000 })).rejects.toThrow(/permissions violation/i);

    expect(await runB).toMatchObject({ taskId: taskB, status: "COMPLETE", content: "slow answer of B" });
    // B's submitter is kept out of A's subjects the same way.
    const spyB = await connectNats({ servers: server.url, name: "b-spy", ...b.as("submitter") });
    connections.push(spyB);
    expect(await subscriptionEnd(spyB, `${userInboxPrefix(a.as("submitter").user)}.>`)).toMatch(/permissions violation/i);
    expect(await subscriptionEnd(spyB, a.subjects.anyTaskResult)).toMatch(/permissions violation/i);

    // Every violation the server logged is one of the spies'; the runtime roles of both roots needed none.
    const logged = violations();
    expect(logged.length).toBeGreaterThanOrEqual(refused.length);
    for (const line of logged) expect(line).toMatch(new RegExp(`(${a.as("submitter").user}|${b.as("submitter").user})`));
    expect(logged.join("\n")).toMatch(new RegExp(`Subscription Violation.*_INBOX_${b.root}-submitter`, "i"));
  });
});

describe("JetStream across roots (issue 31)", () => {
  /** A's user `role`'s JetStream manager. */
  async function managerOf(role: RootUser) {
    const nc = await connectNats({ servers: server.url, name: `a-${role}-attacker`, ...a.as(role) });
    connections.push(nc);
    return jetstreamManager(nc, { checkAPI: false });
  }
  const refused = /permissions violation/i;

  it("refuses A's role users every stream and consumer: sourcing B's streams, capturing B's subjects, delivering into B's control", async () => {
    const memory = await managerOf("memory");
    // The Memory user's own bucket, made again with B's task records and events as sources.
    await expect(
      memory.streams.add({
        name: `KV_${a.subjects.indexBucket}`,
        subjects: [`$KV.${a.subjects.indexBucket}.>`],
        sources: [{ name: b.subjects.eventsStream }, { name: `KV_${b.subjects.tasksBucket}` }],
      }),
    ).rejects.toThrow(refused);
    // A push consumer on its own bucket delivering into B's cancel broadcast.
    await expect(
      memory.consumers.add(`KV_${a.subjects.indexBucket}`, {
        name: "forge",
        ack_policy: AckPolicy.None,
        deliver_policy: DeliverPolicy.All,
        deliver_subject: b.subjects.cancelBroadcast,
      }),
    ).rejects.toThrow(refused);
    // The Handler user's turns bucket, made again capturing B's submissions, Handler requests and submitters' inboxes.
    const handler = await managerOf("handler");
    await expect(
      handler.streams.add({
        name: `KV_${a.subjects.turnsBucket}`,
        subjects: [b.subjects.submit, b.subjects.execute, `${userInboxPrefix(b.as("submitter").user)}.>`],
      }),
    ).rejects.toThrow(refused);
    // The Supervisor's goals bucket and the Directors' intake stream: no consumer either.
    const supervisor = await managerOf("supervisor");
    await expect(
      supervisor.consumers.add(`KV_${a.subjects.goalsBucket}`, { name: "w", ack_policy: AckPolicy.None, deliver_subject: "x" }),
    ).rejects.toThrow(refused);
    const director = await managerOf("director");
    await expect(
      director.consumers.add(a.subjects.intakeStream, {
        durable_name: a.subjects.directorConsumer,
        ack_policy: AckPolicy.Explicit,
        deliver_subject: b.subjects.cancelBroadcast,
      }),
    ).rejects.toThrow(refused);
    expect(violations().join("\n")).toMatch(new RegExp(`${a.as("memory").user}.*\\$JS\\.API\\.STREAM\\.CREATE`, "i"));
  });

  it("keeps what A's admin creates in A's account: it captures none of B's messages and cancels none of B's tasks", async () => {
    const admin = await managerOf("admin");
    // In a shared account this stream would capture B's submissions, Handler requests and results (its PubAcks
    // answering B's requests), and source B's records and events.
    await admin.streams.add({
      name: "SPY",
      subjects: [b.subjects.submit, b.subjects.execute, b.subjects.anyTaskResult, `${userInboxPrefix(b.as("submitter").user)}.>`],
      sources: [{ name: b.subjects.eventsStream }, { name: `KV_${b.subjects.tasksBucket}` }],
    });
    // A forged cancel, stored in A's account (on a subject A's submitter may publish) and delivered by a push
    // consumer to B's cancel broadcast subject.
    const forgeSubject = a.subjects.taskCancel(newTaskId());
    await admin.streams.add({ name: "FORGE", subjects: [forgeSubject] });
    await admin.consumers.add("FORGE", {
      name: "forge",
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.All,
      deliver_subject: b.subjects.cancelBroadcast,
    });

    const clientB = await submitterOf(b);
    const taskB = newTaskId();
    const runB = clientB.run({ taskId: taskB, xml: "<task><description>held at the gate</description></task>" });
    await pollUntil(
      () => (mock.requests.some((r) => JSON.stringify(r.body).includes("held at the gate")) ? true : undefined),
      "B's model call",
    );
    const submitterA = await connectNats({ servers: server.url, name: "a-forger", ...a.as("submitter") });
    connections.push(submitterA);
    submitterA.publish(forgeSubject, JSON.stringify({ type: "task.cancel", taskId: taskB }));
    await pollUntil(async () => ((await admin.streams.info("FORGE")).state.messages === 1 ? true : undefined), "the forged cancel stored");
    mock.openGate("b-held");

    expect(await runB).toMatchObject({ taskId: taskB, status: "COMPLETE", content: "held answer of B" });
    expect((await admin.streams.info("SPY")).state.messages).toBe(0);
  });
});
