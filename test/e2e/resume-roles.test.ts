/**
 * Resume per role, with real processes: an Evaluator killed (`kill -9`) mid-walk of a sequential task, a Handler
 * killed between the turns of a session (a tool-call turn, then the final turn), and a Handler killed while the
 * scripts of a turn run. Another process of the role takes the work over; the task ends with exactly one result,
 * the model is not asked again for what was finished, at most the turn in flight is repeated, and a script in flight is not.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type RecordedRequest } from "../../runtime/model/mock-server.js";
import { JetStreamWorkQueue } from "../../runtime/nats/queue.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { noneRunning, pidsRunning } from "../support/process-group.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { follow } from "../support/durability.js";
import type { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

/**
 * A gate no count reaches: the model call held there stays in flight until the test opens it, once the process it
 * kills is gone (a kill lands inside the call whatever the machine's speed).
 */
const HELD = { name: "", count: 1000 };

let server: TestNatsServer;
let mock: MockLlmServer;
const processes: CliProcess[] = [];
/** The workspace of the scripts: A appends "A" to log.txt; B appends "B <pid>" and, the first time, hangs. */
const workspace = mkdtempSync(join(tmpdir(), "dirigent-resume-"));
const SCRIPT_A = "require('node:fs').appendFileSync('log.txt', 'A\\n')";
const SCRIPT_B =
  "const fs = require('node:fs'); fs.appendFileSync('log.txt', 'B ' + process.pid + '\\n'); " +
  "if (fs.readFileSync('log.txt', 'utf8').split('\\n').filter((l) => l.startsWith('B ')).length === 1) setInterval(() => {}, 1000)";
const logLines = (): string[] => {
  try {
    return readFileSync(join(workspace, "log.txt"), "utf8")
      .split("\n")
      .filter((l) => l !== "");
  } catch {
    return [];
  }
};

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: { regex: "STEP-ONE" } }, reply: "one done" },
        { match: { lastUser: { regex: "STEP-TWO" } }, reply: "two done", gate: { ...HELD, name: "step-two" } },
        { match: { lastUser: { regex: "STEP-THREE" } }, reply: "three done" },
        { match: { lastUser: { regex: "^TOOLY" }, turn: 1 }, toolCalls: [{ name: "list_files", arguments: { path: "." } }] },
        { match: { lastUser: { regex: "^TOOLY" }, hasToolResult: true }, reply: "listed", gate: { ...HELD, name: "tooly-turn-two" } },
        {
          match: { lastUser: { regex: "^SCRIPTY" }, turn: 1 },
          toolCalls: [
            { name: "run_script", arguments: { argv: [process.execPath, "-e", SCRIPT_A] } },
            { name: "run_script", arguments: { argv: [process.execPath, "-e", SCRIPT_B] } },
          ],
        },
        { match: { lastUser: { regex: "^SCRIPTY" }, hasToolResult: true }, reply: "scripted" },
      ],
      default: { reply: "unexpected" },
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
  rmSync(workspace, { recursive: true, force: true });
});

const lastUser = (r: RecordedRequest) => String([...r.body.messages].reverse().find((m) => m["role"] === "user")?.["content"] ?? "");
const hasToolResult = (r: RecordedRequest) => r.body.messages.some((m) => m["role"] === "tool");
const requestsFor = (token: string) => mock.requests.filter((r) => lastUser(r).includes(token));

const env = {
  OPENAI_BASE_URL: "",
  OPENAI_API_KEY: "test",
  DIRIGENT_MODEL_MAX_RETRIES: "0",
  DIRIGENT_LOG_LEVEL: "info",
};

function worker(role: string, root: string, extraEnv: NodeJS.ProcessEnv = {}): CliProcess {
  const p = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], {
    ...env,
    OPENAI_BASE_URL: mock.url,
    ...extraEnv,
  });
  processes.push(p);
  return p;
}

/** The mock model announces no request: poll its record with a deadline. */
async function untilRequest(condition: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(20);
  }
}

/** Waits for the one result, then until the intake message is acked (nothing more can come), and returns all results. */
async function settled(stack: Stack, results: Recorder<TaskOutcome>): Promise<readonly TaskOutcome[]> {
  await results.count(1, "the result", 60_000);
  const queue = stack.transport.queue;
  if (!(queue instanceof JetStreamWorkQueue)) throw new Error("expected the JetStream work queue");
  const deadline = Date.now() + 10_000;
  while ((await queue.size()) !== 0) {
    if (Date.now() > deadline) throw new Error("the intake message was never acked");
    await delay(50);
  }
  await stack.transport.bus.flush();
  return results.values;
}

describe("an Evaluator killed mid-walk", () => {
  it("is replaced by another Evaluator process, which replays the finished steps", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock, root, roles: ["director", "handler", "memory"] });
    const first = worker("evaluator", root);
    await first.waitFor(/ready/);
    const taskId = newTaskId();
    const { events, results } = await follow(stack, taskId);
    await stack.client.submit({
      taskId,
      xml: `<task type="sequential"><steps>
  <task><description>STEP-ONE first</description></task>
  <task><description>STEP-TWO second</description></task>
  <task><description>STEP-THREE third</description></task>
</steps></task>`,
    });
    await untilRequest(() => requestsFor("STEP-TWO").length === 1, "the second step's model call");
    // The walk is inside step two, on the only Evaluator: start a second one, then kill the first.
    const second = worker("evaluator", root);
    await second.waitFor(/ready/);
    first.child.kill("SIGKILL");
    await first.exited;
    // The kill landed inside step two: its model call is held until now.
    expect(requestsFor("STEP-THREE")).toHaveLength(0);
    mock.openGate("step-two");

    const all = await settled(stack, results);
    expect(all).toHaveLength(1);
    expect(all[0]).toMatchObject({ taskId, status: "COMPLETE", content: "three done" });
    // Step one was finished before the kill: never asked again. Step two was in flight: at most once more.
    expect(requestsFor("STEP-ONE")).toHaveLength(1);
    expect(requestsFor("STEP-TWO").length).toBeLessThanOrEqual(2);
    expect(requestsFor("STEP-THREE")).toHaveLength(1);
    expect(events.values.some((e) => e.type === "model.replayed")).toBe(true);
    expect(events.values.filter((e) => e.type === "task.completed")).toHaveLength(1);
  }, 240_000);
});

describe("a Handler killed between the turns of a session", () => {
  it("is replaced by another Handler process, which continues after the recorded turn", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock, root, roles: ["director", "evaluator", "memory"] });
    const first = worker("handler", root);
    await first.waitFor(/ready/);
    const taskId = newTaskId();
    const { events, results } = await follow(stack, taskId);
    await stack.client.submit({ taskId, xml: "<task><description>TOOLY list the workspace, then say so</description></task>" });
    // Turn one (the tool call, and the tool run) is recorded; turn two's model call is under way.
    await untilRequest(() => requestsFor("TOOLY").some(hasToolResult), "the session's second turn");
    const second = worker("handler", root);
    await second.waitFor(/ready/);
    first.child.kill("SIGKILL");
    await first.exited;
    // The kill landed inside the second turn's model call: it is held until now.
    expect(results.values).toHaveLength(0);
    mock.openGate("tooly-turn-two");

    const all = await settled(stack, results);
    expect(all).toHaveLength(1);
    expect(all[0]).toMatchObject({ taskId, status: "COMPLETE", content: "listed" });
    const calls = requestsFor("TOOLY");
    // The first turn is not made again; the turn in flight at the kill is made at most once more.
    expect(calls.filter((r) => !hasToolResult(r))).toHaveLength(1);
    expect(calls.filter(hasToolResult).length).toBeGreaterThanOrEqual(1);
    expect(calls.length).toBeLessThanOrEqual(3);
    expect(events.values.filter((e) => e.type === "task.completed")).toHaveLength(1);
  }, 240_000);
});

describe("a Handler killed while the scripts of a turn run", () => {
  it("is replaced by another Handler process, which asks the model nothing again and reruns no script (the one in flight: outcome unknown)", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock, root, roles: ["director", "evaluator", "memory"] });
    const scripts = { DIRIGENT_TOOLS: "run_script", DIRIGENT_WORKSPACE_ROOT: workspace };
    const first = worker("handler", root, scripts);
    await first.waitFor(/ready/);
    const taskId = newTaskId();
    const { events, results } = await follow(stack, taskId);
    await stack.client.submit({ taskId, xml: "<task><description>SCRIPTY run both scripts</description></task>" });
    // B runs (and hangs): the model's answer was recorded before A ran, and A's answer once A finished.
    await untilRequest(() => logLines().length === 2, "the second script to start");
    const second = worker("handler", root, scripts);
    await second.waitFor(/ready/);
    expect(pidsRunning(`${process.execPath} -e ${SCRIPT_B}`)).toHaveLength(1);
    first.child.kill("SIGKILL");
    await first.exited;
    // The first run of B ran in its Handler's sandbox, whose PID namespace died with the Handler: nothing to end.
    await noneRunning(`${process.execPath} -e ${SCRIPT_B}`);

    const all = await settled(stack, results);
    expect(all).toHaveLength(1);
    expect(all[0]).toMatchObject({ taskId, status: "COMPLETE", content: "scripted" });
    const calls = requestsFor("SCRIPTY");
    // The answer of turn one was recorded: not asked again. A's answer was recorded: A did not run again. B was in
    // flight at the kill and run_script is not idempotent: not run again, the model told its outcome is unknown.
    expect(calls.filter((r) => !hasToolResult(r))).toHaveLength(1);
    expect(calls.filter(hasToolResult)).toHaveLength(1);
    expect(JSON.stringify(calls.find(hasToolResult))).toContain("the outcome of this call of 'run_script' is unknown");
    const log = logLines();
    expect(log).toHaveLength(2);
    expect(log[0]).toBe("A");
    expect(log[1]?.startsWith("B ")).toBe(true);
    expect(events.values.filter((e) => e.type === "task.completed")).toHaveLength(1);
  }, 240_000);
});
