/**
 * The four roles as four OS processes plus `dirigent mock-llm`, a task submitted by a plain NATS client; a session
 * whose spawned subtasks run at the same time across them.
 */
import { connect } from "@nats-io/transport-node";
import { writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNatsServer, randomRoot, type TestNatsServer } from "../support/nats-server.js";
import { startCli, startMockLlmCli, type CliProcess } from "../support/processes.js";

let server: TestNatsServer;
let dir: string;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  dir = mkdtempSync(join(tmpdir(), "dirigent-e2e-"));
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("four roles in four processes", () => {
  it("completes a task submitted from a plain NATS client, and `dirigent run` against the same cluster", async () => {
    const root = randomRoot();
    const script = join(dir, "script.json");
    writeFileSync(script, JSON.stringify({ rules: [{ match: { lastUser: "capital of France" }, reply: "Paris" }] }));
    const mock = await startMockLlmCli(script);
    processes.push(mock.process);
    const { url } = mock;
    const env = { OPENAI_BASE_URL: url, OPENAI_API_KEY: "test", DIRIGENT_MODEL_MAX_RETRIES: "0" };
    for (const role of ["memory", "handler", "evaluator", "director"]) {
      const worker = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
      processes.push(worker);
      await worker.waitFor(/ready/);
    }

    const nc = await connect({ servers: server.url, name: "e2e-plain-client" });
    try {
      const taskId = `e2e-${Date.now()}`;
      const result = nc.subscribe(`${root}.tasks.${taskId}.result`, { max: 1 });
      const events = nc.subscribe(`${root}.tasks.${taskId}.events`);
      const body = JSON.stringify({
        taskId,
        xml: "<task><description>What is the capital of {{country}}?</description></task>",
        inputs: { country: "France" },
      });
      const reply = await nc.request(`${root}.tasks.submit`, body, { timeout: 10_000 });
      expect(reply.json()).toEqual({ taskId, status: "accepted" });
      let outcome: unknown;
      for await (const m of result) outcome = m.json();
      expect(outcome).toMatchObject({ taskId, status: "COMPLETE", content: "Paris" });
      const seen: string[] = [];
      for await (const m of events) {
        seen.push((m.json() as { type: string }).type);
        if (seen.includes("task.completed")) break;
      }
      expect(seen).toEqual(expect.arrayContaining(["task.running", "model.turn", "task.completed"]));
      const status = await nc.request(`${root}.tasks.${taskId}.get`, "", { timeout: 5000 });
      expect(status.json()).toMatchObject({ taskId, state: "completed", result: { content: "Paris" } });
    } finally {
      await nc.drain();
    }

    const file = join(dir, "task.xml");
    writeFileSync(file, "<task><description>capital of {{country}}</description></task>");
    const run = startCli(["run", file, "--input", "country=France", "--nats", server.url, "--prefix", root]);
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/task\.running/);
    expect(run.output()).toMatch(/result: COMPLETE/);
    expect(run.output()).toMatch(/Paris/);
  });

  it("runs a session's spawned subtasks at the same time across the processes, and finishes with their results", async () => {
    const root = randomRoot();
    const script = join(dir, "spawn-script.json");
    const spawn = (description: string) => ({ name: "spawn_subtask", arguments: { type: "atomic", description } });
    const worker = (name: string, reply: string) => ({
      match: { lastUser: { regex: `^WORKER ${name}` } },
      // Held until all three workers have asked: the run only finishes if they run at once.
      gate: { name: "workers", count: 3 },
      reply,
    });
    const rules = [
      { match: { lastUser: { regex: "^FANOUT" }, turn: 1 }, toolCalls: [spawn("WORKER alpha")] },
      { match: { lastUser: { regex: "^FANOUT" }, turn: 2 }, toolCalls: [spawn("WORKER beta")] },
      { match: { lastUser: { regex: "^FANOUT" }, turn: 3 }, toolCalls: [spawn("WORKER gamma")] },
      { match: { lastUser: { regex: "^FANOUT" }, turn: 4 }, toolCalls: [{ name: "await_subtasks", arguments: { timeout_ms: 60_000 } }] },
      { match: { lastUser: { regex: "^FANOUT" }, hasToolResult: { regex: "A-result.*B-result.*C-result" } }, reply: "gathered A, B and C" },
      worker("alpha", "A-result"),
      worker("beta", "B-result"),
      worker("gamma", "C-result"),
    ];
    writeFileSync(script, JSON.stringify({ rules }));
    const mock = await startMockLlmCli(script);
    processes.push(mock.process);
    const { url } = mock;
    const env = {
      OPENAI_BASE_URL: url,
      OPENAI_API_KEY: "test",
      DIRIGENT_MODEL_MAX_RETRIES: "0",
      DIRIGENT_CONTINUATION_TOOLS: "subtask,spawn,input",
    };
    for (const role of ["memory", "handler", "evaluator", "director"]) {
      const process = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
      processes.push(process);
      await process.waitFor(/ready/);
    }
    const file = join(dir, "fanout.xml");
    writeFileSync(file, "<task><description>FANOUT three workers</description></task>");
    const run = startCli(["run", file, "--nats", server.url, "--prefix", root]);
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/continuation\.spawn/);
    expect(run.output()).toMatch(/result: COMPLETE/);
    expect(run.output()).toMatch(/gathered A, B and C/);
  });

  it("runs a map over a list and a step's nested inputs at once, with two Handler processes, printing map n/N done", async () => {
    const root = randomRoot();
    const script = join(dir, "map-script.json");
    const rules = [
      // Held until all four branches have asked: the run only finishes if they run at once.
      { match: { lastUser: { regex: "^SUMMARY " } }, gate: { name: "branches", count: 4 }, reply: "summary of {{lastUser}}" },
      { match: { lastUser: { regex: "^SIDE " } }, gate: { name: "inputs", count: 2 }, reply: "side {{lastUser}}" },
    ];
    writeFileSync(script, JSON.stringify({ rules, default: { reply: "done: {{lastUser}}" } }));
    const mock = await startMockLlmCli(script);
    processes.push(mock.process);
    const { url } = mock;
    const env = { OPENAI_BASE_URL: url, OPENAI_API_KEY: "test", DIRIGENT_MODEL_MAX_RETRIES: "0" };
    for (const role of ["memory", "handler", "handler", "evaluator", "director"]) {
      // Either Handler may get every branch (the queue group picks one at random): each can hold all four.
      const process = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env);
      processes.push(process);
      await process.waitFor(/ready/);
    }
    const file = join(dir, "map.xml");
    writeFileSync(
      file,
      `<task type="sequential"><steps>
  <task type="map" over="files"><steps><task><description>SUMMARY {{item}}</description></task></steps></task>
  <task>
    <description>COMBINE {{left}} and {{right}} with {{previous_result}}</description>
    <inputs>
      <input name="left"><task><description>SIDE left</description></task></input>
      <input name="right"><task><description>SIDE right</description></task></input>
    </inputs>
  </task>
</steps></task>`,
    );
    const run = startCli(["run", file, "--input", 'files=["a.md","b.md","c.md","d.md"]', "--nats", server.url, "--prefix", root]);
    expect(await run.exited).toBe(0);
    expect(run.output()).toMatch(/map 0\.steps\.0: 4\/4 done/);
    expect(run.output()).toMatch(/result: COMPLETE/);
    expect(run.output()).toMatch(
      /done: COMBINE side SIDE left and side SIDE right with \["summary of SUMMARY a\.md","summary of SUMMARY b\.md"/,
    );
  });

  it("exits 2 with file, line and column for an invalid template", async () => {
    const file = join(dir, "bad.xml");
    writeFileSync(file, "<task>\n  <description>oops</descr>\n</task>\n");
    const run = startCli(["run", file, "--nats", server.url]);
    expect(await run.exited).toBe(2);
    expect(run.output()).toMatch(/bad\.xml:2:\d+: INVALID_TEMPLATE/);
  });

  it("exits 2 on a usage error", async () => {
    const run = startCli(["worker", "--role", "conductor"]);
    expect(await run.exited).toBe(2);
    expect(run.output()).toMatch(/conductor/);
  });
});
