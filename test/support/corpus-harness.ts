/**
 * The harness of the corpus runs (test/integration/corpus-run.test.ts): one nats-server, one stack and a
 * `dirigent mock-llm` that scripts the corpus examples' answers, a temporary workspace with the scripts examples run,
 * source files that `<file_paths>` read and Memory indexes, and an empty template library; plus the checks the
 * runs share.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { ask } from "../../actors/ask.js";
import { createSubjects, Requests, type TaskEvent, type TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type RecordedRequest } from "../../runtime/model/mock-server.js";
import { corpusText, type CorpusRun } from "./corpus.js";
import { startTestNatsServer } from "./nats-server.js";
import { newTaskId, startStack, type Stack } from "./stack.js";

/** A running corpus harness. */
export interface CorpusHarness {
  stack: Stack;
  mock: MockLlmServer;
  /** The temporary workspace. */
  workspace: string;
  /** A harmless script (`$SCRIPT`): prints {@link SCRIPT_OUT}. */
  scriptPath: string;
  /** A script (`$ENV_SCRIPT`) that prints whether HOME and LANG reach it. */
  envScriptPath: string;
  /** Runs an example's entry with its inputs (or `inputs`). */
  runExample(run: CorpusRun, inputs?: Record<string, unknown>): Promise<Ran>;
  stop(): Promise<void>;
}

export const READABILITY = '{"issues": ["long lines"], "score": 7}';
export const FILES = '["README.md", "src/main.py"]';
export const STATS = '{"files": 12, "commits": 340}';
export const SCRIPT_OUT = "checked by the corpus script\n";
export const MODULES = "main.py imports utils";
export const STRUCTURE = "structure: main.py -> utils.py";
export const SORTED = "sorted: [1, 2, 3]";

/** The workspace's files, read by `<file_paths>` examples and indexed for Memory. */
export const SOURCES: Readonly<Record<string, { text: string; metadata: string }>> = {
  "src/auth.py": {
    text: "def login(user, password):\n    return check_password(user, password)\n",
    metadata: "language: Python; authentication: user login and password checks; defines: login",
  },
  "src/main.py": { text: "import utils\nprint(utils.add(1, 2))\n", metadata: "language: Python; the program's entry point; imports utils" },
  "src/utils.py": { text: "def add(a, b):\n    return a + b\n", metadata: "language: Python; small arithmetic helpers; defines: add" },
};

/** Starts the harness; `stop()` ends it and removes the workspace. */
export async function startCorpusHarness(): Promise<CorpusHarness> {
  const server = await startTestNatsServer();
  const workspace = await mkdtemp(join(tmpdir(), "dirigent-corpus-"));
  const scriptPath = join(workspace, "check.sh");
  // The only command any example runs: prints one line, touches nothing.
  await writeFile(scriptPath, `#!/bin/sh\nprintf '${SCRIPT_OUT.trimEnd()}\\n'\n`);
  await chmod(scriptPath, 0o755);
  // Prints whether two variables of the Handler's default allowlist reach it.
  const envScriptPath = join(workspace, "env.sh");
  await writeFile(envScriptPath, `#!/bin/sh\nprintf 'HOME=%s LANG=%s\\n' "\${HOME-unset}" "\${LANG-unset}"\n`);
  await chmod(envScriptPath, 0o755);
  await mkdir(join(workspace, "src"));
  for (const [path, { text }] of Object.entries(SOURCES)) await writeFile(join(workspace, path), text);
  // An empty template library: subtasks get a generated template, evaluations the built-in evaluator.
  await mkdir(join(workspace, "templates"));
  const mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "Analyze the given code for readability issues." }, reply: READABILITY },
        { match: { lastUser: "List files in directory" }, reply: FILES },
        { match: { lastUser: "Get directory listing" }, reply: FILES },
        { match: { lastUser: { regex: "^Get metadata for " } }, reply: '{"about": "{{lastUser}}"}' },
        { match: { lastUser: "Get repository statistics" }, reply: STATS },
        { match: { lastUser: "Combine current result with accumulator" }, reply: "ACC" },
        {
          match: { lastUser: "Evaluate solution against LOOP-A" },
          reply: '{"success": false, "feedback": "handle empty lists", "score": 3}',
          times: 1,
        },
        { match: { lastUser: "Evaluate solution against LOOP-" }, reply: '{"success": true, "feedback": "good", "score": 9}' },
        // 4bb39876dd93: the parent asks for the subtask its second snippet sketches, then answers with the child's result.
        {
          match: { lastUser: { regex: "^Analyze code repository structure" }, turn: 1 },
          toolCalls: [{ name: "run_subtask", arguments: SUBTASK_REQUEST }],
        },
        { match: { lastUser: { regex: "^Analyze specific module dependencies" } }, reply: MODULES },
        { match: { lastUser: { regex: "^Analyze code repository structure" }, hasToolResult: MODULES }, reply: STRUCTURE },
        // 5e468bd92cfd: the director asks for an evaluation of a script run, then finishes.
        {
          match: { lastUser: { regex: "^Generate solution for DYNAMIC" }, turn: 1 },
          toolCalls: [{ name: "request_evaluation", arguments: { type: "script", criteria: ["the list is sorted"], target: scriptPath } }],
        },
        { match: { lastUser: { regex: "^Evaluate the output below" } }, reply: '{"success": true, "feedback": "sorted"}' },
        { match: { lastUser: { regex: "^Generate solution for DYNAMIC" }, hasToolResult: true }, reply: SORTED },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
  // eada2887e0b8 reads `from="env:data_source"`: an allowlisted variable of the Evaluator's environment.
  process.env["data_source"] = "data/experiment.csv";
  const stack = await startStack({
    url: server.url,
    mock,
    config: {
      envInputs: ["data_source"],
      tools: ["read_file", "list_files", "run_script"],
      commands: [scriptPath, envScriptPath],
      workspaceRoot: workspace,
      templates: join(workspace, "templates"),
    },
  });
  await indexWorkspace(stack, workspace);
  const parts = { stack, mock, workspace, scriptPath, envScriptPath };
  return {
    ...parts,
    runExample: (run, inputs) => runExample(parts, run, inputs),
    stop: async () => {
      await stack.stop();
      await mock.close();
      await server.stop();
      await rm(workspace, { recursive: true, force: true });
      delete process.env["data_source"];
    },
  };
}

/** The request 4bb39876dd93's second snippet describes: its description, context settings and inputs. */
export const SUBTASK_REQUEST = {
  type: "atomic",
  description: "Analyze specific module dependencies",
  inputs: { module_path: "src/main.py", depth: 2 },
  context_management: { inherit_context: "subset", fresh_context: "enabled" },
};

/** Indexes the workspace's sources for Memory and waits until Memory serves them. */
async function indexWorkspace(stack: Stack, workspace: string) {
  await stack.transport.index.updateGlobalIndex(
    Object.entries(SOURCES).map(([path, { metadata }]) => ({ path: join(workspace, path), metadata })),
  );
  await servedIndex(stack, "authentication login password");
}

/**
 * Waits until the stack's Memory answers `query` with a match: it loads a new index generation when its watch of the
 * index bucket tells it, which no event of the stack reports.
 */
export async function servedIndex(stack: Stack, query: string): Promise<void> {
  const deps = {
    bus: stack.transport.bus,
    subjects: createSubjects(stack.root),
    log: silentLogger,
    now: () => new Date(),
    newId: () => "index-probe",
  };
  const probe = { type: "memory.match", templateDescription: query, templateType: "atomic", inputs: {} } as const;
  for (let i = 0; i < 50; i++) {
    const reply = await ask(deps, Requests.memoryMatch, probe, { timeoutMs: 5000 });
    if (reply.matches.length > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("Memory did not serve the index");
}

/** What one run gave. */
export interface Ran {
  outcome: TaskOutcome;
  events: TaskEvent[];
  requests: RecordedRequest[];
  /** The last user message of each model request, in order. */
  users: string[];
}

export const lastUser = (r: RecordedRequest) => String(r.body.messages.filter((m) => m["role"] === "user").at(-1)?.["content"] ?? "");
export const systemOf = (r: RecordedRequest) => String(r.body.messages.find((m) => m["role"] === "system")?.["content"] ?? "");
export const messages = (ran: Ran, type: string) => ran.events.filter((e) => e.type === type).map((e) => e.message);

async function runExample(
  h: Omit<CorpusHarness, "runExample" | "stop">,
  run: CorpusRun,
  inputs: Record<string, unknown> = { ...run.inputs },
): Promise<Ran> {
  const xml = [...(run.with ?? []), run.id].map((id) => corpusText(id)).join("\n");
  const bound = Object.fromEntries(
    Object.entries(inputs).map(([k, v]) => [k, v === "$SCRIPT" ? h.scriptPath : v === "$ENV_SCRIPT" ? h.envScriptPath : v]),
  );
  const events: TaskEvent[] = [];
  const before = h.mock.requests.length;
  const outcome = await h.stack.client.run({ xml, inputs: bound, taskId: newTaskId() }, (e) => events.push(e));
  const requests = h.mock.requests.slice(before);
  return { outcome, events, requests, users: requests.map(lastUser) };
}

/** Each prompt reached the model, in this order (the user message contains it). */
export function expectPrompts(ran: Ran, prompts: readonly string[]) {
  expect(ran.users, JSON.stringify(ran.users)).toHaveLength(prompts.length);
  prompts.forEach((p, i) => expect(ran.users[i]).toContain(p));
}

export function expectComplete(ran: Ran) {
  expect(ran.outcome.error, JSON.stringify(ran.outcome.error)).toBeUndefined();
  expect(ran.outcome.status).toBe("COMPLETE");
}

/** A sequential that completed with these prompts and `step n/N` events. */
export function expectSequential(ran: Ran, prompts: readonly string[], steps: number) {
  expectComplete(ran);
  expectPrompts(ran, prompts);
  expect(ran.outcome.notes["steps"]).toBe(steps);
  expect(messages(ran, "step.started")).toEqual(Array.from({ length: steps }, (_, i) => `step ${i + 1}/${steps}`));
}

export const readability = (ran: Ran) => {
  expectComplete(ran);
  expectPrompts(ran, ["Analyze the given code for readability issues."]);
  const [request] = ran.requests;
  expect(request?.body.model).toBe("claude-3-sonnet");
  expect(systemOf(request!)).toContain("You are a code quality expert focused on readability.");
  expect(ran.outcome.content).toBe(READABILITY);
};

export const plain = (prompt: string) => (ran: Ran) => {
  expectComplete(ran);
  expectPrompts(ran, [prompt]);
  expect(ran.outcome.content).toBe(`echo:${ran.users[0]}`);
};

/** The files attached to a request's system prompt, in order. */
export const filesOf = (r: RecordedRequest) => [...systemOf(r).matchAll(/<file path="([^"]*)">/g)].map((m) => m[1]);

/** A plain atomic task whose `fresh_context` asked Memory and found nothing to add. */
export const fresh = (prompt: string) => (ran: Ran) => {
  plain(prompt)(ran);
  expect(ran.outcome.notes).toMatchObject({ context_source: "fresh_context", context_files_count: 0 });
};

/** An atomic task whose literal `<file_paths>` are read from the workspace; paths outside it are reported. */
export const literalFiles =
  (prompt: string, attached: readonly string[], outside: readonly string[], source = "file_paths:literal") =>
  (ran: Ran) => {
    plain(prompt)(ran);
    expect(filesOf(ran.requests[0]!)).toEqual(attached);
    for (const path of attached) expect(systemOf(ran.requests[0]!)).toContain(SOURCES[path.replace(/^\.\//, "")]!.text);
    expect(ran.outcome.notes).toMatchObject({ context_source: source, context_files: attached.length });
    const errors = (ran.outcome.notes["context_file_errors"] ?? []) as Array<{ path: string; error: string }>;
    expect(errors.map((e) => e.path)).toEqual(outside);
    for (const e of errors) expect(e.error).toContain("outside the workspace");
  };
