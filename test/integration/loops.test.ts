/** Script tasks and director–evaluator loops over a real nats-server with the mock model. */
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_SCRIPT_TIMEOUT_S } from "../../actors/evaluator/script.js";
import { createSubjects, type TaskEvent } from "../../protocol/index.js";
import { DEFAULTS } from "../../runtime/config.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let workspace: string;

const NODE = process.execPath;

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-loops-"));
  await writeFile(join(workspace, "keep.txt"), "precious");
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: { regex: "^JUDGE echo:DIRECT 2" } }, reply: '{"success": true, "feedback": "good now"}' },
        { match: { lastUser: { regex: "^JUDGE" } }, reply: '{"success": false, "feedback": "add detail", "score": 1}' },
        { match: { lastUser: { regex: "^SCORE echo:DRAFT 2" } }, reply: '{"success": false, "feedback": "close", "score": 9}' },
        { match: { lastUser: { regex: "^SCORE" } }, reply: '{"success": false, "feedback": "no", "score": 1}' },
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

function stack() {
  return startStack({
    url: server.url,
    mock,
    config: { tools: ["read_file", "list_files"], commands: [NODE, "node"], workspaceRoot: workspace },
  });
}

const script = (command: string, attrs = "") => `<task type="script"${attrs}>
  <inputs><input name="word" from="word"/></inputs>
  <command>${command}</command>
  <timeout>20</timeout>
</task>`;

describe("script tasks", () => {
  it("runs a command as argv and returns stdout with scriptOutput notes", async () => {
    await using s = await stack();
    const xml = script(`${NODE} -e "console.log('hi ' + process.argv[1]); console.error('warn')" {{word}}`);
    const outcome = await s.client.run({ xml, inputs: { word: "sea" }, taskId: newTaskId() });
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "hi sea\n",
      notes: { scriptOutput: { stdout: "hi sea\n", stderr: "warn\n", exitCode: 0 } },
    });
  });

  it("fails on a non-zero exit with the output in the details", async () => {
    await using s = await stack();
    const xml = script(`${NODE} -e "console.log('partial'); process.exit(3)"`);
    const outcome = await s.client.run({ xml, inputs: { word: "x" }, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "execution_halted",
      message: "script exited with code 3",
      details: { stdout: "partial\n", exitCode: 3 },
    });
  });

  it('completes on a non-zero exit with fail_on_nonzero="false"', async () => {
    await using s = await stack();
    const xml = script(`${NODE} -e "console.log('partial'); process.exit(3)"`, ' fail_on_nonzero="false"');
    const outcome = await s.client.run({ xml, inputs: { word: "x" }, taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "partial\n", notes: { scriptOutput: { exitCode: 3 } } });
  });

  it('passes <environment> variables, substituted, over the allowlist or alone with inherit="none"', async () => {
    await using s = await stack();
    const show = `${NODE} -e "console.log([process.env.GREETING, process.env.PATH === undefined ? 'no-path' : 'path'].join(' '))"`;
    const withAllowlist = `<task type="script"><command>${show}</command><environment><var name="GREETING">hi {{word}}</var></environment></task>`;
    const alone = `<task type="script"><command>${show}</command><environment inherit="none"><var name="GREETING">hi {{word}}</var></environment></task>`;
    expect(await s.client.run({ xml: withAllowlist, inputs: { word: "sea" }, taskId: newTaskId() })).toMatchObject({
      status: "COMPLETE",
      content: "hi sea path\n",
    });
    expect(await s.client.run({ xml: alone, inputs: { word: "sea" }, taskId: newTaskId() })).toMatchObject({
      status: "COMPLETE",
      content: "hi sea no-path\n",
    });
  });

  it("refuses <environment> variables that inject code or leak secrets", async () => {
    await using s = await stack();
    const xml = `<task type="script"><command>${NODE} -e "1"</command><environment><var name="NODE_OPTIONS">--require /tmp/x.js</var></environment></task>`;
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome.error).toMatchObject({
      reason: "input_validation_failure",
      message: "<environment>: 'NODE_OPTIONS' may not be set by a template",
    });
  });

  it("fails with execution_timeout when the command outlives its <timeout>", async () => {
    await using s = await stack();
    const xml = `<task type="script"><command>${NODE} -e "console.log('started'); setTimeout(() => {}, 60000)"</command><timeout>0.5</timeout></task>`;
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "execution_timeout", details: { stdout: "started\n" } });
  });

  it("gives a script task without <timeout> 300 s, which the default Handler limit does not cut", async () => {
    await using s = await startStack({
      url: server.url,
      mock,
      config: { commands: [NODE], workspaceRoot: workspace, scriptTimeoutMs: DEFAULTS.scriptTimeoutMs, localDispatch: false },
    });
    const requested: number[] = [];
    const sub = s.transport.bus.subscribe(createSubjects(s.root).script, (msg) => {
      requested.push((JSON.parse(new TextDecoder().decode(msg.data)) as { timeoutMs: number }).timeoutMs);
    });
    try {
      const outcome = await s.client.run({
        xml: `<task type="script"><command>${NODE} -e "console.log(1)"</command></task>`,
        taskId: newTaskId(),
      });
      expect(outcome.status).toBe("COMPLETE");
    } finally {
      await sub.unsubscribe();
    }
    expect(DEFAULT_SCRIPT_TIMEOUT_S).toBe(300);
    expect(requested).toEqual([300_000]);
    // The Handler runs a command for min(requested, scriptTimeoutMs): the default limit keeps all 300 s.
    expect(Math.min(requested[0] ?? 0, s.config.scriptTimeoutMs)).toBe(300_000);
  });

  it("keeps an input that tries shell injection a single literal argument", async () => {
    await using s = await stack();
    const xml = script(`${NODE} -e "console.log(JSON.stringify(process.argv.slice(1)))" {{word}}`);
    const word = "x; rm -rf keep.txt $(rm keep.txt) | true";
    const outcome = await s.client.run({ xml, inputs: { word }, taskId: newTaskId() });
    expect(outcome.status).toBe("COMPLETE");
    expect(JSON.parse(outcome.content)).toEqual([word]);
    expect(await readdir(workspace)).toContain("keep.txt");
  });
});

const LOOP = (max: number, director: string, evaluator: string) => `<task type="director_evaluator_loop">
  <max_iterations>${max}</max_iterations>
  <director><description>${director}</description></director>
  <evaluator><description>${evaluator}</description></evaluator>
</task>`;

describe("director–evaluator loops", () => {
  it("passes on iteration 2 after the evaluator's feedback reaches the director", async () => {
    await using s = await stack();
    const events = new Recorder<TaskEvent>();
    const before = mock.requests.length;
    const xml = LOOP(4, "DIRECT {{current_iteration}} {{evaluation_feedback}}", "JUDGE {{director_result}}");
    const outcome = await s.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "echo:DIRECT 2 add detail",
      notes: { iterations_completed: 2, termination_reason: "evaluation_success" },
    });
    const prompts = mock.requests
      .slice(before)
      .map((r) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"] ?? ""));
    expect(prompts).toEqual(["DIRECT 1 ", "JUDGE echo:DIRECT 1 ", "DIRECT 2 add detail", "JUDGE echo:DIRECT 2 add detail"]);
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(events.values.filter((e) => e.type === "iteration.started").map((e) => e.message)).toEqual(["iteration 1/4", "iteration 2/4"]);
  });

  it("ends exhausted, FAILED with the best-scored attempt, after max iterations", async () => {
    await using s = await stack();
    const xml = LOOP(3, "DRAFT {{current_iteration}}", "SCORE {{director_result}}");
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "execution_halted",
      message: expect.stringContaining("max iterations (3)"),
    });
    expect(outcome.content).toBe("echo:DRAFT 2");
    expect(outcome.notes).toMatchObject({
      termination_reason: "max_iterations_reached",
      iterations_completed: 3,
      best_iteration: 2,
      final_evaluation: { feedback: "no", score: 1 },
    });
  });

  it("stops early when the termination condition holds, before max iterations", async () => {
    await using s = await stack();
    const events = new Recorder<TaskEvent>();
    const xml = `<task type="director_evaluator_loop">
  <max_iterations>5</max_iterations>
  <director><description>DRAFT {{current_iteration}}</description></director>
  <evaluator><description>SCORE {{director_result}}</description></evaluator>
  <termination_condition><condition>evaluation.notes.score &gt;= 9 || iteration &gt;= 4</condition></termination_condition>
</task>`;
    const outcome = await s.client.run({ xml, taskId: newTaskId() }, (e) => events.push(e));
    // SCORE answers score 9 for the second draft (never success): the condition, not max_iterations, ends the loop.
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "echo:DRAFT 2",
      notes: { termination_reason: "termination_condition", iterations_completed: 2 },
    });
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the completed event");
    expect(events.values.filter((e) => e.type === "iteration.started").map((e) => e.message)).toEqual(["iteration 1/5", "iteration 2/5"]);
  });

  it("runs the script step on the director's result, a non-zero exit reaching the evaluator as data", async () => {
    await using s = await stack();
    const xml = `<task type="director_evaluator_loop">
  <max_iterations>1</max_iterations>
  <director><description>CODE</description></director>
  <script_execution>
    <command>${NODE} -e "console.log(process.argv[1]); process.exit(2)" {{script_input}}</command>
    <timeout>20</timeout>
    <inputs><input name="script_input" from="director_result"/></inputs>
  </script_execution>
  <evaluator><description>CHECK {{script_output}} exit {{script_exit_code}}</description></evaluator>
</task>`;
    const before = mock.requests.length;
    const outcome = await s.client.run({ xml, taskId: newTaskId() });
    expect(outcome.notes).toMatchObject({ termination_reason: "max_iterations_reached" });
    const prompts = mock.requests
      .slice(before)
      .map((r) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"] ?? ""));
    expect(prompts).toEqual(["CODE", "CHECK echo:CODE\n exit 2"]);
  });
});

describe('director–evaluator loops with <call task="system:run_script">', () => {
  it("runs the command given as the call's argument, the director's result one argument", async () => {
    await using s = await stack();
    const xml = `<task type="director_evaluator_loop">
  <max_iterations>1</max_iterations>
  <director><description>CODE; rm -rf keep.txt</description></director>
  <script_execution>
    <call task="system:run_script"><arg>${NODE} -e "console.log(JSON.stringify(process.argv.slice(1)))" {{director_result}}</arg></call>
    <timeout>20</timeout>
  </script_execution>
  <evaluator><description>CHECK {{script_stdout}}</description></evaluator>
</task>`;
    const before = mock.requests.length;
    await s.client.run({ xml, taskId: newTaskId() });
    const prompts = mock.requests
      .slice(before)
      .map((r) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"] ?? ""));
    expect(prompts).toEqual(["CODE; rm -rf keep.txt", 'CHECK ["echo:CODE; rm -rf keep.txt"]\n']);
    expect(await readdir(workspace)).toContain("keep.txt");
  });
});

describe("examples", () => {
  const example = (file: string) => readFile(join(import.meta.dirname, "../../examples", file), "utf8");

  it("runs examples/script.xml: the injection attempt stays one argument", async () => {
    await using s = await stack();
    const outcome = await s.client.run({ xml: await example("script.xml"), inputs: { word: "hello; rm -rf /" }, taskId: newTaskId() });
    expect(outcome.status, JSON.stringify(outcome.error)).toBe("COMPLETE");
    expect(JSON.parse(outcome.content)).toEqual(["hello; rm -rf /"]);
  });

  it("runs examples/de-loop.xml: the echoing mock never passes, so it ends exhausted after 3 iterations", async () => {
    await using s = await stack();
    const events = new Recorder<TaskEvent>();
    const outcome = await s.client.run({ xml: await example("de-loop.xml"), inputs: { topic: "rain" }, taskId: newTaskId() }, (e) =>
      events.push(e),
    );
    expect(outcome.notes).toMatchObject({ termination_reason: "max_iterations_reached", iterations_completed: 3 });
    await events.until((v) => v.some((e) => e.type === "task.failed"), "the failed event");
    expect(events.values.filter((e) => e.type === "iteration.started").map((e) => e.message)).toEqual([
      "iteration 1/3",
      "iteration 2/3",
      "iteration 3/3",
    ]);
  });
});
