/**
 * A crash repeats only what was running in the crashed process. Thirty slow tasks run over role processes (real
 * nats-server, `kill -9`) while every one of their model calls is in flight: a Director killed, or an Evaluator
 * killed, adds no model call (the resumed walks join the sessions still running in the Handlers); a Handler killed
 * adds at most one per task whose session it held (the joiner takes the session over once its lease ran out).
 * The mock model's request log counts the calls; in the Handler test each Handler has a mock model of its own, so
 * the log tells which sessions the killed one held. Model calls are held at a gate the test opens once the state it
 * targets is observed (the kill landed, the resumed walks joined), so no assertion depends on the machine's speed.
 */
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, decode, TaskEvent, TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type RecordedRequest } from "../../runtime/model/mock-server.js";
import { JetStreamWorkQueue } from "../../runtime/nats/queue.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { startStack, type Stack } from "../support/stack.js";

const TASKS = 30;
const ACK_WAIT_MS = 1500;

let server: TestNatsServer;
const mocks: MockLlmServer[] = [];
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await Promise.all(mocks.map((m) => m.close()));
  await server?.stop();
});

/** The gate every model call of a {@link heldModel} waits at until the test opens it. */
const HELD = "held";

/** A mock model holding every call until the test opens its gate {@link HELD} (`open: true`: answering at once). */
async function heldModel({ open = false } = {}): Promise<MockLlmServer> {
  const gate = { name: HELD, count: 1000 };
  const mock = await startMockLlm({ port: 0, script: { rules: [{ reply: "joined answer", ...(open ? {} : { gate }) }] } });
  mocks.push(mock);
  return mock;
}

function worker(role: string, root: string, model: MockLlmServer, concurrency: number): CliProcess {
  const env = {
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: "test",
    DIRIGENT_MODEL_MAX_RETRIES: "0",
    DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS),
    DIRIGENT_LOG_LEVEL: "warn",
  };
  const p = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", String(concurrency)], env);
  processes.push(p);
  return p;
}

const ids = (tag: string) => Array.from({ length: TASKS }, (_, n) => `join-${tag}-${n}`);
const lastUser = (r: RecordedRequest) => String([...r.body.messages].reverse().find((m) => m["role"] === "user")?.["content"] ?? "");
/** The task a model call is for (its prompt names it in brackets). */
const taskOf = (r: RecordedRequest) => lastUser(r).match(/\[(join-[a-z]+-\d+)\]/)?.[1];

/** Counts the model calls per task over the mocks' logs. */
function callsPerTask(models: MockLlmServer[]): Map<string, number> {
  const calls = new Map<string, number>();
  for (const model of models)
    for (const r of model.requests) {
      const id = taskOf(r);
      if (id) calls.set(id, (calls.get(id) ?? 0) + 1);
    }
  return calls;
}

/** Polls the mocks' logs (the mock announces no request) until `condition`. */
async function untilCalls(condition: () => boolean, what: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(20);
  }
}

/** Follows every task's events and results, submits the tasks, and tells when all are settled. */
async function run(stack: Stack, tag: string) {
  const subjects = createSubjects(stack.root);
  const events = new Recorder<TaskEvent>();
  const results = new Recorder<TaskOutcome>();
  stack.transport.bus.subscribe(subjects.anyTaskEvents, (m) => {
    const d = decode(TaskEvent, m.data);
    if (d.ok) events.push(d.value);
  });
  stack.transport.bus.subscribe(subjects.anyTaskResult, (m) => {
    const d = decode(TaskOutcome, m.data);
    if (d.ok) results.push(d.value);
  });
  await stack.transport.bus.flush();
  await Promise.all(
    ids(tag).map((taskId) => stack.client.submit({ taskId, xml: `<task><description>[${taskId}] answer slowly</description></task>` })),
  );
  /** Every result, once the intake is drained (nothing more can come). */
  const settled = async (): Promise<readonly TaskOutcome[]> => {
    await results.until((v) => new Set(v.map((r) => r.taskId)).size === TASKS, "every result", 120_000);
    const queue = stack.transport.queue;
    if (!(queue instanceof JetStreamWorkQueue)) throw new Error("expected the JetStream work queue");
    const deadline = Date.now() + 15_000;
    while ((await queue.size()) !== 0) {
      if (Date.now() > deadline) throw new Error("the intake was never drained");
      await delay(50);
    }
    await stack.transport.bus.flush();
    return results.values;
  };
  const of = (type: string) => new Set(events.values.filter((e) => e.type === type).map((e) => e.taskId as string));
  return { events, settled, of };
}

/** Each task ended with exactly one result, complete. */
function expectOneResultEach(tag: string, all: readonly TaskOutcome[]): void {
  const byTask = new Map<string, string[]>();
  for (const r of all) byTask.set(r.taskId, [...(byTask.get(r.taskId) ?? []), r.status]);
  expect([...byTask.keys()].sort()).toEqual(ids(tag).sort());
  expect([...byTask].filter(([, statuses]) => statuses.length !== 1 || statuses[0] !== "COMPLETE")).toEqual([]);
}

async function ready(...ps: CliProcess[]): Promise<void> {
  await Promise.all(ps.map((p) => p.waitFor(/ready/, 90_000)));
}

describe("a crash repeats only what was running in the crashed process", () => {
  it("a Director killed while its tasks' sessions run in a surviving Handler adds no model call", async () => {
    // Held until every resumed walk has joined its session: the resumed walks find the sessions still running.
    const model = await heldModel();
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock: model, root, roles: ["memory"] });
    // The Director to kill holds all 30 tasks; the other starts once it does, with room to resume them all.
    const victim = worker("director", root, model, 64);
    const rest = [worker("evaluator", root, model, 64), worker("handler", root, model, 64), worker("handler", root, model, 64)];
    await ready(victim, ...rest);
    const { events, settled, of } = await run(stack, "a");
    await untilCalls(() => model.requests.length >= TASKS, "every session's model call");
    await ready(worker("director", root, model, 64));
    victim.child.kill("SIGKILL");
    await victim.exited;
    await events.until(() => of("model.joined").size === TASKS, "every resumed walk joining its session in flight", 90_000);
    model.openGate(HELD);

    expectOneResultEach("a", await settled());
    // Exactly one model call per task: the resumed evaluations joined the sessions in flight.
    const calls = callsPerTask([model]);
    expect(ids("a").map((id) => calls.get(id) ?? 0)).toEqual(ids("a").map(() => 1));
    expect(model.requests).toHaveLength(TASKS);
    // Every task was resumed by the other Director, and its walk joined its session in flight (awaited above).
    expect([...of("task.resumed")].sort()).toEqual(ids("a").sort());
  }, 300_000);

  it("an Evaluator killed while its walks' sessions run in a Handler adds no model call", async () => {
    // Held until the killed Evaluator's walks, asked for again, have joined their sessions.
    const model = await heldModel();
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock: model, root, roles: ["memory"] });
    // The Evaluator to kill runs all 30 walks; the other starts once it does, with room for them all.
    const victim = worker("evaluator", root, model, 64);
    const rest = [worker("director", root, model, 64), worker("handler", root, model, 64)];
    await ready(victim, ...rest);
    const { events, settled, of } = await run(stack, "b");
    await untilCalls(() => model.requests.length >= TASKS, "every session's model call");
    await ready(worker("evaluator", root, model, 64));
    victim.child.kill("SIGKILL");
    await victim.exited;
    await events.until(() => of("model.joined").size === TASKS, "every walk, asked for again, joining its session", 90_000);
    model.openGate(HELD);

    expectOneResultEach("b", await settled());
    const calls = callsPerTask([model]);
    expect(ids("b").map((id) => calls.get(id) ?? 0)).toEqual(ids("b").map(() => 1));
    expect(model.requests).toHaveLength(TASKS);
  }, 300_000);

  it("a Handler killed adds at most one model call per task whose session it held", async () => {
    // The killed Handler's model holds every call (they die with it); the survivor's answers at once.
    const [modelA, modelB] = [await heldModel(), await heldModel({ open: true })];
    if (!modelA || !modelB) throw new Error("unreachable");
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock: modelA, root, roles: ["memory"] });
    // At most 20 sessions per Handler: each holds some of the 30.
    const handlers = [worker("handler", root, modelA, 20), worker("handler", root, modelB, 20)];
    const rest = [worker("director", root, modelA, 64), worker("evaluator", root, modelA, 64)];
    await ready(...handlers, ...rest);
    const { settled } = await run(stack, "c");
    await untilCalls(() => modelA.requests.length + modelB.requests.length >= TASKS, "every session's model call");
    const [victim] = handlers;
    victim?.child.kill("SIGKILL");
    await victim?.exited;
    const held = new Set(modelA.requests.map(taskOf).filter((id) => id !== undefined));
    expect(held.size).toBeGreaterThan(0);

    expectOneResultEach("c", await settled());
    const calls = callsPerTask([modelA, modelB]);
    // A task the killed Handler did not hold: one call. One it held: at most one more (the call in flight).
    expect(ids("c").filter((id) => (calls.get(id) ?? 0) !== 1 && !held.has(id))).toEqual([]);
    expect(ids("c").filter((id) => (calls.get(id) ?? 0) > 2)).toEqual([]);
    expect(modelA.requests.length + modelB.requests.length).toBeLessThanOrEqual(TASKS + held.size);
    // Sessions the killed Handler held were taken over by the surviving one once their leases ran out.
    expect([...held].filter((id) => modelB.requests.some((r) => taskOf(r) === id)).length).toBeGreaterThan(0);
  }, 300_000);
});
