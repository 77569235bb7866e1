/**
 * The Compiler's records over a real nats-server (the turns bucket in JetStream KV) and the mock model through the
 * openai SDK: a compilation asked again while another Compiler process runs it waits for that run and replays its
 * record; a finished one is replayed; one stopped after an invalid answer continues from its record without asking
 * for that answer again. Two run gates over one store stand for two Compiler processes.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileWithModel, type CompileHooks } from "../../actors/compiler/compilation.js";
import { compileKey, recordedCompile } from "../../actors/compiler/records.js";
import { silentLogger, type ActorDeps } from "../../actors/deps.js";
import { createLeases, createRunGate, type RunGate } from "../../actors/handler/lease.js";
import { createSubjects, decode, Progress, type CompileRequest, type TaskId } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { createModelClient } from "../../runtime/model/openai.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { pollUntil } from "../support/process-group.js";
import { Recorder } from "../support/recorder.js";

const COMPILER = "dirigent task compiler";
const GOOD = `<task><description>Write a haiku.</description></task>`;

let server: TestNatsServer;
let mock: MockLlmServer;
let transport: OpenTransport;
let deps: ActorDeps;
const progress = new Recorder<Progress>();

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        // Held until the test's own request reaches the gate.
        { match: { system: COMPILER, anyMessage: "REQ-HELD" }, reply: GOOD, gate: { name: "held", count: 2 } },
        { match: { lastUser: "OPEN held" }, reply: "open", gate: { name: "held", count: 2 } },
        // Invalid at first; the second attempt (the errors fed back) is slow once, then answered at once.
        { match: { system: COMPILER, anyMessage: "REQ-TWICE", lastUser: "not a valid template" }, reply: GOOD, delayMs: 60_000, times: 1 },
        { match: { system: COMPILER, anyMessage: "REQ-TWICE", lastUser: "not a valid template" }, reply: GOOD },
        { match: { system: COMPILER, anyMessage: "REQ-TWICE" }, reply: "<task><description>oops</descriptio></task>" },
      ],
    },
  });
  const root = randomRoot();
  const subjects = createSubjects(root);
  transport = await openNatsTransport(server.url, subjects, { name: `test-${root}`, log: silentLogger });
  deps = { bus: transport.bus, subjects, log: silentLogger, now: () => new Date(), newId: () => randomUUID() };
  transport.bus.subscribe(subjects.anyProgress, (msg) => {
    const decoded = decode(Progress, msg.data);
    if (decoded.ok) progress.push(decoded.value);
  });
  await transport.bus.flush();
});

afterAll(async () => {
  await transport?.close();
  await mock?.close();
  await server?.stop();
});

const callModel = () => createModelClient({ baseURL: mock.url, apiKey: "test-key", timeoutMs: 120_000, maxRetries: 0 });
const options = { defaultModel: "mock-model", maxAttempts: 3 };
const compileCalls = (token: string) =>
  mock.requests.filter((r) => JSON.stringify(r.body.messages[0]).includes(COMPILER) && JSON.stringify(r.body.messages).includes(token));
const eventsOf = (taskId: string, event: string) => progress.values.filter((p) => p.taskId === taskId && p.event === event);

/** One Compiler process's view: its own leases over the shared turns bucket. */
function compilerProcess(): RunGate {
  if (!transport.turns) throw new Error("the NATS transport has a turns bucket");
  return createRunGate(createLeases(transport.turns, silentLogger));
}

function compile(gate: RunGate, request: CompileRequest, signal = new AbortController().signal) {
  if (!transport.turns) throw new Error("the NATS transport has a turns bucket");
  const run = (hooks: CompileHooks) => compileWithModel(request, callModel(), options, signal, hooks);
  return recordedCompile(deps, transport.turns, gate, request, run, {});
}

const untilRequests = (condition: () => boolean, what: string) => pollUntil(() => (condition() ? true : undefined), what, 15_000);

const request = (taskId: string, prompt: string): CompileRequest => ({
  type: "compiler.compile",
  prompt,
  taskId: taskId as TaskId,
  occurrence: 1,
});

describe("the Compiler's records", () => {
  it("keys only a compilation that names its task and occurrence, by what it asks", () => {
    const asked = request("t-key", "REQ-KEY");
    expect(compileKey(asked)).toMatch(/^t-key\.k[0-9a-f]{40}$/);
    expect(compileKey({ ...asked, occurrence: 2 })).not.toBe(compileKey(asked));
    expect(compileKey({ ...asked, prompt: "REQ-OTHER" })).not.toBe(compileKey(asked));
    expect(compileKey({ type: "compiler.compile", prompt: "REQ-KEY", taskId: asked.taskId })).toBeUndefined();
    expect(compileKey({ type: "compiler.compile", prompt: "REQ-KEY", occurrence: 1 })).toBeUndefined();
  });

  it("a compilation asked again while another Compiler runs it waits for that run and replays its record", async () => {
    const taskId = `t-${randomUUID()}`;
    const asked = request(taskId, "REQ-HELD haiku");
    const first = compile(compilerProcess(), asked);
    await untilRequests(() => compileCalls("REQ-HELD").length === 1, "the compile call");
    const second = compile(compilerProcess(), asked);
    await progress.until(() => eventsOf(taskId, "model.joined").length === 1, "the second request to join");
    expect(eventsOf(taskId, "model.joined")[0]?.data).toMatchObject({ at: "elsewhere", compile: "compile" });
    const opened = await fetch(`${mock.url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "mock-model", messages: [{ role: "user", content: "OPEN held" }] }),
    });
    expect(opened.status).toBe(200);

    const [a, b] = await Promise.all([first, second]);
    expect(a).toMatchObject({ type: "compiler.result", xml: GOOD, attempts: 1 });
    expect(b).toEqual(a);
    const replayed = "replayed the recorded compilation: no model call";
    await progress.until(() => eventsOf(taskId, "model.replayed").length === 1, "the joiner's replay");
    // Asked once more, later, by a third process: replayed again, still one model call in all.
    expect(await compile(compilerProcess(), asked)).toEqual(a);
    await progress.until(() => eventsOf(taskId, "model.replayed").length === 2, "the third request's replay");
    expect(eventsOf(taskId, "model.replayed").map((p) => p.message)).toEqual([replayed, replayed]);
    expect(compileCalls("REQ-HELD")).toHaveLength(1);
  });

  it("a compilation stopped after an invalid answer continues from its record, not asking for that answer again", async () => {
    const taskId = `t-${randomUUID()}`;
    const asked = request(taskId, "REQ-TWICE haiku");
    const stopped = new AbortController();
    const first = compile(compilerProcess(), asked, stopped.signal);
    // The invalid first answer is recorded before the second attempt asks the model.
    await untilRequests(() => compileCalls("REQ-TWICE").length === 2, "the second attempt");
    stopped.abort();
    await expect(first).rejects.toThrow();

    const reply = await compile(compilerProcess(), asked);
    expect(reply).toMatchObject({ type: "compiler.result", xml: GOOD, attempts: 2, errors: [expect.stringMatching(/^attempt 1: /)] });
    expect(reply).toHaveProperty("usage.promptTokens", expect.any(Number));
    const retried = (r: (typeof mock.requests)[number]) => JSON.stringify(r.body.messages).includes("not a valid template");
    // The first answer was asked for once; only the second attempt, in flight when it stopped, was asked again.
    expect(compileCalls("REQ-TWICE").map(retried)).toEqual([false, true, true]);
    await progress.until(() => eventsOf(taskId, "model.replayed").length === 1, "the continuation");
    expect(eventsOf(taskId, "model.replayed")[0]?.message).toBe("continuing the recorded compilation after attempt 1");
  });
});
