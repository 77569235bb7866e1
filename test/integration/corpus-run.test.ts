/**
 * Corpus examples executing end to end: every example test/support/corpus.ts lists as runnable is read from the
 * seeds-xml corpus at test time and run through the real pipeline (test/support/corpus-harness.ts: one nats-server,
 * one stack, `dirigent mock-llm`), with the inputs it needs; each run asserts the example's documented outcome.
 * docs/corpus.md is the table. The examples the table says are refused are run too, and must fail as it says.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EMPTY, NOT_RUN, REFUSED, RUNS } from "../support/corpus.js";
import {
  expectComplete,
  expectPrompts,
  expectSequential,
  filesOf,
  fresh,
  literalFiles,
  messages,
  MODULES,
  plain,
  readability,
  SCRIPT_OUT,
  SORTED,
  SOURCES,
  startCorpusHarness,
  STATS,
  STRUCTURE,
  SUBTASK_REQUEST,
  systemOf,
  FILES,
  type CorpusHarness,
  type Ran,
} from "../support/corpus-harness.js";

let h: CorpusHarness;

beforeAll(async () => {
  h = await startCorpusHarness();
});

afterAll(async () => {
  await h?.stop();
});

const NESTED_TWO_STEPS = [
  "Load data file",
  "Process raw data",
  "Transform data format",
  "Load config settings",
  "Combine processed results",
];
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
  "584adbd0e116": (ran) => {
    // No model session; none of the workspace's files is about error handling.
    expectComplete(ran);
    expect(ran.users).toEqual([]);
    expect(ran.outcome.parsedContent).toEqual({ context: 'no indexed file matches "error handling patterns"', matches: [] });
  },
  bb3be6c47bfa: (ran) => {
    expectComplete(ran);
    expect(ran.users).toEqual([]);
    const answer = ran.outcome.parsedContent as { context: string; matches: { path: string; relevance: string; score: number }[] };
    expect(answer.matches.map((m) => m.path.replace(/^.*\/src\//, "src/"))).toEqual(["src/auth.py"]);
    expect(answer.matches[0]?.relevance).toMatch(/authentication/);
    expect(answer.context).toMatch(/^1 file relevant to "Find relevant files for the given query": .*src\/auth\.py$/);
  },
  eada2887e0b8: (ran) => {
    expectSequential(ran, ["Load CSV file"], 1);
  },
  af4c5de7c07f: (ran) => {
    expectComplete(ran);
    expect(ran.users).toEqual(["Get directory listing", "Get metadata for README.md"]);
    expect(ran.outcome.parsedContent).toEqual({ about: "Get metadata for README.md" });
  },
  d321a2f05774: (ran) => {
    expectComplete(ran);
    expect(ran.users).toEqual(["Process data", "Process data"]);
    expect(ran.outcome.notes["branches"]).toBe(2);
    expect(JSON.parse(ran.outcome.content)).toEqual(["echo:Process data", "echo:Process data"]);
    expect(messages(ran, "branch.started").sort()).toEqual(["branch 1/2", "branch 2/2"]);
  },
  b55abb22bca1: plain("Subtask description"),
  fd1b3d7ed19b: fresh("Start with completely fresh context"),
  "25ab2e572ead": fresh("Start with completely fresh context"),
  "64e63be98e84": fresh("Process data with fresh context only"),
  "63d692d8f6f7": literalFiles("Analyze the main source files", ["./src/main.py", "./src/utils.py"], []),
  "62abdbfa3f37": literalFiles(
    "Analyze code with base context and specific files",
    ["./src/main.py", "./src/utils.py"],
    [],
    "file_paths:literal+fresh_context",
  ),
  "84671f2bc428": literalFiles("Task with specific file context", ["./src/main.py"], ["/absolute/path/file.txt"]),
  "0d37710bc581": literalFiles("Task with specific file context", ["./src/main.py"], ["/absolute/path/file.txt"]),
  ffc4c9ca5655: literalFiles("Task with specific file context", ["./src/main.py"], ["/absolute/path/file.txt"]),
  "16473f3de444": (ran) => {
    plain("Analyze authentication related code")(ran);
    expect(ran.outcome.notes["context_source"]).toBe("file_paths:description");
    expect(filesOf(ran.requests[0]!)[0]).toBe(join(h.workspace, "src/auth.py"));
    expect(systemOf(ran.requests[0]!)).toContain(SOURCES["src/auth.py"]!.text);
  },
  "4bb39876dd93": (ran) => {
    expectComplete(ran);
    expect(ran.outcome).toMatchObject({ content: STRUCTURE, notes: { subtasks: 1 } });
    expectPrompts(ran, ["Analyze code repository structure", "Analyze specific module dependencies", "Analyze code repository structure"]);
    // The parent waited in awaiting_subtask for a generated child, then resumed with the child's answer as the tool response.
    expect(ran.events.map((e) => e.state)).toContain("awaiting_subtask");
    expect(ran.events.find((e) => e.type === "continuation.subtask")?.data).toMatchObject({ depth: 1, request: SUBTASK_REQUEST });
    expect(ran.events.find((e) => e.type === "subtask.template")?.data).toMatchObject({
      template: "generated:atomic:subtask",
      source: "generated",
    });
    expect(messages(ran, "continuation.resumed")).toHaveLength(1);
    expect(ran.requests[2]?.body.messages.at(-1)).toMatchObject({ role: "tool", content: MODULES });
  },
  "5e468bd92cfd": (ran) => {
    expectComplete(ran);
    expect(ran.outcome).toMatchObject({ content: SORTED, notes: { evaluations: 1 } });
    expect(ran.users[0]).toBe("Generate solution for DYNAMIC sort a list");
    expect(ran.users[1]).toContain("Evaluate the output below against the criteria");
    expect(ran.users).toHaveLength(3);
    expect(ran.events.map((e) => e.state)).toContain("awaiting_evaluation");
    // The evaluator saw the criteria and the script's output; the director got the verdict as the tool response.
    expect(ran.users[1]).toContain("the list is sorted");
    expect(ran.users[1]).toContain(SCRIPT_OUT.trimEnd());
    const tool = ran.requests[2]?.body.messages.at(-1);
    expect(tool?.["role"]).toBe("tool");
    expect(JSON.parse(String(tool?.["content"]))).toMatchObject({ success: true, script: { exitCode: 0 } });
  },
  "560c5290b149": (ran) => {
    // Step 2's `from="last_director_output"` and step 3's `from="script_result"` are the earlier steps' output slots:
    // unbound, either step would fail input_validation_failure.
    expectSequential(ran, ["Generate solution for STATIC sort a list", "Evaluate output"], 3);
    expect(ran.outcome.content).toBe(`echo:${ran.users[1]}`);
  },
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
    expectSequential(
      ran,
      ["Generate Initial Solution", "Execute evaluation script via bash", "Bash Script Callback", "Refine Solution"],
      3,
    ),
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
    const second = await h.runExample(run, { output: { valid: false, errors: 3 } });
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
  d8dbc8ca2332: (ran) => {
    expectComplete(ran);
    // `inherit="none"`: not even the Handler's allowlist (HOME, LANG, …) reaches the program.
    const out = "HOME=unset LANG=unset\n";
    expect(ran.outcome).toMatchObject({ content: out, notes: { scriptOutput: { stdout: out, exitCode: 0 } } });
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
    const ran = await h.runExample(run);
    const check = CHECKS[run.id];
    if (!check) expect.fail(`no check for ${run.id}`);
    await check(ran);
    expect(ran.events.at(-1)?.type).toBe(ran.outcome.status === "COMPLETE" ? "task.completed" : "task.failed");
  });
});

describe("corpus examples the table says are refused", () => {
  it.each(Object.entries(REFUSED).map(([id, refusal]) => [id, refusal.reason, refusal] as const))(
    "%s fails with %s",
    async (id, _reason, refusal) => {
      expect(NOT_RUN[id]).toBeDefined();
      const ran = await h.runExample({ id, inputs: refusal.inputs ?? {}, shows: "" });
      expect(ran.outcome.status).toBe("FAILED");
      expect(ran.outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: refusal.reason });
      expect(ran.outcome.error?.message).toContain(refusal.message);
      expect(ran.events.at(-1)?.type).toBe("task.failed");
    },
  );

  it.each(EMPTY)("%s: a skeleton completes without asking the model", async (id) => {
    expect(NOT_RUN[id]).toContain("completes with no work");
    const ran = await h.runExample({ id, inputs: {}, shows: "" });
    expectComplete(ran);
    expect(ran.outcome.content).toBe("");
    expect(ran.requests).toHaveLength(0);
  });

  it("00f0c4d55772: a template without parameters does not see the caller's user_name: refused at submission", async () => {
    const refused = h.runExample({ id: "00f0c4d55772", inputs: { user_name: "Alice" }, shows: "" });
    await expect(refused).rejects.toMatchObject({
      code: "INVALID_TEMPLATE",
      message: expect.stringMatching(
        /^\{\{user_name\}\} in <description> can never be filled: the body of template 'old_style_greeting' sees only its parameters \(none\)/,
      ),
    });
  });

  it("26b7a8980cc0: the `find … | grep …` file_paths command names a program the allowlist lacks: the task fails before anything runs", async () => {
    const ran = await h.runExample({ id: "26b7a8980cc0", inputs: {}, shows: "" });
    expect(ran.outcome.status).toBe("FAILED");
    expect(ran.outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "input_validation_failure" });
    expect(ran.outcome.error?.message).toMatch(
      /^<file_paths source="command">: program 'find' is not allowed for template commands \(DIRIGENT_COMMANDS=/,
    );
    expect(ran.requests).toHaveLength(0);
  });

  it("01ec01468f7e: `$.valid` tests do not parse, are reported, and no case runs", async () => {
    const ran = await h.runExample({ id: "01ec01468f7e", inputs: { valid: true }, shows: "" });
    expectComplete(ran);
    expect(ran.outcome.notes["matchedCase"]).toBeNull();
    expect(ran.events.filter((e) => e.type === "cond.test_error")).toHaveLength(2);
    expect(ran.requests).toHaveLength(0);
  });
});
