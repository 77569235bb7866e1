/**
 * Corpus examples executing end to end: every example test/support/corpus.ts lists as runnable is read from the
 * seeds-xml corpus at test time and run through the real pipeline (one nats-server, one stack, `dirigent mock-llm`),
 * with the inputs it needs; each run asserts the example's documented outcome. docs/corpus.md is the table.
 */
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent, TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type RecordedRequest } from "../../runtime/mock-llm.js";
import { corpusText, NOT_RUN, REFUSED, RUNS, type CorpusRun } from "../support/corpus.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let stack: Stack;
let workspace: string;
let scriptPath: string;

const READABILITY = '{"issues": ["long lines"], "score": 7}';
const FILES = '["README.md", "src/main.py"]';
const STATS = '{"files": 12, "commits": 340}';
const SCRIPT_OUT = "checked by the corpus script\n";

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-corpus-"));
  scriptPath = join(workspace, "check.sh");
  // The only command any example runs: prints one line, touches nothing.
  await writeFile(scriptPath, `#!/bin/sh\nprintf '${SCRIPT_OUT.trimEnd()}\\n'\n`);
  await chmod(scriptPath, 0o755);
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "Analyze the given code for readability issues." }, reply: READABILITY },
        { match: { lastUser: "List files in directory" }, reply: FILES },
        { match: { lastUser: "Get repository statistics" }, reply: STATS },
        { match: { lastUser: "Combine current result with accumulator" }, reply: "ACC" },
        { match: { lastUser: "Evaluate solution against LOOP-A" }, reply: '{"success": false, "feedback": "handle empty lists", "score": 3}', times: 1 },
        { match: { lastUser: "Evaluate solution against LOOP-" }, reply: '{"success": true, "feedback": "good", "score": 9}' },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
  stack = await startStack({ url: server.url, mock, config: { tools: ["read_file", "list_files", "run_script"], workspaceRoot: workspace } });
});

afterAll(async () => {
  await stack?.stop();
  await mock?.close();
  await server?.stop();
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

/** What one run gave. */
interface Ran {
  outcome: TaskOutcome;
  events: TaskEvent[];
  requests: RecordedRequest[];
  /** The last user message of each model request, in order. */
  users: string[];
}

const lastUser = (r: RecordedRequest) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"] ?? "");
const systemOf = (r: RecordedRequest) => String(r.body.messages.find((m) => m["role"] === "system")?.["content"] ?? "");
const messages = (ran: Ran, type: string) => ran.events.filter((e) => e.type === type).map((e) => e.message);

async function runExample(run: CorpusRun, inputs: Record<string, unknown> = { ...run.inputs }): Promise<Ran> {
  const xml = [...(run.with ?? []), run.id].map((id) => corpusText(id)).join("\n");
  const bound = Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k, v === "$SCRIPT" ? scriptPath : v]));
  const events: TaskEvent[] = [];
  const before = mock.requests.length;
  const outcome = await stack.client.run({ xml, inputs: bound, taskId: newTaskId() }, (e) => events.push(e));
  const requests = mock.requests.slice(before);
  return { outcome, events, requests, users: requests.map(lastUser) };
}

/** Each prompt reached the model, in this order (the user message contains it). */
function expectPrompts(ran: Ran, prompts: readonly string[]) {
  expect(ran.users, JSON.stringify(ran.users)).toHaveLength(prompts.length);
  prompts.forEach((p, i) => expect(ran.users[i]).toContain(p));
}

function expectComplete(ran: Ran) {
  expect(ran.outcome.error, JSON.stringify(ran.outcome.error)).toBeUndefined();
  expect(ran.outcome.status).toBe("COMPLETE");
}

/** A sequential that completed with these prompts and `step n/N` events. */
function expectSequential(ran: Ran, prompts: readonly string[], steps: number) {
  expectComplete(ran);
  expectPrompts(ran, prompts);
  expect(ran.outcome.notes["steps"]).toBe(steps);
  expect(messages(ran, "step.started")).toEqual(Array.from({ length: steps }, (_, i) => `step ${i + 1}/${steps}`));
}

const readability = (ran: Ran) => {
  expectComplete(ran);
  expectPrompts(ran, ["Analyze the given code for readability issues."]);
  const [request] = ran.requests;
  expect(request?.body.model).toBe("claude-3-sonnet");
  expect(systemOf(request!)).toContain("You are a code quality expert focused on readability.");
  expect(ran.outcome.content).toBe(READABILITY);
};

const plain = (prompt: string) => (ran: Ran) => {
  expectComplete(ran);
  expectPrompts(ran, [prompt]);
  expect(ran.outcome.content).toBe(`echo:${ran.users[0]}`);
};

const NESTED_TWO_STEPS = ["Load data file", "Process raw data", "Transform data format", "Load config settings", "Combine processed results"];
const LOAD_FILTER = ["Load dataset", "Filter invalid rows"];

/** The documented outcome of each runnable example. */
const CHECKS: Record<string, (ran: Ran) => void | Promise<void>> = {
  dfbeff3b6abb: readability,
  "84a43f2433a5": readability,
  "47d1cdc5340b": (ran) => {
    readability(ran);
    expect(JSON.stringify(ran.outcome)).toContain('"long lines"');
  },
  e6adcaf3dfdd: plain("Generate tests for Python functions"),
  d620f30e87a1: plain("Implement a sorting algorithm based on requirements"),
  f147551b2d12: plain("Process data using specific format"),
  e5909e64f566: (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["List files in directory"]);
    expect(ran.outcome.content).toBe(FILES);
  },
  "51107ab52440": (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["List files in directory"]);
    expect(ran.outcome.content).toBe(FILES);
  },
  c2ff270f9ffe: (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["Get repository statistics"]);
    expect(ran.outcome.content).toBe(STATS);
  },
  ed08d1b67050: plain("Simple transformation"),
  b55abb22bca1: plain("Subtask description"),
  fd1b3d7ed19b: plain("Start with completely fresh context"),
  "25ab2e572ead": plain("Start with completely fresh context"),
  "64e63be98e84": plain("Process data with fresh context only"),
  "4138332fd1bc": (ran) => expectSequential(ran, NESTED_TWO_STEPS, 2),
  "4ad3cd6e5632": (ran) => expectSequential(ran, NESTED_TWO_STEPS, 2),
  "5dcf8d3076bc": (ran) => expectSequential(ran, ["Input task", "Step description"], 1),
  d01c431b1738: (ran) => expectSequential(ran, ["Load fresh environment", "Perform main analysis in a cleaned environment"], 2),
  f37c261cb97c: (ran) => expectSequential(ran, ["Read input CSV file", ...LOAD_FILTER], 2),
  "8c7742bdee80": (ran) => expectSequential(ran, ["Read input CSV file", ...LOAD_FILTER], 2),
  d49342009b07: (ran) => expectSequential(ran, ["Load initial data", "First step task", "Load configuration", "Second step task"], 2),
  "816b8013fdff": (ran) => expectSequential(ran, ["Load initial data", "First step task", "Load configuration", "Second step task"], 2),
  "452d0bdb82d6": (ran) => expectSequential(ran, ["Process item 1", "Process item 2"], 2),
  "8cc320cbc775": (ran) => expectSequential(ran, ["Load initial data", "Apply configuration from coastal-profile"], 2),
  "3e2866618b4a": (ran) => expectSequential(ran, ["Load and validate raw data", "Identify key patterns", "Generate insights report"], 3),
  "48224212868d": (ran) => expectSequential(ran, ["First step", "Second step with fresh context but notes from first step"], 2),
  "0af127b9fd2d": (ran) => expectSequential(ran, ["First step", "Second step with fresh context but notes from first step"], 2),
  cc8acdccb6f3: (ran) => expectSequential(ran, ["First step", "Second step with all context preserved"], 2),
  d910281fec6b: (ran) => expectSequential(ran, LOAD_FILTER, 2),
  "87f57386490e": (ran) => expectSequential(ran, LOAD_FILTER, 2),
  ab5749aceef7: (ran) => expectSequential(ran, LOAD_FILTER, 2),
  "49548d5ca76a": (ran) => expectSequential(ran, LOAD_FILTER, 2),
  "4b65420b008d": (ran) =>
    expectSequential(ran, ["Generate Initial Solution", "Execute evaluation script via bash", "Bash Script Callback", "Refine Solution"], 3),
  cef58ebebd47: (ran) => {
    expectComplete(ran);
    const perItem = ["Load metadata for processing", "Processing for each input", "Combine current result with accumulator"];
    expectPrompts(ran, [...perItem, ...perItem, ...perItem]);
    expect(ran.outcome).toMatchObject({ content: "ACC", notes: { inputs: 3 } });
    expect(messages(ran, "step.started")).toEqual(["input 1/3", "input 2/3", "input 3/3"]);
  },
  "53130303210e": async (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["Handle success"]);
    expect(ran.outcome.notes["matchedCase"]).toBe(0);
    expect(messages(ran, "cond.matched")).toEqual(["case 1/2: output.valid == true"]);
    const run = RUNS.find((r) => r.id === "53130303210e")!;
    const second = await runExample(run, { output: { valid: false, errors: 3 } });
    expectComplete(second);
    expectPrompts(second, ["Handle error"]);
    expect(second.outcome.notes["matchedCase"]).toBe(1);
  },
  "94d24a77d0cc": (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["Handle errors"]);
    expect(ran.outcome.notes["matchedCase"]).toBe(1);
    expect(messages(ran, "cond.matched")).toEqual(["case 2/2: output.errors > 0"]);
  },
  "6ef53bedc098": (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["Analyze rain 12 mm using daily means"]);
    expect(messages(ran, "call.started")).toEqual(["call analyze_data"]);
  },
  b13e0e468128: (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["Analyze weather_data using standard_config"]);
  },
  "50e5244492ee": (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["Validate ada@example.com against validation_schema"]);
    expect(messages(ran, "call.started")).toEqual(["call validate_input"]);
  },
  "261e10e19a86": (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["Validate ada@example.com against email"]);
  },
  "00f0c4d55772": (ran) => {
    expect(ran.outcome.status).toBe("FAILED");
    expect(ran.outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "input_validation_failure", details: { missing: ["user_name"] } });
    expect(ran.outcome.error?.message).toContain("'user_name'");
    expect(ran.requests).toHaveLength(0);
  },
  d8dbc8ca2332: (ran) => {
    expectComplete(ran);
    expect(ran.outcome).toMatchObject({ content: SCRIPT_OUT, notes: { scriptOutput: { stdout: SCRIPT_OUT, exitCode: 0 } } });
    expect(ran.requests).toHaveLength(0);
  },
  "3df504a17226": (ran) => {
    expectComplete(ran);
    const director = "Generate solution for LOOP-A sort a list";
    const evaluator = "Evaluate solution against LOOP-A sort a list";
    expectPrompts(ran, [director, evaluator, director, evaluator]);
    expect(messages(ran, "iteration.started")).toEqual(["iteration 1/5", "iteration 2/5"]);
    expect(ran.outcome.content).toBe(`echo:${director}`);
    expect(ran.outcome.notes).toMatchObject({ iterations_completed: 2, final_evaluation: { success: true } });
    const history = ran.outcome.notes["iteration_history"] as Array<{ script?: { content: string } }>;
    expect(history.map((h) => h.script?.content)).toEqual([SCRIPT_OUT, SCRIPT_OUT]);
  },
  "62e9b8040c3e": (ran) => {
    expectComplete(ran);
    expectPrompts(ran, ["Generate solution for LOOP-B parse a date", "Evaluate solution against LOOP-B parse a date"]);
    expect(messages(ran, "iteration.started")).toEqual(["iteration 1/5"]);
    expect(ran.outcome.notes).toMatchObject({ iterations_completed: 1 });
  },
};

describe("corpus examples executing end to end", () => {
  it("has a documented outcome for exactly the runnable examples", () => {
    expect(Object.keys(CHECKS).sort()).toEqual(RUNS.map((r) => r.id).sort());
  });

  it.each(RUNS.map((r) => [r.id, r] as const))("runs %s", async (_id, run) => {
    const ran = await runExample(run);
    const check = CHECKS[run.id];
    if (!check) expect.fail(`no check for ${run.id}`);
    await check(ran);
    expect(ran.events.at(-1)?.type).toBe(ran.outcome.status === "COMPLETE" ? "task.completed" : "task.failed");
  });
});

describe("corpus examples the table says are refused", () => {
  it.each(Object.entries(REFUSED))("%s fails with %s", async (id, reason) => {
    expect(NOT_RUN[id]).toBeDefined();
    const ran = await runExample({ id, inputs: {}, shows: "" });
    expect(ran.outcome.status).toBe("FAILED");
    expect(ran.outcome.error).toMatchObject({ type: "TASK_FAILURE", reason });
    if (reason === "input_validation_failure") expect(ran.outcome.error?.message).toContain("a script task needs a <command>");
  });

  it("01ec01468f7e: `$.valid` tests do not parse, are reported, and no case runs", async () => {
    const ran = await runExample({ id: "01ec01468f7e", inputs: { valid: true }, shows: "" });
    expectComplete(ran);
    expect(ran.outcome.notes["matchedCase"]).toBeNull();
    expect(ran.events.filter((e) => e.type === "cond.test_error")).toHaveLength(2);
    expect(ran.requests).toHaveLength(0);
  });
});
