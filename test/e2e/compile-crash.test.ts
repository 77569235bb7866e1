/**
 * A compilation in flight is not made again when the process that asked for it dies (real nats-server, role
 * processes, `kill -9`): a Director killed while its task's prompt compiles, or an Evaluator killed while it has a
 * failed node decomposed, adds no compile call; the resumed task joins the compilation still running in the Compiler
 * (or, had it just ended, replays its record). The mock model holds the compile's answer at a gate until the test
 * opens it, so the compilation is provably in flight across the crash and the resume; its request log counts the calls.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer, type RecordedRequest } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { watch } from "../support/durability.js";
import { pollUntil } from "../support/process-group.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

const ACK_WAIT_MS = 1500;
const COMPILER = "dirigent task compiler";
const OPEN = "OPEN THE COMPILE GATE";
const TEMPLATE = `<task><description>CRASH-RUN say done</description></task>`;
const SPLIT = `<task type="sequential"><steps>
  <task><description>CRASH-PART one</description></task>
  <task><description>CRASH-PART two</description></task>
</steps></task>`;

let server: TestNatsServer;
let model: MockLlmServer;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  model = await startMockLlm({
    port: 0,
    script: {
      rules: [
        // The compilations: held until a second request reaches the gate (a repeated compile call, or the test's own).
        { match: { system: COMPILER, anyMessage: "CRASH-PROMPT" }, reply: TEMPLATE, gate: { name: "prompt", count: 2 } },
        { match: { system: COMPILER, anyMessage: "CRASH-BIG" }, reply: SPLIT, gate: { name: "split", count: 2 } },
        { match: { lastUser: `${OPEN} prompt` }, reply: "open", gate: { name: "prompt", count: 2 } },
        { match: { lastUser: `${OPEN} split` }, reply: "open", gate: { name: "split", count: 2 } },
        { match: { lastUser: "CRASH-RUN" }, reply: "done" },
        { match: { lastUser: "CRASH-PART" }, reply: "part done" },
        // Never finishes within one turn (DIRIGENT_MAX_TURNS=1): runs out of turns and is decomposed.
        { match: { lastUser: "CRASH-BIG" }, toolCalls: [{ name: "list_files", arguments: {} }] },
      ],
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await model?.close();
  await server?.stop();
});

function worker(role: string, root: string): CliProcess {
  const env = {
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: "test",
    DIRIGENT_MODEL_MAX_RETRIES: "0",
    DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS),
    DIRIGENT_MAX_TURNS: "1",
    DIRIGENT_LOG_LEVEL: "warn",
  };
  const p = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root], env);
  processes.push(p);
  return p;
}

async function ready(...ps: CliProcess[]): Promise<void> {
  await Promise.all(ps.map((p) => p.waitFor(/ready/, 60_000)));
}

const compiles = (token: string): RecordedRequest[] =>
  model.requests.filter((r) => JSON.stringify(r.body.messages[0]).includes(COMPILER) && JSON.stringify(r.body.messages).includes(token));

/** Resolves once `condition` holds over the mock's request log (it announces no request). */
const untilRequests = (condition: () => boolean, what: string) => pollUntil(() => (condition() ? true : undefined), what, 60_000);

/** Sends the test's own request to the gate `name`: it opens it, should no second compile call have done so. */
async function openGate(name: string): Promise<void> {
  const response = await fetch(`${model.url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "mock-model", messages: [{ role: "user", content: `${OPEN} ${name}` }] }),
  });
  expect(response.status).toBe(200);
}

/** Follows one task's events and result. */
async function follow(stack: Stack, taskId: string) {
  const { events, results } = watch(stack, taskId);
  await stack.transport.bus.flush();
  return { events, results, types: () => events.values.map((e) => e.type) };
}

describe("a crash of the process that asked for a compilation repeats no compile call", () => {
  it("a Director killed while its task's prompt compiles", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock: model, root, roles: ["memory"] });
    const first = worker("director", root);
    const rest = [worker("evaluator", root), worker("handler", root)];
    await ready(first, ...rest);
    const taskId = newTaskId();
    const { events, results, types } = await follow(stack, taskId);
    await stack.client.submit({ taskId, prompt: "CRASH-PROMPT: say done" });
    // The compile's model call is in flight (held at the gate); only then is the Director that asked for it killed.
    await untilRequests(() => compiles("CRASH-PROMPT").length === 1, "the compile call");
    const second = worker("director", root);
    await ready(second);
    first.child.kill("SIGKILL");
    await first.exited;
    // The second Director resumes the task and asks for the compilation again: it joins the one in flight (without
    // the fix, it is a second compile call, which opens the gate).
    await events.until(
      () => types().includes("model.joined") || compiles("CRASH-PROMPT").length > 1,
      "the resumed task's compilation",
      60_000,
    );
    await openGate("prompt");

    const [outcome] = await results.count(1, "the result", 60_000);
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "done" });
    expect(compiles("CRASH-PROMPT")).toHaveLength(1);
    await events.until(() => types().includes("task.completed"), "the completed event");
    expect(types()).toEqual(expect.arrayContaining(["task.resumed", "model.joined", "task.compiled"]));
    expect(events.values.find((e) => e.type === "model.joined")?.data).toMatchObject({ compile: "compile", at: "here" });
  }, 180_000);

  it("an Evaluator killed while a node that ran out of turns is decomposed", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock: model, root, roles: ["memory"] });
    const first = worker("evaluator", root);
    const rest = [worker("director", root), worker("handler", root)];
    await ready(first, ...rest);
    const taskId = newTaskId();
    const { events, results, types } = await follow(stack, taskId);
    await stack.client.submit({ taskId, xml: `<task><description>CRASH-BIG essay</description></task>` });
    await untilRequests(() => compiles("CRASH-BIG").length === 1, "the decompose call");
    const second = worker("evaluator", root);
    await ready(second);
    first.child.kill("SIGKILL");
    await first.exited;
    // The Director asks the surviving Evaluator once the killed one is silent; its walk replays the node's recorded
    // session and asks for the same decomposition, which it joins.
    await events.until(() => types().includes("model.joined") || compiles("CRASH-BIG").length > 1, "the new walk's decomposition", 60_000);
    await openGate("split");

    const [outcome] = await results.count(1, "the result", 60_000);
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "part done", notes: { reparsed: { attempts: 1 } } });
    expect(compiles("CRASH-BIG")).toHaveLength(1);
    // The node's session ran once too: the new walk replayed its record.
    const sessions = model.requests.filter((r) => !JSON.stringify(r.body.messages[0]).includes(COMPILER));
    expect(sessions.filter((r) => JSON.stringify(r.body.messages).includes("CRASH-BIG essay"))).toHaveLength(1);
    expect(types()).toEqual(expect.arrayContaining(["model.replayed", "model.joined"]));
    expect(events.values.find((e) => e.type === "model.joined" && e.data?.["compile"] === "decompose")?.data).toMatchObject({
      nodePath: expect.any(String),
      at: "here",
    });
  }, 180_000);
});
