/**
 * The CLI as a user runs it: `up`, `submit`, `status`, `cancel`, and `run` falling back to an embedded runtime and
 * printing step and iteration events, and a map's progress (`map 2/4 done (branch 3 FAILED)`) from the reports a
 * Director relays.
 */
import { connect } from "@nats-io/transport-node";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { branchFinished, branchStarted, mapStarted, progressBytes } from "../support/map-events.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli } from "../support/processes.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let dir: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "slowly" }, reply: "late", delayMs: 60_000 },
        // A task that waits for the user (awaiting_input) while the test reports a map's progress for it.
        { match: { lastUser: { regex: "^ASK" }, turn: 1 }, toolCalls: [{ name: "request_user_input", arguments: { question: "Go on?" } }] },
        { match: { lastUser: { regex: "^ASK" }, hasToolResult: true }, reply: "mapped" },
        { reply: "embedded answer" },
      ],
    },
  });
  dir = mkdtempSync(join(tmpdir(), "dirigent-cli-"));
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const modelEnv = () => ({ OPENAI_BASE_URL: mock.url, OPENAI_API_KEY: "test", DIRIGENT_MODEL_MAX_RETRIES: "0" });

describe("dirigent CLI", () => {
  it("run starts an embedded runtime when no Director answers", async () => {
    const file = join(dir, "one.xml");
    writeFileSync(file, "<task><description>hello</description></task>");
    const run = startCli(["run", file, "--nats", server.url, "--prefix", randomRoot()], modelEnv());
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/no runtime reachable; running an embedded one/);
    expect(run.output()).toMatch(/result: COMPLETE[\s\S]*embedded answer/);
  });

  it("run prints each step (step n/N) and each iteration (iteration n/max) as it happens", async () => {
    const steps = join(dir, "steps.xml");
    writeFileSync(
      steps,
      '<task type="sequential"><steps><task><description>first</description></task><task><description>second</description></task></steps></task>',
    );
    const seq = startCli(["run", steps, "--nats", server.url, "--prefix", randomRoot()], modelEnv());
    expect(await seq.exited).toBe(0);
    expect(seq.output()).toMatch(/step\.started\s+step 1\/2[\s\S]*step\.started\s+step 2\/2[\s\S]*result: COMPLETE/);
    const loop = join(dir, "loop.xml");
    writeFileSync(
      loop,
      '<task type="director_evaluator_loop"><max_iterations>2</max_iterations><director><description>draft</description></director><evaluator><description>judge</description></evaluator></task>',
    );
    // The mock's evaluator never answers success: the loop is exhausted after both iterations (exit code 1).
    const de = startCli(["run", loop, "--nats", server.url, "--prefix", randomRoot()], modelEnv());
    expect(await de.exited).toBe(1);
    expect(de.output()).toMatch(/iteration\.started\s+iteration 1\/2[\s\S]*iteration\.started\s+iteration 2\/2[\s\S]*result: FAILED/);
  });

  it("up serves submit, status and cancel; cancel aborts the running task", async () => {
    const root = randomRoot();
    const up = startCli(["up", "--nats", server.url, "--prefix", root], modelEnv());
    try {
      await up.waitFor(/ready/);
      const file = join(dir, "slow.xml");
      writeFileSync(file, "<task><description>answer slowly</description></task>");
      const nc = await connect({ servers: server.url });
      const taskId = "cli-cancel-1";
      const running = nc.subscribe(`${root}.tasks.${taskId}.events`);
      const submit = startCli(["submit", file, "--task-id", taskId, "--nats", server.url, "--prefix", root]);
      expect(await submit.exited).toBe(0);
      expect(submit.output().trim()).toBe(taskId);
      for await (const m of running) if ((m.json() as { type: string }).type === "node.started") break;
      await nc.drain();

      const status = startCli(["status", taskId, "--nats", server.url, "--prefix", root]);
      expect(await status.exited).toBe(0);
      expect(JSON.parse(status.output())).toMatchObject({ taskId, state: "running" });

      const cancel = startCli(["cancel", taskId, "--nats", server.url, "--prefix", root]);
      expect(await cancel.exited).toBe(0);
      expect(JSON.parse(cancel.output())).toEqual({ taskId, state: "cancelled", cancelled: true });

      const again = startCli(["submit", file, "--task-id", taskId, "--nats", server.url, "--prefix", root]);
      expect(await again.exited).toBe(0);
      expect(again.output()).toMatch(/duplicate/);

      const unknown = startCli(["status", "no-such-task", "--nats", server.url, "--prefix", root]);
      expect(await unknown.exited).toBe(1);
      expect(unknown.output()).toMatch(/no task 'no-such-task'/);
    } finally {
      await up.stop();
    }
    expect(up.output()).toMatch(/SIGTERM: draining/);
  });

  it("run prints a map's progress as map n/N done lines, naming failed branches and nested maps", async () => {
    const root = randomRoot();
    const subjects = createSubjects(root);
    const up = startCli(["up", "--nats", server.url, "--prefix", root], modelEnv());
    const nc = await connect({ servers: server.url });
    try {
      await up.waitFor(/ready/);
      const file = join(dir, "ask.xml");
      writeFileSync(file, "<task><description>ASK then map</description></task>");
      const taskId = "cli-map-1";
      const events = nc.subscribe(subjects.taskEvents(taskId));
      const run = startCli(["run", file, "--task-id", taskId, "--nats", server.url, "--prefix", root]);
      for await (const m of events) if ((m.json() as { type: string }).type === "continuation.input") break;
      // Reported as the Evaluator reports a map at the root whose branch 2 runs a map of its own.
      const inner = "0/map:2:0";
      const reports = [
        mapStarted("0", 4, 2),
        branchStarted("0", "0/map:1", 1, 4),
        branchStarted("0", "0/map:2", 2, 4),
        mapStarted(inner, 3, 3, "collect"),
        branchFinished("0", "0/map:1", 1, 4, "COMPLETE", 1),
        branchFinished(inner, `${inner}.steps.1`, 2, 3, "COMPLETE", 1),
        branchStarted("0", "0/map:3", 3, 4),
        branchFinished("0", "0/map:3", 3, 4, "FAILED", 2),
      ];
      for (const report of reports) nc.publish(subjects.progress(taskId), progressBytes(taskId, report));
      await run.waitFor(/map 2\/4 done/);
      expect(await nc.request(subjects.taskInput(taskId), JSON.stringify({ text: "yes" }), { timeout: 10_000 })).toBeDefined();
      expect(await run.exited).toBe(0);
      const lines = run.output().split("\n");
      const shown = lines.filter((l) => /\s(map|branch)\.(started|finished)\s/.test(l)).map((l) => l.replace(/^\[\s*\d+\]\s+\S+\s+/, ""));
      expect(shown).toEqual([
        "map.started  map started: 4 branches, 2 at once",
        "branch.started  branch 1/4",
        "branch.started  branch 2/4",
        `map.started  map ${inner} started: 3 branches, 3 at once, failures collected`,
        "branch.finished  map 1/4 done",
        `branch.finished  map ${inner}: 1/3 done`,
        "branch.started  branch 3/4",
        "branch.finished  map 2/4 done (branch 3 FAILED)",
      ]);
      expect(run.output()).toMatch(/result: COMPLETE[\s\S]*mapped/);
    } finally {
      await nc.drain();
      await up.stop();
    }
  });

  it("refuses a bad task id and a bad flag value with exit code 2", async () => {
    const bad = startCli(["status", "a.b", "--nats", server.url]);
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toMatch(/task id 'a\.b'/);
    const conc = startCli(["worker", "--role", "memory", "--concurrency", "lots", "--nats", server.url]);
    expect(await conc.exited).toBe(2);
    expect(conc.output()).toMatch(/--concurrency.*'lots'/);
  });
});
