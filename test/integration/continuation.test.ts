/**
 * CONTINUATION over a real nats-server with the mock model: a session's `run_subtask` call spawns a child task
 * whose result comes back as the tool response; depth limit and cycle detection; a child failure reaches the
 * parent as subtask_failure; a director's `request_evaluation` runs a script and an evaluator, then the director
 * continues (dynamic director–evaluator, hoidn's seed 000).
 */
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { loadMockScript, startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let workspace: string;
let templates: string;

const NODE = process.execPath;
const subtask = (description: string, extra: Record<string, unknown> = {}) => ({
  name: "run_subtask",
  arguments: { type: "atomic", description, ...extra },
});

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-continuation-"));
  await writeFile(join(workspace, "check.js"), "console.log('2 of 3 tests pass'); process.exit(1);\n");
  templates = join(workspace, "templates");
  await mkdir(templates);
  await writeFile(
    join(templates, "cities.xml"),
    `<task name="list_cities" type="atomic" subtype="subtask"><description>CITIES list european capital cities for {{description}}</description></task>`,
  );
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        // Parent → child → parent resumes with the child's answer as the tool response.
        {
          match: { lastUser: { regex: "^PARENT" }, turn: 1 },
          toolCalls: [subtask("CHILD name three cities", { inputs: { country: "anywhere" } })],
        },
        { match: { lastUser: { regex: "^CHILD" } }, reply: "Paris, Rome, Oslo" },
        { match: { lastUser: { regex: "^PARENT" }, hasToolResult: { regex: "Paris, Rome, Oslo" } }, reply: "Plan: Paris, Rome, Oslo" },
        // A library template chosen by hint.
        { match: { lastUser: { regex: "^HINTED" }, turn: 1 }, toolCalls: [subtask("trip to europe", { template_hints: ["list_cities"] })] },
        { match: { lastUser: { regex: "^CITIES" } }, reply: "Lisbon, Vienna" },
        { match: { lastUser: { regex: "^HINTED" }, hasToolResult: true }, reply: "hinted done" },
        // Depth: each level asks for the next.
        { match: { lastUser: { regex: "^LEVEL0" }, turn: 1 }, toolCalls: [subtask("LEVEL1")] },
        { match: { lastUser: { regex: "^LEVEL1" }, turn: 1 }, toolCalls: [subtask("LEVEL2")] },
        { match: { lastUser: { regex: "^LEVEL2" }, turn: 1 }, toolCalls: [subtask("LEVEL3")] },
        { match: { lastUser: { regex: "^LEVEL3" } }, reply: "bottom" },
        { match: { lastUser: { regex: "^LEVEL" }, hasToolResult: true }, reply: "level done" },
        // Cycle: the child asks for exactly what its parent asked for.
        { match: { lastUser: { regex: "^CYCLE" } }, toolCalls: [subtask("CYCLE again")] },
        // A failing child.
        { match: { lastUser: { regex: "^FRAGILE" }, turn: 1 }, toolCalls: [subtask("BREAK now")] },
        { match: { lastUser: { regex: "^BREAK" } }, status: 400, error: "bad request for the child" },
        // Dynamic director–evaluator: the director asks for an evaluation with a script, then finishes.
        {
          match: { lastUser: { regex: "^DIRECTOR" }, turn: 1 },
          toolCalls: [
            { name: "request_evaluation", arguments: { type: "script", criteria: ["all tests pass"], target: `${NODE} check.js` } },
          ],
        },
        { match: { lastUser: { regex: "^Evaluate the output below" } }, reply: '{"success": false, "feedback": "one test fails"}' },
        { match: { lastUser: { regex: "^DIRECTOR" }, hasToolResult: { regex: "one test fails" } }, reply: "fixed the failing test" },
        // A director with <criteria> whose evaluation the starter library's run-tests-evaluation template answers.
        {
          match: { lastUser: { regex: "^LIBDIRECTOR" }, turn: 1 },
          toolCalls: [{ name: "request_evaluation", arguments: { type: "llm", criteria: ["tests pass", "no failing tests"] } }],
        },
        {
          match: { lastUser: { regex: "^Evaluate the test run results against the criteria" } },
          reply: '{"success": true, "feedback": "all green"}',
        },
        { match: { lastUser: { regex: "^LIBDIRECTOR" }, hasToolResult: { regex: "all green" } }, reply: "shipped" },
        // request_user_input: the task waits for the answer on its input subject.
        {
          match: { lastUser: { regex: "^ASK" }, turn: 1 },
          toolCalls: [{ name: "request_user_input", arguments: { question: "Which city?" } }],
        },
        { match: { lastUser: { regex: "^ASK" }, hasToolResult: true }, reply: "Going to {{lastUser}}" },
        {
          match: { lastUser: { regex: "^IMPATIENT" } },
          toolCalls: [{ name: "request_user_input", arguments: { question: "Anyone?", timeout_s: 0.3 } }],
        },
        // A malformed request is answered as an error, and the session goes on.
        { match: { lastUser: { regex: "^SLOPPY" }, turn: 1 }, toolCalls: [{ name: "run_subtask", arguments: { description: "" } }] },
        { match: { lastUser: { regex: "^SLOPPY" }, hasToolResult: { regex: "invalid arguments" } }, reply: "did it myself" },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

function stack(config: Record<string, unknown> = {}) {
  return startStack({
    url: server.url,
    mock,
    config: { tools: ["read_file", "list_files", "run_script"], commands: [NODE], workspaceRoot: workspace, templates, ...config },
  });
}

const atomic = (description: string, subtype = "") =>
  `<task type="atomic"${subtype ? ` subtype="${subtype}"` : ""}><description>${description}</description></task>`;

describe("subtasks", () => {
  it("runs a child for run_subtask and resumes the parent's session with its result", async () => {
    await using s = await stack();
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: atomic("PARENT plan a trip"), taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "Plan: Paris, Rome, Oslo", notes: { subtasks: 1 } });
    // The parent's task passed through the visible awaiting_subtask state and back.
    const states = events.map((e) => e.state);
    expect(states).toContain("awaiting_subtask");
    const resumed = events.findIndex((e) => e.type === "continuation.resumed");
    expect(resumed).toBeGreaterThan(states.indexOf("awaiting_subtask"));
    expect(events[resumed]?.state).toBe("running");
    expect(events.find((e) => e.type === "subtask.template")?.data).toMatchObject({
      template: "generated:atomic:subtask",
      source: "generated",
    });
    // The child's nodes are reported under the node that asked for it.
    expect(events.filter((e) => e.type === "node.started").map((e) => e.data?.["nodePath"])).toEqual(["0", "0/subtask1:0"]);
    // The resumed call carried the whole conversation: the tool response answers the pending call.
    const last = mock.requests.findLast((r) => JSON.stringify(r.body).includes("PARENT plan a trip"));
    const messages = (last?.body as { messages: { role: string; content: string | null }[] }).messages;
    expect(messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(messages[3]?.content).toBe("Paris, Rome, Oslo");
    // The resumed session is offered the continuation tools again: it may ask for another subtask.
    const offered = ((last?.body as { tools?: { function: { name: string } }[] }).tools ?? []).map((t) => t.function.name);
    expect(offered).toContain("run_subtask");
  });

  it("chooses a library template named in template_hints", async () => {
    await using s = await stack();
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: atomic("HINTED plan"), taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "hinted done" });
    expect(events.find((e) => e.type === "subtask.template")?.data).toMatchObject({ template: "list_cities", source: "library" });
    expect(mock.requests.some((r) => JSON.stringify(r.body).includes("CITIES list european capital cities for trip to europe"))).toBe(true);
  });

  it("fails with subtask_failure at the depth limit", async () => {
    await using s = await stack({ maxSubtaskDepth: 2 });
    const outcome = await s.client.run({ xml: atomic("LEVEL0 start"), taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "subtask_failure" });
    // The innermost refusal names the limit; each parent wraps its child's failure with its own request.
    const details = JSON.stringify(outcome.error);
    expect(details).toContain("subtask depth limit of 2 reached");
    expect(details).toContain('"kind":"depth_limit"');
    expect(details).toContain('"description":"LEVEL1"');
  });

  it("runs to the bottom when the depth limit allows it", async () => {
    await using s = await stack({ maxSubtaskDepth: 3 });
    const outcome = await s.client.run({ xml: atomic("LEVEL0 start"), taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "level done" });
  });

  it("detects a cycle by task signature", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: atomic("CYCLE begin"), taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(JSON.stringify(outcome.error)).toContain("subtask cycle");
    expect(JSON.stringify(outcome.error)).toContain('"kind":"cycle"');
  });

  it("fails the parent with subtask_failure carrying the request when the child fails", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: atomic("FRAGILE work"), taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "subtask_failure",
      details: { request: { type: "atomic", description: "BREAK now" }, subtaskError: { type: "TASK_FAILURE", reason: "model_error" } },
    });
  });

  it("answers a malformed run_subtask call with an error the model can act on", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: atomic("SLOPPY work"), taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "did it myself" });
  });
});

describe("request_user_input", () => {
  it("waits in awaiting_input for the answer on the task's input subject, then resumes with it", async () => {
    await using s = await stack();
    const taskId = newTaskId();
    const events: TaskEvent[] = [];
    const replies: unknown[] = [];
    const outcome = await s.client.run({ xml: atomic("ASK where to go"), taskId }, (e) => {
      events.push(e);
      if (e.type !== "continuation.input") return;
      // A malformed answer is refused with a coded error and the task keeps waiting; then the real one.
      void s.client
        .input(taskId, 42 as unknown as string)
        .catch((err: unknown) => replies.push(err))
        .then(() => s.client.input(taskId, "Oslo"))
        .then((r) => replies.push(r));
    });
    expect(outcome.status).toBe("COMPLETE");
    const question = events.find((e) => e.type === "continuation.input");
    expect(question).toMatchObject({ state: "awaiting_input", message: "Which city?" });
    expect(replies[0]).toMatchObject({ code: "INVALID_MESSAGE" });
    expect(replies[1]).toEqual({ taskId, status: "accepted" });
    const resumed = mock.requests.findLast((r) => JSON.stringify(r.body).includes("ASK where to go"));
    expect((resumed?.body as { messages: { role: string; content: string | null }[] }).messages.at(-1)).toMatchObject({
      role: "tool",
      content: "Oslo",
    });
  });

  it("fails with execution_timeout when no answer comes in time", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: atomic("IMPATIENT ask"), taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "execution_timeout" });
    expect(outcome.error?.message).toMatch(/no answer on .*\.input within 0 s/);
  });

  it("answers NO_RESPONDERS to input for a task that waits for none", async () => {
    await using s = await stack();
    const err = await s.client.input(newTaskId(), "hello").catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "NO_RESPONDERS" });
  });
});

describe("dynamic director–evaluator (evaluation_request)", () => {
  it("runs the target script and an evaluator, then the director continues with the evaluation", async () => {
    await using s = await stack();
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: atomic("DIRECTOR write the code", "director"), taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "fixed the failing test", notes: { evaluations: 1 } });
    expect(events.map((e) => e.state)).toContain("awaiting_evaluation");
    // The evaluator saw the script's output; the director got the evaluation back as the tool response.
    const evaluation = mock.requests.find((r) => JSON.stringify(r.body).includes("Evaluate the output below"));
    expect(JSON.stringify(evaluation?.body)).toContain("2 of 3 tests pass");
    expect(JSON.stringify(evaluation?.body)).toContain("exited with code 1");
    const resumed = mock.requests.findLast((r) => JSON.stringify(r.body).includes("DIRECTOR write the code"));
    const tool = (resumed?.body as { messages: { role: string; content: string | null }[] }).messages.at(-1);
    expect(tool?.role).toBe("tool");
    expect(JSON.parse(tool?.content ?? "{}")).toMatchObject({
      success: false,
      last_evaluator_output: '{"success": false, "feedback": "one test fails"}',
      script: { exitCode: 1 },
    });
  });

  it("binds last_evaluator_output, <output_slot> and <input_source> for the later steps of a sequence (C21)", async () => {
    await using s = await stack();
    const xml = `<task type="sequential"><steps>
      <task subtype="director"><description>DIRECTOR write the code</description><output_slot>last_director_output</output_slot></task>
      <task><description>REVIEW evaluation={{last_evaluator_output}} draft={{last_director_output}}</description></task>
      <task subtype="evaluator"><input_source>last_director_output</input_source><description>JUDGE {{input}}</description></task>
    </steps></task>`;
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("COMPLETE");
    const review = mock.requests.find((r) => JSON.stringify(r.body).includes("REVIEW evaluation="));
    expect(JSON.stringify(review?.body)).toContain(
      JSON.stringify('REVIEW evaluation={"success": false, "feedback": "one test fails"} draft=fixed the failing test').slice(1, -1),
    );
    expect(outcome.content).toContain("JUDGE fixed the failing test");
  });

  it("evaluates with the library template that matches the criteria (the starter templates/, C14)", async () => {
    await using s = await stack({ templates: join(import.meta.dirname, "../../templates") });
    const xml = `<task subtype="director"><description>LIBDIRECTOR make the {{suite}} pass</description><criteria>the {{suite}} suite</criteria></task>`;
    const outcome = await s.client.run({ xml, inputs: { suite: "unit test" }, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "shipped", notes: { evaluations: 1 } });
    const resumed = mock.requests.findLast((r) => JSON.stringify(r.body).includes("LIBDIRECTOR make the unit test pass"));
    const tool = (resumed?.body as { messages: { role: string; content: string | null }[] }).messages.at(-1);
    expect(JSON.parse(tool?.content ?? "{}")).toMatchObject({ success: true, template_used: "run-tests-evaluation" });
    const evaluation = mock.requests.find((r) => JSON.stringify(r.body).includes("Evaluate the test run results against the criteria"));
    expect(JSON.stringify(evaluation?.body)).toContain("- tests pass\\n- no failing tests");
  });

  it("fails a director whose <criteria> names a missing variable, before any model call (C13, C14)", async () => {
    await using s = await stack();
    const before = mock.requests.length;
    const outcome = await s.client.run({
      // `place` is submitted, so the submission is accepted; its `name` is not there when the task runs.
      xml: `<task subtype="director"><description>LIBDIRECTOR x</description><criteria>{{place.name}}</criteria></task>`,
      inputs: { place: {} },
      taskId: newTaskId(),
    });
    expect(outcome.error).toMatchObject({ reason: "input_validation_failure", details: { missing: ["place.name"] } });
    expect(mock.requests.length).toBe(before);
  });

  it("offers request_evaluation only to director tasks", async () => {
    await using s = await stack();
    await s.client.run({ xml: atomic("PLAIN hello"), taskId: newTaskId() });
    const plain = mock.requests.findLast((r) => JSON.stringify(r.body).includes("PLAIN hello"));
    const tools = ((plain?.body as { tools?: { function: { name: string } }[] }).tools ?? []).map((t) => t.function.name);
    expect(tools).toContain("run_subtask");
    expect(tools).not.toContain("request_evaluation");
  });
});

describe("examples", () => {
  it("runs examples/ask-user.xml, answering its question, and examples/ref.xml through the starter library", async () => {
    const example = await startMockLlm({
      port: 0,
      script: await loadMockScript(join(import.meta.dirname, "../../examples/mock-script.json")),
    });
    try {
      await using s = await startStack({ url: server.url, mock: example });
      const taskId = newTaskId();
      const ask = await readFile(join(import.meta.dirname, "../../examples/ask-user.xml"), "utf8");
      const outcome = await s.client.run({ xml: ask, taskId }, (e) => {
        if (e.type === "continuation.input") void s.client.input(taskId, "6");
      });
      expect(outcome).toMatchObject({
        status: "COMPLETE",
        content: "A dinner plan for the number of guests you gave: soup, risotto, lemon tart.",
      });
      const ref = await readFile(join(import.meta.dirname, "../../examples/ref.xml"), "utf8");
      const summary = await s.client.run({ xml: ref, inputs: { notes: "NATS carries the messages." }, taskId: newTaskId() });
      expect(summary).toMatchObject({ status: "COMPLETE", notes: { template_used: "summarize" } });
      expect(summary.content).toContain("Summarize the key points of this text: NATS carries the messages.");
    } finally {
      await example.close();
    }
  });

  it.each([
    ["subtask.xml", "Day 1: Belém Tower. Day 2: Alfama. Day 3: LX Factory.", "awaiting_subtask"],
    ["dynamic-de.xml", "dirigent: actors, orchestrated.", "awaiting_evaluation"],
  ])("runs examples/%s against the example mock script", async (file, content, state) => {
    const example = await startMockLlm({
      port: 0,
      script: await loadMockScript(join(import.meta.dirname, "../../examples/mock-script.json")),
    });
    try {
      await using s = await startStack({ url: server.url, mock: example });
      const events: TaskEvent[] = [];
      const xml = await readFile(join(import.meta.dirname, "../../examples", file), "utf8");
      const outcome = await s.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
      expect(outcome).toMatchObject({ status: "COMPLETE", content });
      expect(events.map((e) => e.state)).toContain(state);
    } finally {
      await example.close();
    }
  });
});
