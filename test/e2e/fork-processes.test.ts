/**
 * Re-run and fork over a multi-process stack: a Director, an Evaluator and a Handler each in its own `dirigent worker`
 * process on a real nats-server, the scripted mock model in this process (so the test counts the requests it gets).
 * A fork from the step after a map answers the whole map from the original's records; a fork from a branch of a map
 * (one branch at a time) answers the branches before it and runs it and what follows; a fork of that fork works. A
 * fork from the step after a CONTINUATION subtask answers the parent session and the subtask from their records, with
 * no model call, and so does a fork of that fork. A fork's usage and cost, in its result and in `dirigent show`,
 * count only what it ran itself.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeSummary, TaskEvent, Usage } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type MockScript } from "../../runtime/model/mock-server.js";
import { seenMessage } from "../support/conversation.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

const MAP = `<task type="sequential">
  <description>Notes on the files.</description>
  <inputs><input name="files" from="files"/></inputs>
  <steps>
    <task type="map" over="files" as="path" max_parallel="1">
      <steps><task><description>MAPSUM summarise {{path}}.</description></task></steps>
    </task>
    <task><description>COMBINE the summaries: {{previous_result}}</description></task>
  </steps>
</task>`;

const SUBTASK = `<task type="sequential">
  <description>Plan a trip.</description>
  <steps>
    <task><description>PARENT plan a trip, asking a subtask for the cities.</description></task>
    <task><description>TITLE for {{previous_result}}</description></task>
  </steps>
</task>`;

const usage = (prompt: number, completion: number) => ({ prompt_tokens: prompt, completion_tokens: completion });

const SCRIPT: MockScript = {
  rules: [
    { match: { lastUser: "summarise a.md" }, reply: "sum of a", usage: usage(101, 11) },
    { match: { lastUser: "summarise b.md" }, reply: "sum of b", usage: usage(102, 12) },
    { match: { lastUser: "summarise c.md" }, reply: "sum of c", usage: usage(103, 13) },
    { match: { lastUser: "COMBINE" }, reply: "combined a, b and c", usage: usage(200, 20) },
    {
      match: { lastUser: { regex: "^PARENT" }, turn: 1 },
      toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "CHILD name three cities" } }],
      usage: usage(301, 31),
    },
    { match: { lastUser: { regex: "^CHILD" } }, reply: "Paris, Rome, Oslo", usage: usage(401, 41) },
    {
      match: { lastUser: { regex: "^PARENT" }, hasToolResult: { regex: "Paris, Rome, Oslo" } },
      reply: "Plan: Paris, Rome, Oslo",
      usage: usage(302, 32),
    },
    { match: { lastUser: "TITLE" }, reply: "Three capitals", usage: usage(500, 50) },
  ],
  default: { reply: "unexpected" },
};

/** Prices per 1M tokens: a prompt token costs 1e-6, a completion token 2e-6. */
const PRICES = JSON.stringify({ "mock-model": { input: 1, output: 2 } });

let server: TestNatsServer;
let mock: MockLlmServer;
let stack: Stack;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({ port: 0, script: SCRIPT });
  const root = randomRoot();
  // This process is the client (and Memory); each other role is a process of its own.
  stack = await startStack({ url: server.url, mock, root, roles: ["memory"] });
  const env = {
    OPENAI_BASE_URL: mock.url,
    OPENAI_API_KEY: "sk-fork-processes",
    DIRIGENT_MODEL: "mock-model",
    DIRIGENT_MODEL_PRICES: PRICES,
    DIRIGENT_MODEL_MAX_RETRIES: "0",
    DIRIGENT_REPARSE: "off",
  };
  for (const role of ["director", "evaluator", "handler"]) {
    processes.push(startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], env));
  }
  await Promise.all(processes.map((p) => p.waitFor(/ready/)));
}, 120_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await stack?.stop();
  await mock?.close();
  await server?.stop();
});

/** Runs `run` and answers its outcome with the model requests it made. */
async function counted<T>(run: () => Promise<T>): Promise<{ value: T; calls: number }> {
  const before = mock.requests.length;
  const value = await run();
  return { value, calls: mock.requests.length - before };
}

/** Forks `taskId` from `from`, following its events until its final one. */
async function fork(taskId: string, from: string) {
  const events = new Recorder<TaskEvent>();
  const { value, calls } = await counted(() => stack.client.runFork(taskId, { from }, (e) => events.push(e)));
  expect(value.status).toBe("COMPLETE");
  await events.until((v) => v.some((e) => e.type === "task.completed"), "the fork's final event");
  const replayed = events.values
    .filter((e) => e.type === "node.finished" && e.data?.["replayed"] === true)
    .map((e) => String(e.data?.["nodePath"]))
    .sort();
  return { outcome: value, taskId: value.taskId, calls, replayed };
}

/** The node list of a task as `[path, replayedFrom]`, sorted by path. */
async function listed(taskId: string): Promise<Array<[string, string | undefined]>> {
  const { nodes } = await stack.client.nodes(taskId);
  return nodes.map((n): [string, string | undefined] => [n.path, n.replayedFrom]).sort(([a], [b]) => a.localeCompare(b));
}

/** What `nodes` used, as the model reported it. */
function spent(nodes: readonly NodeSummary[]): { usage: Usage; cost: number } {
  const usage = { promptTokens: 0, completionTokens: 0 };
  let cost = 0;
  for (const n of nodes) {
    usage.promptTokens += n.usage?.promptTokens ?? 0;
    usage.completionTokens += n.usage?.completionTokens ?? 0;
    cost += n.cost ?? 0;
  }
  return { usage, cost };
}

/**
 * Each model call of each conversation of the node at `path` of `taskId` is one the mock model received: the messages
 * the record says were sent are those of a request, and the answer it recorded is the one that request got.
 */
async function matchesModel(taskId: string, path: string, answers: readonly string[]): Promise<void> {
  const detail = await stack.client.node(taskId, path);
  const recorded: string[] = [];
  for (const conversation of detail.conversations) {
    for (const turn of conversation.turns) {
      const sent = conversation.messages.slice(0, turn.sent).map((m) => seenMessage(m as Record<string, unknown>));
      const request = mock.requests.find((r) => JSON.stringify(r.body.messages.map((m) => seenMessage(m))) === JSON.stringify(sent));
      expect(request, `the model call of turn ${turn.turn} of ${path}`).toBeDefined();
      const answer = conversation.messages[turn.sent];
      expect(answer?.role).toBe("assistant");
      recorded.push(answer?.role === "assistant" ? (answer.content ?? answer.tool_calls?.map((c) => c.function.name).join(",") ?? "") : "");
    }
  }
  expect(recorded).toEqual(answers);
}

describe("a fork over a multi-process stack", () => {
  it(
    "of a map: from the step after it (the map replayed whole), from its last branch, and a fork of each fork",
    { timeout: 240_000 },
    async () => {
      const original = newTaskId();
      const first = await counted(() => stack.client.run({ xml: MAP, taskId: original, inputs: { files: ["a.md", "b.md", "c.md"] } }));
      expect(first.value).toMatchObject({ status: "COMPLETE", content: "combined a, b and c" });
      expect(first.calls).toBe(4);
      // The map's records are complete, and each branch's conversation is the call the model received.
      const branch = (n: number) => `0.steps.0/map:${n - 1}:0.steps.0.steps.0`;
      const { nodes } = await stack.client.nodes(original);
      expect(nodes.map((n) => [n.path, n.name, n.state])).toEqual([
        ["0", "notes on the files", "completed"],
        ["0.steps.0", "step 1 · map", "completed"],
        [branch(1), "branch 1 · mapsum summarise", "completed"],
        [branch(2), "branch 2 · mapsum summarise", "completed"],
        [branch(3), "branch 3 · mapsum summarise", "completed"],
        ["0.steps.1", "step 2 · combine the summaries", "completed"],
      ]);
      await matchesModel(original, branch(1), ["sum of a"]);
      await matchesModel(original, branch(2), ["sum of b"]);
      await matchesModel(original, branch(3), ["sum of c"]);
      await matchesModel(original, "0.steps.1", ["combined a, b and c"]);
      expect(spent(nodes).usage).toEqual(first.value.notes["task_usage"]);

      // From the step after the map: the map and its three branches are answered from the records; one model call.
      const after = await fork(original, "0.steps.1");
      expect(after.calls).toBe(1);
      expect(after.outcome.content).toBe("combined a, b and c");
      expect(after.replayed).toEqual(["0.steps.0", branch(1), branch(2), branch(3)]);
      // Its usage and cost are the one call it made; the replayed nodes' were paid by the original.
      expect(after.outcome.notes["task_usage"]).toEqual({ promptTokens: 200, completionTokens: 20 });
      expect(after.outcome.notes["task_cost"]).toBeCloseTo(200e-6 + 20 * 2e-6, 9);

      // From the last branch (the branches run one at a time): branches 1 and 2 replayed, branch 3 and step 2 live.
      const fromBranch = await fork(original, branch(3));
      expect(fromBranch.calls).toBe(2);
      expect(fromBranch.replayed).toEqual([branch(1), branch(2)]);
      expect(fromBranch.outcome.notes["task_usage"]).toEqual({ promptTokens: 303, completionTokens: 33 });
      expect(await listed(fromBranch.taskId)).toEqual([
        ["0", undefined],
        ["0.steps.0", undefined],
        [branch(1), original],
        [branch(2), original],
        [branch(3), undefined],
        ["0.steps.1", undefined],
      ]);

      // A fork of each fork, from step 2: the map and all its branches come from the fork's own records.
      for (const parent of [after.taskId, fromBranch.taskId]) {
        const again = await fork(parent, "0.steps.1");
        expect(again.calls).toBe(1);
        expect(again.outcome.content).toBe("combined a, b and c");
        expect(again.replayed).toEqual(["0.steps.0", branch(1), branch(2), branch(3)]);
        expect(await listed(again.taskId)).toEqual([
          ["0", undefined],
          ["0.steps.0", parent],
          [branch(1), parent],
          [branch(2), parent],
          [branch(3), parent],
          ["0.steps.1", undefined],
        ]);
      }
    },
  );

  it(
    "of a task whose first step ran a subtask: from the step after it, the parent's session and the subtask are replayed; a fork of that fork",
    { timeout: 240_000 },
    async () => {
      const original = newTaskId();
      const first = await counted(() => stack.client.run({ xml: SUBTASK, taskId: original }));
      expect(first.value).toMatchObject({ status: "COMPLETE", content: "Three capitals" });
      expect(first.calls).toBe(4);
      // The records: the parent's session (asked, suspended for the subtask, resumed with its answer), the subtask's.
      const child = "0.steps.0/subtask1:0";
      const { nodes } = await stack.client.nodes(original);
      expect(nodes.map((n) => [n.path, n.state])).toEqual([
        ["0", "completed"],
        ["0.steps.0", "completed"],
        [child, "completed"],
        ["0.steps.1", "completed"],
      ]);
      await matchesModel(original, "0.steps.0", ["run_subtask", "Plan: Paris, Rome, Oslo"]);
      await matchesModel(original, child, ["Paris, Rome, Oslo"]);
      await matchesModel(original, "0.steps.1", ["Three capitals"]);
      // Each node's usage is its own calls': the parent's two (not the resumed session's running total again).
      const byPath = new Map(nodes.map((n) => [n.path, n]));
      expect(byPath.get("0.steps.0")?.usage).toEqual({ promptTokens: 301 + 302, completionTokens: 31 + 32 });
      expect(byPath.get(child)?.usage).toEqual({ promptTokens: 401, completionTokens: 41 });
      expect(spent(nodes).usage).toEqual(first.value.notes["task_usage"]);
      expect(spent(nodes).cost).toBeCloseTo(Number(first.value.notes["task_cost"]), 9);

      const after = await fork(original, "0.steps.1");
      expect(after.calls).toBe(1);
      expect(after.outcome.content).toBe("Three capitals");
      expect(after.replayed).toEqual(["0.steps.0", child]);
      expect(after.outcome.notes["task_usage"]).toEqual({ promptTokens: 500, completionTokens: 50 });
      expect(await listed(after.taskId)).toEqual([
        ["0", undefined],
        ["0.steps.0", original],
        [child, original],
        ["0.steps.1", undefined],
      ]);
      // The replayed parent's record still leads to its conversation.
      expect((await stack.client.node(after.taskId, "0.steps.0")).conversations.flatMap((c) => c.turns)).toHaveLength(2);
      // A fork of the fork: the parent and its subtask come from the fork's own records.
      const again = await fork(after.taskId, "0.steps.1");
      expect(again.calls).toBe(1);
      expect(again.replayed).toEqual(["0.steps.0", child]);
      expect(await listed(again.taskId)).toEqual([
        ["0", undefined],
        ["0.steps.0", after.taskId],
        [child, after.taskId],
        ["0.steps.1", undefined],
      ]);

      // `dirigent show` of the fork: the total is what the fork ran; the replayed nodes' tokens are the original's.
      const show = startCli(["show", after.taskId, "--nats", server.url, "--prefix", stack.root]);
      expect(await show.exited).toBe(0);
      const text = show.stdout();
      expect(text).toMatch(
        new RegExp(
          `^task ${after.taskId}: 4 nodes, 550 tokens \\$0\\.0006 \\(2 replayed, 1108 tokens \\$0\\.0012 paid by the task they came from, not counted\\)\n`,
        ),
      );
      expect(text).toContain(
        `0.steps.0/subtask1:0  subtask 1 · child name three cities  [atomic] completed, replayed from ${original}  442 tokens $0.0005 (paid there)`,
      );
      expect(text).toMatch(/\n {2}0\.steps\.1 {2}step 2 · title for {2}\[atomic\] completed in \S+ m?s {2}550 tokens \$0\.0006\n/);
    },
  );
});
