/**
 * Handler sessions end to end: NATS → Director → Evaluator → Handler → the real `openai` SDK → `dirigent mock-llm`,
 * for each tool, limit and model fault.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockScript } from "../../runtime/model/mock-server.js";
import type { Config } from "../../runtime/config.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { noneRunning, pidsRunning, pollUntil, RUN_SLEEP as SLEEP_A } from "../support/process-group.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const TASK = "<task><description>Summarise the notes.</description></task>";

let server: TestNatsServer;
let workspace: string;
let outside: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-handler-ws-"));
  outside = await mkdtemp(join(tmpdir(), "dirigent-handler-outside-"));
  await writeFile(join(workspace, "notes.md"), "# Notes\nThe meeting is on Tuesday.\n");
  await writeFile(join(workspace, "big.txt"), "lorem ipsum dolor sit amet ".repeat(200));
  await writeFile(join(outside, "secret.txt"), "the secret");
  await symlink(join(outside, "secret.txt"), join(workspace, "secret-link.txt"));
});

afterAll(async () => {
  await server?.stop();
  await rm(workspace, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

/** Runs TASK on a fresh stack with `script` and `config`; returns the outcome, the events and the model's requests. */
async function run(script: MockScript, config: Partial<Config> = {}) {
  await using stack = await startStack({
    url: server.url,
    script,
    config: { workspaceRoot: workspace, modelRetryBaseMs: 1, reparse: false, ...config },
  });
  const events = new Recorder<TaskEvent>();
  const outcome = await stack.client.run({ xml: TASK, taskId: newTaskId() }, (e) => events.push(e));
  await events.until((v) => v.some((e) => e.type.startsWith("task.") && e.state !== "running" && e.state !== "queued"), "the final event");
  return { outcome, events: events.values, requests: stack.mock.requests.map((r) => r.body) };
}

/** Completion tokens of the last turn: the `usage` of the last `model.turn` (the message's own). */
function mockUsageOfLastTurn(events: readonly TaskEvent[]): number {
  const last = events.filter((e) => e.type === "model.turn").at(-1);
  return Number((last?.data?.["usage"] as { completionTokens?: number } | undefined)?.completionTokens ?? 0);
}

/**
 * A script that ignores SIGTERM, as does the child it leaves running (`sleep <seconds>`, a command line the test
 * looks for on the host); it prints (or writes) its pid and the child's, as seen in its sandbox.
 */
const stubborn = (seconds: number, to = "") => ["sh", "-c", `trap '' TERM; sleep ${seconds} & echo $$ $!${to}; wait`];

const toolMessages = (body: { messages: Array<Record<string, unknown>> } | undefined) =>
  (body?.messages ?? []).filter((m) => m["role"] === "tool").map((m) => String(m["content"]));

describe("handler tools", () => {
  it("offers the tools, reads a workspace file and refuses a symlink pointing out of the workspace", async () => {
    const { outcome, requests } = await run({
      rules: [
        {
          match: { turn: 1 },
          toolCalls: [
            { name: "read_file", arguments: { path: "notes.md" } },
            { name: "read_file", arguments: { path: "secret-link.txt" } },
          ],
        },
        { match: { hasToolResult: true }, reply: "Tuesday." },
      ],
    });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "Tuesday." });
    const offered = (requests[0]?.["tools"] ?? []) as Array<{ function: { name: string } }>;
    expect(offered.map((t) => t.function.name)).toEqual(["read_file", "list_files", "run_subtask", "request_user_input"]);
    const answers = toolMessages(requests[1]);
    expect(answers[0]).toBe("# Notes\nThe meeting is on Tuesday.\n");
    expect(answers[1]).toBe("error: path 'secret-link.txt' resolves outside the workspace (symlink)");
    expect(JSON.stringify(requests)).not.toContain("the secret");
  });

  it("refuses '..' and answers a tool call with invalid JSON with an error; the model's next turn succeeds", async () => {
    const { outcome, requests, events } = await run({
      rules: [
        {
          match: { turn: 1 },
          toolCalls: [
            { name: "list_files", arguments: { path: "../" } },
            { name: "read_file", arguments: '{"path": "notes.md"' },
          ],
        },
        { match: { hasToolResult: "not valid JSON" }, reply: "recovered" },
      ],
    });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "recovered" });
    const answers = toolMessages(requests[1]);
    expect(answers[0]).toBe("error: path '../' is outside the workspace");
    expect(answers[1]).toMatch(/^error: the arguments of 'read_file' are not valid JSON/);
    expect(events.filter((e) => e.type === "tool.call").map((e) => e.data?.["malformed"])).toEqual([false, true]);
  });

  it("runs run_script when enabled, in the workspace, without the API key in its environment", async () => {
    const previous = process.env["OPENAI_API_KEY"];
    process.env["OPENAI_API_KEY"] = "sk-handler-test-secret";
    try {
      const { outcome, requests } = await run(
        {
          rules: [
            {
              match: { turn: 1 },
              toolCalls: [{ name: "run_script", arguments: { argv: ["sh", "-c", 'pwd; echo "key=$OPENAI_API_KEY"; ls'] } }],
            },
            { match: { hasToolResult: "exit code 0" }, reply: "ran it" },
          ],
        },
        { tools: ["read_file", "list_files", "run_script"], scriptEnv: ["PATH", "OPENAI_API_KEY"] },
      );
      expect(outcome).toMatchObject({ status: "COMPLETE", content: "ran it" });
      const [answer] = toolMessages(requests[1]);
      expect(answer).toContain("key=\n");
      expect(answer).toContain("notes.md");
      expect(JSON.stringify(requests)).not.toContain("sk-handler-test-secret");
    } finally {
      if (previous === undefined) delete process.env["OPENAI_API_KEY"];
      else process.env["OPENAI_API_KEY"] = previous;
    }
  });

  it("kills a script that ignores SIGTERM at its timeout, with its whole process group", async () => {
    const { outcome, requests } = await run(
      {
        rules: [
          { match: { turn: 1 }, toolCalls: [{ name: "run_script", arguments: { argv: stubborn(SLEEP_A) } }] },
          { match: { hasToolResult: "timed out after 300 ms; the process group was killed" }, reply: "it hung" },
        ],
      },
      { tools: ["run_script"], scriptTimeoutMs: 300, scriptKillGraceMs: 100 },
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "it hung" });
    const [, child] =
      /--- stdout ---\n(\d+) (\d+)\n/
        .exec(toolMessages(requests[1])[0] ?? "")
        ?.slice(1)
        .map(Number) ?? [];
    expect(child).toBeGreaterThan(0);
    await noneRunning(`sleep ${SLEEP_A}`);
  });

  it("kills a running script's process group when the task is cancelled", async () => {
    const pidFile = `pids-${randomUUID()}.txt`;
    await using stack = await startStack({
      url: server.url,
      script: {
        rules: [
          { match: { turn: 1 }, toolCalls: [{ name: "run_script", arguments: { argv: stubborn(SLEEP_A + 1000, ` > ${pidFile}`) } }] },
          { reply: "never" },
        ],
      },
      config: { workspaceRoot: workspace, tools: ["run_script"], scriptKillGraceMs: 100, reparse: false },
    });
    const taskId = newTaskId();
    const watch = stack.client.watch(taskId, () => undefined);
    await stack.transport.bus.flush();
    await stack.client.submit({ xml: TASK, taskId });
    await pollUntil(async () => {
      const ids = (await readFile(join(workspace, pidFile), "utf8").catch(() => "")).trim().split(" ").map(Number);
      return ids.length === 2 && ids.every((id) => id > 0) ? ids : undefined;
    }, "the script's pids");
    expect(pidsRunning(`sleep ${SLEEP_A + 1000}`)).toHaveLength(1);
    expect((await stack.client.cancel(taskId)).cancelled).toBe(true);
    expect((await watch.result).status).toBe("CANCELLED");
    await watch.close();
    await noneRunning(`sleep ${SLEEP_A + 1000}`);
    expect(stack.mock.requests).toHaveLength(1);
  });

  it("keeps at most scriptOutputMaxBytes of a script's stdout and notes what it dropped", async () => {
    const { outcome, requests } = await run(
      {
        rules: [
          {
            match: { turn: 1 },
            toolCalls: [{ name: "run_script", arguments: { argv: ["sh", "-c", "head -c 5000 /dev/zero | tr '\\000' x; echo err >&2"] } }],
          },
          { match: { hasToolResult: "exit code 0" }, reply: "capped" },
        ],
      },
      { tools: ["run_script"], scriptOutputMaxBytes: 100 },
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "capped" });
    expect(toolMessages(requests[1])[0]).toBe(
      `exit code 0\n--- stdout ---\n${"x".repeat(100)}\n[truncated: 4900 more bytes dropped]\n--- stderr ---\nerr\n`,
    );
  });

  it("cuts a read_file of a file larger than readMaxBytes, naming the offset to read on from", async () => {
    const { outcome, requests } = await run(
      {
        rules: [
          { match: { turn: 1 }, toolCalls: [{ name: "read_file", arguments: { path: "big.txt" } }] },
          { match: { hasToolResult: "truncated" }, reply: "read part" },
        ],
      },
      { readMaxBytes: 100 },
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "read part" });
    const body = "lorem ipsum dolor sit amet ".repeat(200);
    expect(toolMessages(requests[1])[0]).toBe(
      `${body.slice(0, 100)}\n[truncated: bytes 0–100 of ${body.length}; call read_file with offset 100 for more]`,
    );
  });

  it("fails with model_error once the model exceeds the malformed tool call budget", async () => {
    const { outcome, requests } = await run(
      { rules: [{ toolCalls: [{ name: "no_such_tool", arguments: {} }] }] },
      { maxMalformedToolCalls: 2 },
    );
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "model_error" });
    expect(outcome.error?.message).toContain("3 malformed tool calls");
    expect(requests).toHaveLength(3);
  });
});

describe("handler limits", () => {
  it("ends with RESOURCE_EXHAUSTION turns at the turn limit, with the partial content", async () => {
    const { outcome, requests } = await run(
      { rules: [{ reply: "still looking", toolCalls: [{ name: "list_files", arguments: {} }] }] },
      { maxTurns: 2 },
    );
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      type: "RESOURCE_EXHAUSTION",
      resource: "turns",
      metrics: { used: 2, limit: 2 },
      content: "still looking",
    });
    expect(requests).toHaveLength(2);
  });

  it("ends with RESOURCE_EXHAUSTION context before sending more than the limit, after a warning", async () => {
    const { outcome, requests, events } = await run(
      {
        rules: [
          { match: { turn: 1 }, reply: "reading", toolCalls: [{ name: "read_file", arguments: { path: "big.txt" } }] },
          { reply: "never" },
        ],
      },
      // Without the continuation tools, whose definitions alone would fill this tiny window.
      { contextWindowTokens: 1000, maxContextWindowFraction: 0.5, warningThreshold: 0.2, continuationTools: [] },
    );
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "RESOURCE_EXHAUSTION", resource: "context", metrics: { limit: 500 }, content: "reading" });
    const used = outcome.error?.type === "RESOURCE_EXHAUSTION" ? (outcome.error.metrics?.used ?? 0) : 0;
    expect(used).toBeGreaterThan(500);
    expect(requests).toHaveLength(1);
    expect(events.some((e) => e.type === "context.warning")).toBe(true);
  });

  it("ends with RESOURCE_EXHAUSTION output when the model stops at its length limit", async () => {
    const { outcome } = await run({
      rules: [{ reply: "a long answer that was cu", finishReason: "length", usage: { completion_tokens: 32 } }],
    });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({
      type: "RESOURCE_EXHAUSTION",
      resource: "output",
      metrics: { used: 32, limit: 32 },
      content: "a long answer that was cu",
    });
  });

  it("sends DIRIGENT_MAX_OUTPUT_TOKENS as max_tokens and reports it as the output limit when the model is cut there", async () => {
    const { outcome, requests } = await run({ rules: [{ reply: "a long answer that goes on and on" }] }, { maxOutputTokens: 5 });
    expect(requests[0]?.["max_tokens"]).toBe(5);
    expect(outcome.error).toMatchObject({
      type: "RESOURCE_EXHAUSTION",
      resource: "output",
      metrics: { used: 5, limit: 5 },
      content: "a long answer that g",
    });
  });
});

describe("handler model faults", () => {
  it("recovers from a 429 storm, reporting each retry, and prices the usage", async () => {
    const { outcome, events, requests } = await run(
      {
        rules: [
          { status: 429, times: 3 },
          { reply: "after the storm", usage: { prompt_tokens: 1000, completion_tokens: 500 } },
        ],
      },
      { modelMaxRetries: 3, modelPrices: { "mock-model": { input: 2, output: 10 } } },
    );
    expect(outcome).toMatchObject({
      status: "COMPLETE",
      content: "after the storm",
      notes: { usage: { promptTokens: 1000, completionTokens: 500 }, cost: 0.007 },
    });
    expect(requests).toHaveLength(4);
    const retries = events.filter((e) => e.type === "model.retry");
    expect(retries.map((e) => e.data?.["status"])).toEqual([429, 429, 429]);
    expect(events.find((e) => e.type === "model.turn")?.data).toMatchObject({ cost: 0.007 });
  });

  it("fails with model_error after N retries of persistent 500s", async () => {
    const { outcome, requests, events } = await run({ rules: [{ status: 500, error: "boom" }] }, { modelMaxRetries: 2 });
    expect(outcome.status).toBe("FAILED");
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "model_error" });
    expect(outcome.error?.message).toMatch(/after 3 attempts: 500 boom/);
    expect(requests).toHaveLength(3);
    expect(events.filter((e) => e.type === "model.retry")).toHaveLength(2);
  });

  it("keeps the partial content of an earlier turn when a later model call fails for good", async () => {
    const { outcome, requests } = await run(
      {
        rules: [
          { match: { turn: 1 }, reply: "partial findings so far", toolCalls: [{ name: "list_files", arguments: {} }] },
          { status: 500, error: "boom" },
        ],
      },
      { modelMaxRetries: 1 },
    );
    expect(outcome).toMatchObject({ status: "FAILED", content: "partial findings so far" });
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "model_error", content: "partial findings so far" });
    expect(outcome.error?.message).toMatch(/after 2 attempts: 500 boom/);
    expect(requests).toHaveLength(3);
  });

  it("retries a request that timed out", async () => {
    const { outcome, events } = await run(
      { rules: [{ reply: "slow", delayMs: 10_000, times: 1 }, { reply: "in time" }] },
      { modelTimeoutMs: 200, modelMaxRetries: 2 },
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "in time" });
    expect(events.find((e) => e.type === "model.retry")?.message).toMatch(/timed out/i);
  });

  it("retries connection errors, then fails with model_error", async () => {
    const gone = await startMockLlm({ port: 0 });
    await gone.close();
    const { outcome, events } = await run({ rules: [] }, { openaiBaseUrl: gone.url, modelMaxRetries: 1 });
    expect(outcome.error).toMatchObject({ type: "TASK_FAILURE", reason: "model_error" });
    expect(outcome.error?.message).toMatch(/after 2 attempts: Connection error/);
    expect(events.filter((e) => e.type === "model.retry")).toHaveLength(1);
  });

  it("cancels a task waiting out a retry backoff", async () => {
    await using stack = await startStack({
      url: server.url,
      script: { rules: [{ status: 503 }] },
      config: { workspaceRoot: workspace, modelMaxRetries: 5, modelRetryBaseMs: 600_000, modelRetryMaxMs: 600_000 },
    });
    const taskId = newTaskId();
    const events = new Recorder<TaskEvent>();
    const watch = stack.client.watch(taskId, (e) => events.push(e));
    await stack.transport.bus.flush();
    await stack.client.submit({ xml: TASK, taskId });
    await events.until((v) => v.some((e) => e.type === "model.retry"), "the first retry");
    expect((await stack.client.cancel(taskId)).cancelled).toBe(true);
    expect((await watch.result).status).toBe("CANCELLED");
    expect(stack.mock.requests).toHaveLength(1);
    await watch.close();
  });
});

describe("handler streaming", () => {
  it("publishes the answer as model.delta events when streaming is on, tool calls included", async () => {
    const { outcome, events, requests } = await run(
      {
        rules: [
          { match: { turn: 1 }, toolCalls: [{ name: "read_file", arguments: '{"path": "notes.md"}' }] },
          { match: { hasToolResult: "Tuesday" }, reply: "The meeting is on Tuesday.", usage: { prompt_tokens: 30, completion_tokens: 7 } },
        ],
      },
      { streamDeltas: true },
    );
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "The meeting is on Tuesday." });
    expect(outcome.notes?.["turns"]).toBe(2);
    expect(events.filter((e) => e.type === "model.turn").at(-1)?.data).toMatchObject({ usage: { promptTokens: expect.any(Number) } });
    expect(mockUsageOfLastTurn(events)).toBe(7);
    const deltas = events.filter((e) => e.type === "model.delta").map((e) => String(e.data?.["text"]));
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("The meeting is on Tuesday.");
    expect(requests.every((r) => r.stream === true)).toBe(true);
  });
});
