/**
 * The Handler's records over a real nats-server (the turns KV bucket) with the mock model: a finished session is
 * replayed without a model call, an interrupted one continues after its last recorded turn or answer (a recorded
 * `run_script` call is not run again, nor one left in flight), script outcomes are replayed, and a record of another version is ignored.
 */
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { toolKey, turnKey } from "../../actors/handler/records.js";
import { markerKey } from "../../actors/handler/lease.js";
import { ask } from "../../actors/ask.js";
import { silentLogger } from "../../actors/deps.js";
import {
  CancelBroadcast,
  encode,
  encodeJson,
  RECORD_VERSION,
  Requests,
  type EvaluateRequest,
  type ExecuteRequest,
  type ScriptRequest,
} from "../../protocol/index.js";
import { jetstreamManager } from "@nats-io/jetstream";
import { createSubjects } from "../../protocol/index.js";
import { loadConfig } from "../../runtime/config.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { NatsBus } from "../../runtime/nats/bus.js";
import { startSystem } from "../../runtime/system.js";
import { openNatsTransport } from "../../runtime/transport.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { pollUntil } from "../support/process-group.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

const APPEND_A = "require('node:fs').appendFileSync('log.txt', 'A\\n')";
const APPEND_B = "require('node:fs').appendFileSync('log.txt', 'B\\n')";
const APPEND_B_HANG_ONCE = `${APPEND_B}; if (require('node:fs').readFileSync('log.txt', 'utf8').split('\\n').filter((l) => l === 'B').length === 1) setInterval(() => {}, 1000)`;

let server: TestNatsServer;
let mock: MockLlmServer;
let workspace: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-records-"));
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: { regex: "^RECORDED" }, hasToolResult: false }, toolCalls: [{ name: "list_files", arguments: {} }] },
        { match: { lastUser: { regex: "^RECORDED" }, hasToolResult: true }, reply: "final answer" },
        // Held until the test opens the gate (its count is never reached).
        { match: { lastUser: { regex: "^SLOW" } }, reply: "slow done", gate: { name: "slow", count: 1000 } },
        // Two scripts in the directory `crash`: A appends "A" to log.txt; B appends "B" and, the first time, hangs.
        {
          match: { lastUser: { regex: "^SCRIPTED crash" }, hasToolResult: false },
          toolCalls: [
            { name: "run_script", arguments: { argv: [process.execPath, "-e", APPEND_A], cwd: "crash" } },
            { name: "run_script", arguments: { argv: [process.execPath, "-e", APPEND_B_HANG_ONCE], cwd: "crash" } },
          ],
        },
        { match: { lastUser: { regex: "^SCRIPTED" }, hasToolResult: true }, reply: "scripts done" },
      ],
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

const deps = (s: Stack) => ({
  bus: s.transport.bus,
  subjects: s.system.subjects,
  log: silentLogger,
  now: () => new Date(),
  newId: () => "x",
});
const execute = (s: Stack, request: ExecuteRequest) => ask(deps(s), Requests.execute, request, { timeoutMs: 10_000 });
const requestsFor = (prompt: string) => mock.requests.filter((r) => JSON.stringify(r.body).includes(prompt)).length;
/** The lines the scripts appended to `<dir>/log.txt`. */
const logOf = async (dir: string) => (await readFile(join(dir, "log.txt"), "utf8").catch(() => "")).split("\n").filter((l) => l !== "");

describe("Handler records", () => {
  it("replays a finished session without calling the model again", async () => {
    await using s = await startStack({ url: server.url, mock, config: { workspaceRoot: workspace, continuationTools: [] } });
    const request: ExecuteRequest = {
      type: "handler.execute",
      taskId: newTaskId() as ExecuteRequest["taskId"],
      nodePath: "0",
      prompt: "RECORDED one",
      occurrence: 1,
    };
    const first = await execute(s, request);
    expect(first.result).toMatchObject({ status: "COMPLETE", content: "final answer", notes: { turns: 2 } });
    expect(requestsFor("RECORDED one")).toBe(2);
    const again = await execute(s, request);
    expect(again.result).toEqual(first.result);
    expect(requestsFor("RECORDED one")).toBe(2);
    // Another occurrence of the same node is another call.
    await execute(s, { ...request, occurrence: 2 });
    expect(requestsFor("RECORDED one")).toBe(4);
  });

  it("continues an interrupted session after its last recorded turn", async () => {
    await using s = await startStack({ url: server.url, mock, config: { workspaceRoot: workspace, continuationTools: [] } });
    const request: ExecuteRequest = {
      type: "handler.execute",
      taskId: newTaskId() as ExecuteRequest["taskId"],
      nodePath: "0.steps.1",
      prompt: "RECORDED two",
      occurrence: 1,
    };
    const key = turnKey(request);
    if (!key || !s.transport.turns) throw new Error("expected a record key and a turns store");
    // What the Handler writes after turn 1 (the model asked for list_files, the tool answered).
    await s.transport.turns.put(
      key,
      encodeJson({
        v: 1,
        status: "running",
        session: {
          messages: [
            { role: "system", content: "base" },
            { role: "user", content: "RECORDED two" },
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "c1", type: "function", function: { name: "list_files", arguments: "{}" } }],
            },
            { role: "tool", tool_call_id: "c1", content: "recorded listing" },
          ],
          turns: 1,
          usage: { promptTokens: 10, completionTokens: 5 },
          context: { used: 10, limit: 100_000, peak: 10 },
          reportedTokens: 15,
          warned: false,
          malformedToolCalls: 0,
          model: "mock-model",
        },
      }),
    );
    const reply = await execute(s, request);
    expect(reply.result).toMatchObject({ status: "COMPLETE", content: "final answer", notes: { turns: 2 } });
    // One model call, for turn 2, carrying the recorded conversation.
    expect(requestsFor("RECORDED two")).toBe(1);
    const sent = mock.requests.find((r) => JSON.stringify(r.body).includes("RECORDED two"));
    expect(JSON.stringify(sent?.body)).toContain("recorded listing");
  });

  it("interrupted while a session's scripts run, asks the model nothing again, runs no script again and tells the model the unfinished one's outcome is unknown", async () => {
    const dir = join(workspace, "crash");
    await mkdir(dir);
    await using s = await startStack({
      url: server.url,
      mock,
      config: { workspaceRoot: workspace, tools: ["run_script"], continuationTools: [] },
    });
    const request: ExecuteRequest = {
      type: "handler.execute",
      taskId: newTaskId() as ExecuteRequest["taskId"],
      nodePath: "0",
      prompt: "SCRIPTED crash",
      occurrence: 1,
    };
    const interrupted = execute(s, request);
    // B runs once the log holds it: by then the model's answer was recorded, and A's answer once A finished.
    await vi.waitFor(async () => expect(await logOf(dir)).toEqual(["A", "B"]), { timeout: 10_000, interval: 20 });
    // The interruption, at that precise point: the session stops with B in flight, so B's answer is never recorded
    // and the session records no reply; the records are what a crash there leaves.
    s.transport.bus.publish(s.system.subjects.cancelBroadcast, encode(CancelBroadcast, { type: "task.cancel", taskId: request.taskId }));
    expect((await interrupted).result.error).toMatchObject({ reason: "execution_halted" });
    expect(requestsFor("SCRIPTED crash")).toBe(1);
    // Until its in-flight marker is released, a request for the same session joins the interrupted run and gets its
    // answer (actors/handler/lease.ts): ask again once it is.
    const key = turnKey(request);
    const turns = s.transport.turns;
    if (!key || !turns) throw new Error("expected a record key and a turns store");
    await vi.waitFor(
      async () => {
        const marker = await turns.get(markerKey(key));
        expect(marker && JSON.parse(new TextDecoder().decode(marker))).toMatchObject({ released: true });
      },
      { timeout: 10_000, interval: 20 },
    );

    const reply = await execute(s, request);
    expect(reply.result).toMatchObject({ status: "COMPLETE", content: "scripts done", notes: { turns: 2 } });
    // Turn 1 was not asked again; A was not run again; B, started but unanswered and not idempotent, neither.
    expect(requestsFor("SCRIPTED crash")).toBe(2);
    expect(await logOf(dir)).toEqual(["A", "B"]);
    const sent = JSON.stringify(mock.requests.filter((r) => JSON.stringify(r.body).includes("SCRIPTED crash")).at(-1)?.body);
    expect(sent).toContain("the outcome of this call of 'run_script' is unknown");
  });

  it("resumes from a recorded answer: uses a script's recorded result, runs an unrecorded one, and asks the model only the next turn", async () => {
    const dir = join(workspace, "replay");
    await mkdir(dir);
    await using s = await startStack({
      url: server.url,
      mock,
      config: { workspaceRoot: workspace, tools: ["run_script"], continuationTools: [] },
    });
    const request: ExecuteRequest = {
      type: "handler.execute",
      taskId: newTaskId() as ExecuteRequest["taskId"],
      nodePath: "0",
      prompt: "SCRIPTED replay",
      occurrence: 1,
    };
    const key = turnKey(request);
    if (!key || !s.transport.turns) throw new Error("expected a record key and a turns store");
    const runScript = (id: string, code: string) => ({
      id,
      type: "function",
      function: { name: "run_script", arguments: JSON.stringify({ argv: [process.execPath, "-e", code], cwd: "replay" }) },
    });
    // What the Handler writes when the model answers turn 1 with two scripts, before either runs...
    await s.transport.turns.put(
      key,
      encodeJson({
        v: RECORD_VERSION,
        status: "running",
        session: {
          messages: [
            { role: "system", content: "base" },
            { role: "user", content: "SCRIPTED replay" },
            { role: "assistant", content: null, tool_calls: [runScript("c1", APPEND_A), runScript("c2", APPEND_B)] },
          ],
          turns: 1,
          usage: { promptTokens: 10, completionTokens: 5 },
          context: { used: 10, limit: 100_000, peak: 10 },
          reportedTokens: 15,
          warned: false,
          malformedToolCalls: 0,
          model: "mock-model",
        },
      }),
    );
    // ... and once the first script finished.
    await s.transport.turns.put(
      toolKey(key, 1, 0, "c1"),
      encodeJson({ v: RECORD_VERSION, tool: "run_script", content: "exit code 0 (recorded)", malformed: false }),
    );
    const reply = await execute(s, request);
    expect(reply.result).toMatchObject({ status: "COMPLETE", content: "scripts done", notes: { turns: 2 } });
    expect(await logOf(dir)).toEqual(["B"]);
    expect(requestsFor("SCRIPTED replay")).toBe(1);
    const sent = JSON.stringify(mock.requests.find((r) => JSON.stringify(r.body).includes("SCRIPTED replay"))?.body);
    expect(sent).toContain("exit code 0 (recorded)");
  });

  it("ignores a record of another version, and runs the session again", async () => {
    await using s = await startStack({ url: server.url, mock, config: { workspaceRoot: workspace, continuationTools: [] } });
    const request: ExecuteRequest = {
      type: "handler.execute",
      taskId: newTaskId() as ExecuteRequest["taskId"],
      nodePath: "0",
      prompt: "RECORDED three",
      occurrence: 1,
    };
    const key = turnKey(request);
    if (!key || !s.transport.turns) throw new Error("expected a record key and a turns store");
    await s.transport.turns.put(key, encodeJson({ v: 99, status: "done", result: { content: "stale", status: "COMPLETE", notes: {} } }));
    const reply = await execute(s, request);
    expect(reply.result.content).toBe("final answer");
    expect(requestsFor("RECORDED three")).toBe(2);
  });

  it("replays a script's recorded outcome instead of running it again", async () => {
    await using s = await startStack({ url: server.url, mock, config: { workspaceRoot: workspace, commands: [process.execPath] } });
    const request: ScriptRequest = {
      type: "handler.script",
      taskId: newTaskId() as ScriptRequest["taskId"],
      nodePath: "0",
      argv: [process.execPath, "-e", "console.log(process.hrtime.bigint().toString())"],
      timeoutMs: 10_000,
      occurrence: 1,
    };
    const run = () => ask(deps(s), Requests.script, request, { timeoutMs: 20_000 });
    const first = await run();
    expect(first.exitCode).toBe(0);
    expect(await run()).toEqual(first);
    // Without an occurrence nothing is recorded: the command runs each time.
    const { occurrence: _o, ...unrecorded } = request;
    const a = await ask(deps(s), Requests.script, unrecorded, { timeoutMs: 20_000 });
    const b = await ask(deps(s), Requests.script, unrecorded, { timeoutMs: 20_000 });
    expect(a.stdout).not.toBe(b.stdout);
  });
});

describe("a superseded evaluation", () => {
  it("stops when the task's evaluation starts for another owner, and the new one runs", async () => {
    await using s = await startStack({ url: server.url, mock, config: { continuationTools: [] } });
    const taskId = newTaskId() as EvaluateRequest["taskId"];
    const request = (owner: string): EvaluateRequest => ({
      type: "evaluator.evaluate",
      taskId,
      owner,
      xml: "<task><description>SLOW work</description></task>",
      inputs: {},
    });
    const evaluate = (owner: string) => ask(deps(s), Requests.evaluate, request(owner), { timeoutMs: 10_000 });
    const slowCalls = () => mock.requests.filter((r) => JSON.stringify(r.body).includes("SLOW work")).length;
    const before = slowCalls();
    const old = evaluate("director-old");
    // The new owner asks once the old walk is provably running (its model call held at the gate).
    await pollUntil(() => (slowCalls() > before ? true : undefined), "the old walk's model call");
    const fresh = evaluate("director-new");
    // The stopped one is no outcome of the task: an error its sender retries should it still own the task.
    await expect(old).rejects.toMatchObject({ code: "UNAVAILABLE", message: expect.stringContaining("superseded") });
    mock.openGate("slow");
    const done = await fresh;
    expect(done.result).toMatchObject({ status: "COMPLETE", content: "slow done" });
  });
});

describe("an embedded runtime on a client's transport", () => {
  it("opens the Handler's records and the task records at start, not at the first write behind a reply", async () => {
    const root = `emb${Math.random().toString(36).slice(2, 10)}`;
    const subjects = createSubjects(root);
    // A client opens no store (`roles: []`); `dirigent run` then starts its embedded roles on that transport.
    const transport = await openNatsTransport(server.url, subjects, { name: "records-embedded", log: silentLogger, roles: [] });
    if (!(transport.bus instanceof NatsBus)) throw new Error("expected a NATS transport");
    const jsm = await jetstreamManager(transport.bus.connection);
    const exists = (stream: string) =>
      jsm.streams.info(stream).then(
        () => true,
        () => false,
      );
    try {
      expect(await exists(`KV_${subjects.turnsBucket}`)).toBe(false);
      const system = await startSystem({
        config: { ...loadConfig({}, {}), prefix: root, openaiBaseUrl: mock.url, openaiApiKey: "test-key" },
        transport,
        roles: ["director", "evaluator", "handler"],
      });
      try {
        expect(await exists(`KV_${subjects.turnsBucket}`)).toBe(true);
        expect(await exists(`KV_${subjects.tasksBucket}`)).toBe(true);
      } finally {
        await system.stop();
      }
    } finally {
      await transport.close();
    }
  });
});
