/**
 * The CLI as a user runs it: `up`, `submit`, `status`, `cancel`, and `run` falling back to an embedded runtime and
 * printing step and iteration events, and a real map's progress (`map 2/3 done (branch 3 FAILED)`, a nested map's
 * `map 0.steps.1: 1/3 done`) as the Evaluator reports it and a Director relays it.
 */
import { connect } from "@nats-io/transport-node";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
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
        // A map's branches: held at a gate the test opens, or refused with HTTP 400.
        { match: { lastUser: "MAPFILE" }, gate: { name: "cli-files", count: 4 }, reply: "read {{lastUser}}" },
        { match: { lastUser: "MAPBREAK" }, status: 400, reply: "bad request" },
        // A question to the user, then an answer that echoes the user's reply.
        { match: { lastUser: "ASKCITY", turn: 1 }, toolCalls: [{ name: "request_user_input", arguments: { question: "Which city?" } }] },
        { match: { lastUser: "ASKCITY", hasToolResult: true }, reply: "going to {{lastTool}}" },
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

/** Sends a chat request to the mock model, as a Handler does; the HTTP status of its answer. */
async function openGate(text: string): Promise<number> {
  const body = JSON.stringify({ model: "mock-model", messages: [{ role: "user", content: text }] });
  const response = await fetch(`${mock.url}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
  await response.text();
  return response.status;
}

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

  it("run prints the task id first; list (and ps) shows the tasks, filtered by state and time", async () => {
    const root = randomRoot();
    const file = join(dir, "listed.xml");
    writeFileSync(file, "<task><description>hello</description></task>");
    const run = startCli(["run", file, "--task-id", "cli-listed-1", "--nats", server.url, "--prefix", root], modelEnv());
    expect(await run.exited).toBe(0);
    expect(run.stdout().split("\n")[0]).toBe("task cli-listed-1");
    const generated = startCli(["run", file, "-q", "--nats", server.url, "--prefix", root], modelEnv());
    expect(await generated.exited).toBe(0);
    const generatedId = /^task (\S+)\n/.exec(generated.stdout())?.[1];
    expect(generatedId).toMatch(/^[0-9a-f-]{36}$/);

    const list = startCli(["list", "--nats", server.url, "--prefix", root]);
    expect(await list.exited).toBe(0);
    expect(list.stdout()).toMatch(/^TASK ID\s+STATE\s+LAST EVENT AT\s+LAST EVENT\n/);
    expect(list.stdout()).toMatch(/cli-listed-1\s+completed\s+\S+\s+task\.completed/);
    expect(list.stdout()).toContain(generatedId);

    const json = startCli(["ps", "--json", "--state", "completed", "--since", "1h", "--nats", server.url, "--prefix", root]);
    expect(await json.exited).toBe(0);
    const rows = json
      .stdout()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { taskId: string; state: string });
    expect(rows.map((r) => r.taskId).sort()).toEqual(["cli-listed-1", generatedId].sort());
    expect(rows.every((r) => r.state === "completed")).toBe(true);

    const none = startCli(["list", "--state", "failed", "--nats", server.url, "--prefix", root]);
    expect(await none.exited).toBe(0);
    expect(none.stdout()).toBe("no tasks\n");
    const future = startCli(["list", "--since", new Date(Date.now() + 3_600_000).toISOString(), "--nats", server.url, "--prefix", root]);
    expect(await future.exited).toBe(0);
    expect(future.stdout()).toBe("no tasks\n");
    const bad = startCli(["list", "--state", "done", "--nats", server.url, "--prefix", root]);
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toMatch(/--state 'done': one of queued, running/);
  });

  it("run --json writes every event as a JSON line as it happens, then the result; --stream prints the answer once", async () => {
    const root = randomRoot();
    const file = join(dir, "jsonl.xml");
    writeFileSync(file, "<task><description>hello</description></task>");
    const json = startCli(["run", file, "--json", "--task-id", "cli-jsonl-1", "--nats", server.url, "--prefix", root], modelEnv());
    expect(await json.exited).toBe(0);
    const lines = json
      .stdout()
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { taskId: string; seq?: number; type?: string; status?: string; content?: string });
    const events = lines.slice(0, -1);
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["task.queued", "task.running", "node.started", "task.completed"]));
    expect(events.every((e) => e.taskId === "cli-jsonl-1")).toBe(true);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(lines.at(-1)).toMatchObject({ taskId: "cli-jsonl-1", status: "COMPLETE", content: "embedded answer" });

    const stream = startCli(["run", file, "--stream", "--nats", server.url, "--prefix", root], modelEnv());
    expect(await stream.exited).toBe(0);
    const out = stream.stdout();
    expect(out.split("embedded answer")).toHaveLength(2);
    // The pieces are announced by their first event, and printed as they arrived, before the events after them.
    expect(out).toMatch(/\[\s*\d+\] running\s+model\.delta  streaming the answer:\nembedded answer\n\[\s*\d+\] running\s+model\.turn/);
    expect(out).toMatch(/result: COMPLETE\n[\s\S]*\(the answer is the one streamed above\)\n$/);
  });

  it("run prints each step (step n/N) and each iteration (iteration n/max) as it happens", async () => {
    const steps = join(dir, "steps.xml");
    writeFileSync(
      steps,
      '<task type="sequential"><steps><task><description>first</description></task><task><description>second</description></task></steps></task>',
    );
    const seq = startCli(["run", steps, "--nats", server.url, "--prefix", randomRoot()], modelEnv());
    expect(await seq.exited).toBe(0);
    // The sequential reports its own start first, then each step before the step's own node.started.
    expect(seq.output()).toMatch(
      /node\.started\s+sequential task started: 2 steps\n[^\n]*step\.started\s+step 1\/2\n[^\n]*node\.started\s+atomic task started\n[\s\S]*step\.started\s+step 2\/2\n[^\n]*node\.started\s+atomic task started\n[\s\S]*result: COMPLETE/,
    );
    const loop = join(dir, "loop.xml");
    writeFileSync(
      loop,
      '<task type="director_evaluator_loop"><max_iterations>2</max_iterations><director><description>draft</description></director><evaluator><description>judge</description></evaluator></task>',
    );
    // The mock's evaluator never answers success: the loop is exhausted after both iterations (exit code 1).
    const de = startCli(["run", loop, "--nats", server.url, "--prefix", randomRoot()], modelEnv());
    expect(await de.exited).toBe(1);
    expect(de.output()).toMatch(/node\.started\s+director-evaluator loop started\n[^\n]*iteration\.started\s+iteration 1\/2\n/);
    expect(de.output()).toMatch(/iteration\.started\s+iteration 1\/2[\s\S]*iteration\.started\s+iteration 2\/2[\s\S]*result: FAILED/);
  });

  it("up serves submit, status and cancel; cancel aborts the running task", async () => {
    const root = randomRoot();
    const up = startCli(["up", "--nats", server.url, "--prefix", root], modelEnv());
    try {
      await up.waitFor(/ready/);
      // The start lines say which model server, which tools from where, and whether inspection and metrics are on.
      expect(up.output()).toContain(`dirigent: model gpt-4o-mini at ${mock.url}\n`);
      expect(up.output()).toMatch(/dirigent: tools builtin: read_file, list_files; NATS services' tools off \(DIRIGENT_NATS_TOOLS=on\)\n/);
      expect(up.output()).toContain("dirigent: inspection off (DIRIGENT_INSPECT=on for 'dirigent inspect')\n");
      expect(up.output()).toContain("dirigent: metrics off (--metrics-port)\n");
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

  it("status shows a pending question; input answers it, and names a task that does not exist or waits for nothing", async () => {
    const root = randomRoot();
    const up = startCli(["up", "--nats", server.url, "--prefix", root], modelEnv());
    try {
      await up.waitFor(/ready/);
      const file = join(dir, "ask.xml");
      writeFileSync(file, "<task><description>ASKCITY for the trip</description></task>");
      const nc = await connect({ servers: server.url });
      const taskId = "cli-ask-1";
      const events = nc.subscribe(`${root}.tasks.${taskId}.events`);
      const result = nc.subscribe(`${root}.tasks.${taskId}.result`, { max: 1 });
      const submit = startCli(["submit", file, "--task-id", taskId, "--nats", server.url, "--prefix", root]);
      expect(await submit.exited).toBe(0);
      for await (const m of events) if ((m.json() as { type: string }).type === "continuation.input") break;

      const status = startCli(["status", taskId, "--nats", server.url, "--prefix", root]);
      expect(await status.exited).toBe(0);
      expect(JSON.parse(status.stdout())).toEqual({ taskId, state: "awaiting_input", question: "Which city?" });

      const unknown = startCli(["input", "no-such-task", "Oslo", "--nats", server.url, "--prefix", root]);
      expect(await unknown.exited).toBe(1);
      expect(unknown.output()).toMatch(/no task 'no-such-task'/);

      const answer = startCli(["input", taskId, "Lisbon", "--nats", server.url, "--prefix", root]);
      expect(await answer.exited, answer.output()).toBe(0);
      for await (const m of result) expect(m.json()).toMatchObject({ status: "COMPLETE", content: "going to Lisbon" });
      await nc.drain();

      const late = startCli(["input", taskId, "Porto", "--nats", server.url, "--prefix", root]);
      expect(await late.exited).toBe(1);
      expect(late.output()).toMatch(/task cli-ask-1 is completed, not waiting for input/);
    } finally {
      await up.stop();
    }
  });

  it("run prints a map's progress as map n/N done lines, naming failed branches and nested maps", async () => {
    const root = randomRoot();
    const up = startCli(["up", "--nats", server.url, "--prefix", root], modelEnv());
    try {
      await up.waitFor(/ready/);
      // A map of three steps, two at once, failures collected: the first answers, the second is a map over a list
      // whose branches wait at the mock's gate `cli-files` until the test opens it, the third (started when the
      // first is done) gets an HTTP 400.
      const file = join(dir, "map.xml");
      writeFileSync(
        file,
        `<task type="map" max_parallel="2" on_failure="collect"><steps>
  <task><description>MAPFIRST</description></task>
  <task type="map" over="files">
    <inputs><input name="files">["a.md","b.md","c.md"]</input></inputs>
    <steps><task><description>MAPFILE {{item}}</description></task></steps>
  </task>
  <task><description>MAPBREAK</description></task>
</steps></task>`,
      );
      const run = startCli(["run", file, "--task-id", "cli-map-1", "--nats", server.url, "--prefix", root]);
      await run.waitFor(/map 2\/3 done \(branch 3 FAILED\)/);
      // The fourth request at the gate opens it: the three branches of the nested map answer.
      expect(await openGate("MAPFILE opener")).toBe(200);
      expect(await run.exited).toBe(1);
      const shown = run
        .output()
        .split("\n")
        .filter((l) => /\s(map|branch)\.(started|finished)\s/.test(l))
        .map((l) => l.replace(/^\[\s*\d+\]\s+\S+\s+/, ""));
      // The branches of both maps run at once: each map's lines are in order, the two maps' lines interleave.
      const nested = (l: string) => l.includes("map 0.steps.1");
      expect(shown.filter((l) => !nested(l))).toEqual([
        "map.started  map started: 3 branches, 2 at once, failures collected",
        "branch.started  branch 1/3",
        "branch.started  branch 2/3",
        "branch.finished  map 1/3 done",
        "branch.started  branch 3/3",
        "branch.finished  map 2/3 done (branch 3 FAILED)",
        "branch.finished  map 3/3 done",
      ]);
      expect(shown.filter(nested)).toEqual([
        "map.started  map 0.steps.1 started: 3 branches, 3 at once",
        "branch.started  map 0.steps.1: branch 1/3",
        "branch.started  map 0.steps.1: branch 2/3",
        "branch.started  map 0.steps.1: branch 3/3",
        "branch.finished  map 0.steps.1: 1/3 done",
        "branch.finished  map 0.steps.1: 2/3 done",
        "branch.finished  map 0.steps.1: 3/3 done",
      ]);
      // The nested map starts as its branch of the outer map does, and ends before the outer map does.
      expect(shown.indexOf("branch.started  branch 2/3")).toBeLessThan(shown.indexOf(shown.filter(nested)[0] ?? ""));
      expect(shown.indexOf("branch.finished  map 0.steps.1: 3/3 done")).toBeLessThan(shown.indexOf("branch.finished  map 3/3 done"));
      expect(run.output()).toMatch(/result: FAILED\nerror: TASK_FAILURE[^\n]*1 of 3 branches failed: branch 3/);
    } finally {
      await up.stop();
    }
  });

  it("run names the maps at the step of a map over a list apart, each by its own path", async () => {
    const file = join(dir, "map-in-map.xml");
    writeFileSync(
      file,
      `<task type="map" over="files"><inputs><input name="files">["a.md","b.md"]</input></inputs><steps>
  <task type="map"><steps><task><description>LEFT {{item}}</description></task><task><description>RIGHT {{item}}</description></task></steps></task>
</steps></task>`,
    );
    const run = startCli(["run", file, "--nats", server.url, "--prefix", randomRoot()], modelEnv());
    expect(await run.exited).toBe(0);
    for (const i of [0, 1]) {
      expect(run.output()).toMatch(new RegExp(`map\\.started  map 0/map:${i}:0\\.steps\\.0 started: 2 branches, 2 at once`));
      expect(run.output()).toMatch(new RegExp(`branch\\.finished  map 0/map:${i}:0\\.steps\\.0: 2/2 done`));
    }
    expect(run.output()).toMatch(/branch\.finished  map 2\/2 done[\s\S]*result: COMPLETE/);
  });

  it("refuses a template with a misspelt element before submitting: file:line:col, INVALID_TEMPLATE, exit 2", async () => {
    const file = join(dir, "typo.xml");
    writeFileSync(file, "<task>\n  <descripton>Say hi</descripton>\n</task>\n");
    const run = startCli(["run", file, "--nats", server.url, "--prefix", randomRoot()], modelEnv());
    expect(await run.exited).toBe(2);
    expect(run.output()).toContain(
      `${file}:2:3: INVALID_TEMPLATE: unknown element <descripton> inside <task>; did you mean <description>?`,
    );
    expect(run.stdout()).toBe("");
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
