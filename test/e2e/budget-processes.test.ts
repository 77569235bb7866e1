/**
 * Issue 4: a task's `max_tokens` budget is inherited by its subtasks wherever they run. The Handler role runs as two
 * OS processes (`dirigent worker --role handler`); Director, Evaluator and Memory run in the test process, over a
 * real nats-server and the mock model. The parent session's first turn is served by Handler A and its `run_subtask`
 * child by Handler B (A drains while its turn is held, so B is the only Handler left when the child is asked for):
 * the child's model calls are charged to the parent's budget, a spent budget ends the task with RESOURCE_EXHAUSTION
 * `budget`, and a sufficient one completes with `notes.task_usage` summing parent and child.
 *
 * Which process made a model call is told by its API key (each Handler has its own), as the mock model records it.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, decode, ExecuteRequest, type TaskOutcome } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type RecordedRequest } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { gate, Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
const processes: CliProcess[] = [];

const usage = (prompt_tokens: number, completion_tokens: number) => ({ prompt_tokens, completion_tokens });

/** Parent's first turn 1,000 tokens; the child 1,200; the resumed parent 300. */
const PARENT_TURN = { promptTokens: 600, completionTokens: 400 };
const CHILD = { promptTokens: 300, completionTokens: 900 };
const PARENT_RESUMED = { promptTokens: 250, completionTokens: 50 };

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        {
          match: { lastUser: { regex: "^PARENT" }, turn: 1 },
          toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "CHILD count to three" } }],
          usage: usage(PARENT_TURN.promptTokens, PARENT_TURN.completionTokens),
        },
        { match: { lastUser: { regex: "^CHILD" } }, reply: "one two three", usage: usage(CHILD.promptTokens, CHILD.completionTokens) },
        // A parent whose child makes a tool-call turn, then would need a second model call.
        {
          match: { lastUser: { regex: "^SPENDER" }, turn: 1 },
          toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "GREEDY list the workspace, then count" } }],
          usage: usage(PARENT_TURN.promptTokens, PARENT_TURN.completionTokens),
        },
        {
          match: { lastUser: { regex: "^GREEDY" }, turn: 1 },
          toolCalls: [{ name: "list_files", arguments: { path: "." } }],
          usage: usage(CHILD.promptTokens, CHILD.completionTokens),
        },
        { match: { lastUser: { regex: "^GREEDY" }, hasToolResult: true }, reply: "listed, one two three" },
        {
          match: { lastUser: { regex: "^PARENT" }, hasToolResult: { regex: "one two three" } },
          reply: "parent done",
          usage: usage(PARENT_RESUMED.promptTokens, PARENT_RESUMED.completionTokens),
        },
      ],
      default: { reply: "unexpected" },
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

/**
 * A pass-through to the mock model that holds the requests `hold` picks until `release` is called, so the test
 * can act while a Handler process is inside that model call.
 */
async function startHoldingProxy(target: string, hold: (body: string) => boolean) {
  const origin = new URL(target).origin;
  const held = new Recorder<string>();
  const { promise: released, open: release } = gate();
  const proxy: Server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks).toString();
      if (hold(body)) {
        held.push(body);
        await released;
      }
      const upstream = await fetch(`${origin}${req.url ?? "/"}`, {
        method: req.method ?? "POST",
        headers: { "content-type": "application/json", authorization: req.headers.authorization ?? "" },
        ...(req.method === "GET" ? {} : { body }),
      });
      res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" });
      res.end(Buffer.from(await upstream.arrayBuffer()));
    })().catch((err: unknown) => {
      res.writeHead(502).end(String(err));
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const { port } = proxy.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    held,
    release,
    async close() {
      release();
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

const lastUser = (r: RecordedRequest) => String([...r.body.messages].reverse().find((m) => m["role"] === "user")?.["content"] ?? "");
const resumed = (r: RecordedRequest) => r.body.messages.some((m) => m["role"] === "tool");
const KEYS = { a: "key-handler-a", b: "key-handler-b" } as const;
/** Which Handler process made a model call, by the API key it sent. */
const servedBy = (r: RecordedRequest) =>
  r.headers.authorization === `Bearer ${KEYS.a}` ? "a" : r.headers.authorization === `Bearer ${KEYS.b}` ? "b" : "?";

function handler(root: string, baseUrl: string, apiKey: string): CliProcess {
  const p = startCli(["worker", "--role", "handler", "--nats", server.url, "--prefix", root, "--concurrency", "4"], {
    OPENAI_BASE_URL: baseUrl,
    OPENAI_API_KEY: apiKey,
    DIRIGENT_MODEL_MAX_RETRIES: "0",
    DIRIGENT_LOG_LEVEL: "info",
  });
  processes.push(p);
  return p;
}

/**
 * Runs an atomic task with `description` under `budget`, the parent's first turn on Handler A and everything after it on Handler B:
 * A takes the parent's first model call (it is the only Handler then), which the proxy holds; B starts; A is sent
 * SIGTERM and, once it is draining (no longer subscribed), the call is let go. A answers the parent's CONTINUATION
 * and exits; the child and the resumed parent can only go to B.
 */
async function runAcrossTwoHandlers(description: string, budget: { max_tokens: number }) {
  const root = randomRoot();
  await using stack = await startStack({ url: server.url, mock, root, roles: ["director", "evaluator", "memory"] });
  // Holds Handler A's first model call (A is sent no other: the rest goes to B).
  let first = true;
  const proxy = await startHoldingProxy(mock.url, () => {
    const hold = first;
    first = false;
    return hold;
  });
  try {
    // Every handler.execute request of the task, as the Evaluator sent it.
    const executes = new Recorder<ExecuteRequest>();
    stack.transport.bus.subscribe(createSubjects(root).execute, (msg) => {
      const decoded = decode(ExecuteRequest, msg.data);
      if (decoded.ok) executes.push(decoded.value);
    });
    await stack.transport.bus.flush();

    const a = handler(root, proxy.url, KEYS.a);
    await a.waitFor(/ready/);
    const before = mock.requests.length;
    const outcome: Promise<TaskOutcome> = stack.client.run({
      xml: `<task type="atomic"><description>${description}</description></task>`,
      taskId: newTaskId(),
      budget,
    });
    outcome.catch(() => undefined); // awaited below

    await proxy.held.count(1, "Handler A's model call for the parent", 15_000);
    const b = handler(root, mock.url, KEYS.b);
    await b.waitFor(/ready/);
    a.child.kill("SIGTERM");
    // Written right before the Handler unsubscribes: its UNSUB then reaches nats-server ahead of its answer to the
    // parent (one connection, in order), so the child's request cannot be routed to A.
    await a.waitFor(/draining/);
    proxy.release();

    const result = await outcome;
    expect(await a.exited).toBe(0);
    expect(a.output()).toMatch(/drained/);
    const calls = mock.requests.slice(before).map((r) => ({ who: servedBy(r), prompt: lastUser(r).split(" ")[0], resumed: resumed(r) }));
    await b.stop();
    return { result, executes: executes.values, calls };
  } finally {
    await proxy.close();
  }
}

const sum = (...usages: { promptTokens: number; completionTokens: number }[]) => ({
  promptTokens: usages.reduce((n, u) => n + u.promptTokens, 0),
  completionTokens: usages.reduce((n, u) => n + u.completionTokens, 0),
});
const total = (u: { promptTokens: number; completionTokens: number }) => u.promptTokens + u.completionTokens;

describe("a task's max_tokens budget across two Handler processes", () => {
  it("charges the child's model calls, on the other Handler, to the parent's budget and ends the task when it is spent", async () => {
    // Enough for the parent's first turn and the child, 100 tokens short of anything the resumed parent could send.
    const limit = total(PARENT_TURN) + total(CHILD) + 100;
    const { result, executes, calls } = await runAcrossTwoHandlers("PARENT count with a subtask", { max_tokens: limit });

    // The parent's first turn on A, the child on B; the resumed parent never reached the model.
    expect(calls).toEqual([
      { who: "a", prompt: "PARENT", resumed: false },
      { who: "b", prompt: "CHILD", resumed: false },
    ]);
    // Each request carried what was left: the child the parent's budget minus the parent's turn, the resumed
    // parent that minus the child's calls.
    expect(executes.map((e) => ({ prompt: e.prompt.split(" ")[0], resumed: e.resume !== undefined, budget: e.budget }))).toEqual([
      { prompt: "PARENT", resumed: false, budget: { tokens: limit } },
      { prompt: "CHILD", resumed: false, budget: { tokens: limit - total(PARENT_TURN) } },
      { prompt: "", resumed: true, budget: { tokens: limit - total(PARENT_TURN) - total(CHILD) } },
    ]);
    expect(result.status).toBe("FAILED");
    expect(result.error).toMatchObject({
      type: "RESOURCE_EXHAUSTION",
      resource: "budget",
      budget: "tokens",
      metrics: { used: total(PARENT_TURN) + total(CHILD), limit },
      message: `the task's token budget of ${limit} reached (${total(PARENT_TURN) + total(CHILD)} used)`,
    });
    expect(result.notes).toMatchObject({ task_usage: sum(PARENT_TURN, CHILD) });
  });

  it("stops the child on the other Handler when its next call would exceed the budget it inherited", async () => {
    // The child's first turn leaves 100 tokens: less than its second call would send.
    const limit = total(PARENT_TURN) + total(CHILD) + 100;
    const { result, executes, calls } = await runAcrossTwoHandlers("SPENDER count with a subtask", { max_tokens: limit });

    expect(calls).toEqual([
      { who: "a", prompt: "SPENDER", resumed: false },
      { who: "b", prompt: "GREEDY", resumed: false },
    ]);
    expect(executes.map((e) => ({ prompt: e.prompt.split(" ")[0], budget: e.budget }))).toEqual([
      { prompt: "SPENDER", budget: { tokens: limit } },
      { prompt: "GREEDY", budget: { tokens: limit - total(PARENT_TURN) } },
    ]);
    // The child's failure reaches the parent, which fails with it.
    expect(result.status).toBe("FAILED");
    const used = total(PARENT_TURN) + total(CHILD);
    expect(result.error).toMatchObject({
      type: "TASK_FAILURE",
      reason: "subtask_failure",
      message: `subtask failed: the task's token budget of ${limit} reached (${used} used)`,
      details: { subtaskError: { type: "RESOURCE_EXHAUSTION", resource: "budget", budget: "tokens", metrics: { used, limit } } },
    });
    expect(result.notes).toMatchObject({ task_usage: sum(PARENT_TURN, CHILD) });
  });

  it("completes within the budget, with notes.task_usage summing the parent's and the child's calls", async () => {
    const { result, executes, calls } = await runAcrossTwoHandlers("PARENT count with a subtask", { max_tokens: 10_000 });

    expect(calls).toEqual([
      { who: "a", prompt: "PARENT", resumed: false },
      { who: "b", prompt: "CHILD", resumed: false },
      { who: "b", prompt: "PARENT", resumed: true },
    ]);
    expect(executes.map((e) => e.budget)).toEqual([
      { tokens: 10_000 },
      { tokens: 10_000 - total(PARENT_TURN) },
      { tokens: 10_000 - total(PARENT_TURN) - total(CHILD) },
    ]);
    expect(result).toMatchObject({ status: "COMPLETE", content: "parent done" });
    // The task's usage is every call of the task; the result's own usage is the parent session's (both its turns).
    expect(result.notes).toMatchObject({ task_usage: sum(PARENT_TURN, CHILD, PARENT_RESUMED), usage: sum(PARENT_TURN, PARENT_RESUMED) });
  });
});
