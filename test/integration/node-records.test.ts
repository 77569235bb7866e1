/**
 * Node records end to end over a real nats-server and the mock model (through the `openai` SDK): a three-step
 * sequential task whose first step calls a tool leaves one record per node, with its name, its own usage, and for
 * each step its conversation (the messages as sent, the tool call's arguments and result); the events say when each
 * node finished and what it cost; a secret in an input, a tool's answer and the model's answer is in no record or event.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decode, NodeRecord, TurnRecord, type TaskEvent } from "../../protocol/index.js";
import type { MockScript } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { RemoteError } from "../../runtime/client.js";
import { pollUntil } from "../support/process-group.js";
import { startCli } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack } from "../support/stack.js";

const SECRET = "sk-records-SECRET-424242";

const TASK = `<task type="sequential">
  <description>Report on the notes.</description>
  <inputs><input name="topic" from="topic"/></inputs>
  <steps>
    <task name="gather"><description>Read the notes about {{topic}} with read_file.</description></task>
    <task><description>Summarise the notes in three bullets: {{previous_result}}</description></task>
    <task>
      <description>Write a title for the summary.</description>
      <inputs><input name="summary" from="step_results[1]"/></inputs>
    </task>
  </steps>
</task>`;

const USAGE = { prompt_tokens: 100, completion_tokens: 10 };

const SCRIPT: MockScript = {
  rules: [
    { match: { lastUser: "read_file", turn: 1 }, toolCalls: [{ name: "read_file", arguments: { path: "notes.md" } }], usage: USAGE },
    {
      match: { hasToolResult: true },
      reply: `The notes say Tuesday; key ${SECRET}.`,
      usage: { prompt_tokens: 200, completion_tokens: 20 },
    },
    { match: { lastUser: "Summarise" }, reply: "- one\n- two\n- three", usage: { prompt_tokens: 300, completion_tokens: 30 } },
  ],
  default: { reply: "A title", usage: { prompt_tokens: 400, completion_tokens: 40 } },
};

let server: TestNatsServer;
let workspace: string;

beforeAll(async () => {
  server = await startTestNatsServer();
  workspace = await mkdtemp(join(tmpdir(), "dirigent-records-ws-"));
  await writeFile(join(workspace, "notes.md"), `The meeting is on Tuesday. Token: ${SECRET}\n`);
});

afterAll(async () => {
  await server?.stop();
  await rm(workspace, { recursive: true, force: true });
});

describe("node records", () => {
  it("records every node of a sequential task with its name, usage and conversation, and masks secrets", async () => {
    await using stack = await startStack({
      url: server.url,
      script: SCRIPT,
      config: { workspaceRoot: workspace, openaiApiKey: SECRET, tools: ["read_file"], reparse: false },
    });
    const taskId = newTaskId();
    const events = new Recorder<TaskEvent>();
    const outcome = await stack.client.run({ xml: TASK, taskId, inputs: { topic: `the plan (${SECRET})` } }, (e) => events.push(e));
    expect(outcome.status).toBe("COMPLETE");
    await events.until((v) => v.some((e) => e.type === "task.completed"), "the final event");

    const turns = stack.transport.turns;
    if (!turns?.keys) throw new Error("the turns store cannot list");
    const keys = await turns.keys(`${taskId}.node.*`);
    const raw = await Promise.all(keys.map(async (key) => new TextDecoder().decode(await turns.get(key))));
    const records = raw.map((text) => {
      const decoded = decode(NodeRecord, new TextEncoder().encode(text));
      if (!decoded.ok) throw decoded.error;
      return decoded.value;
    });
    const byPath = new Map(records.map((r) => [r.path, r]));
    expect([...byPath.keys()].sort()).toEqual(["0", "0.steps.0", "0.steps.1", "0.steps.2"]);
    expect(byPath.get("0")).toMatchObject({ name: "report on the notes", kind: "sequential", state: "completed" });
    expect(byPath.get("0")?.usage).toBeUndefined();
    expect(byPath.get("0.steps.0")).toMatchObject({
      name: "step 1 · gather",
      kind: "atomic",
      state: "completed",
      usage: { promptTokens: 300, completionTokens: 30 },
      models: ["mock-model"],
    });
    expect(byPath.get("0.steps.1")).toMatchObject({
      name: "step 2 · summarise the notes in three bullets",
      usage: { promptTokens: 300, completionTokens: 30 },
      output: { status: "COMPLETE", content: "- one\n- two\n- three" },
    });
    expect(byPath.get("0.steps.2")).toMatchObject({
      name: "step 3 · write a title for the summary",
      inputs: { summary: expect.objectContaining({ content: "- one\n- two\n- three", status: "COMPLETE" }) },
      usage: { promptTokens: 400, completionTokens: 40 },
    });
    for (const r of records) {
      expect(Date.parse(r.endedAt)).toBeGreaterThanOrEqual(Date.parse(r.startedAt));
      expect(r.durationMs).toBeGreaterThanOrEqual(0);
    }

    // The first step's conversation: the messages as sent, the tool call with its arguments and result, per-call usage.
    const [sessionKey] = byPath.get("0.steps.0")?.sessions ?? [];
    if (sessionKey === undefined) throw new Error("the first step names no session record");
    const sessionBytes = await turns.get(sessionKey);
    const session = sessionBytes && decode(TurnRecord, sessionBytes);
    if (!session?.ok || session.value.status !== "done") throw new Error("no finished session record");
    const conversation = session.value.conversation;
    expect(conversation?.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
    expect(conversation?.messages[1]).toMatchObject({ role: "user", content: expect.stringContaining("Read the notes about the plan") });
    expect(conversation?.toolCalls).toEqual([
      expect.objectContaining({
        turn: 1,
        tool: "read_file",
        source: "builtin",
        arguments: JSON.stringify({ path: "notes.md" }),
        result: expect.stringContaining("The meeting is on Tuesday"),
        malformed: false,
      }),
    ]);
    expect(conversation?.turns.map((t) => [t.turn, t.usage, t.sent])).toEqual([
      [1, { promptTokens: 100, completionTokens: 10 }, 2],
      [2, { promptTokens: 200, completionTokens: 20 }, 4],
    ]);

    // Events: node.finished per node, tool.call with arguments and result, model.turn usage per message.
    const finished = events.values.filter((e) => e.type === "node.finished");
    expect(finished.map((e) => e.data?.["nodePath"]).sort()).toEqual(["0", "0.steps.0", "0.steps.1", "0.steps.2"]);
    expect(finished.find((e) => e.data?.["nodePath"] === "0.steps.1")?.data).toMatchObject({
      name: "step 2 · summarise the notes in three bullets",
      status: "COMPLETE",
      durationMs: expect.any(Number),
      usage: { promptTokens: 300, completionTokens: 30 },
      preview: "- one\n- two\n- three",
    });
    expect(events.values.find((e) => e.type === "tool.call")?.data).toMatchObject({
      tool: "read_file",
      arguments: JSON.stringify({ path: "notes.md" }),
      result: expect.stringContaining("The meeting is on Tuesday"),
    });
    const firstStepTurns = events.values.filter((e) => e.type === "model.turn" && e.data?.["nodePath"] === "0.steps.0");
    expect(firstStepTurns.map((e) => [e.data?.["usage"], e.data?.["sessionUsage"]])).toEqual([
      [
        { promptTokens: 100, completionTokens: 10 },
        { promptTokens: 100, completionTokens: 10 },
      ],
      [
        { promptTokens: 200, completionTokens: 20 },
        { promptTokens: 300, completionTokens: 30 },
      ],
    ]);

    // The same, read as a client reads it: the list of nodes and one node with its conversation.
    const listed = await stack.client.nodes(taskId);
    expect(listed.nodes.map((n) => [n.path, n.name, n.state])).toEqual([
      ["0", "report on the notes", "completed"],
      ["0.steps.0", "step 1 · gather", "completed"],
      ["0.steps.1", "step 2 · summarise the notes in three bullets", "completed"],
      ["0.steps.2", "step 3 · write a title for the summary", "completed"],
    ]);
    expect(listed.nodes[1]).toMatchObject({ usage: { promptTokens: 300, completionTokens: 30 }, models: ["mock-model"] });
    const detail = await stack.client.node(taskId, "0.steps.0");
    expect(detail.node).toEqual(byPath.get("0.steps.0"));
    expect(detail.conversations).toEqual([conversation]);
    expect(detail.retries).toBe(0);
    // The error names the nodes there are, in the order they started.
    await expect(stack.client.node(taskId, "0.steps.9")).rejects.toMatchObject({
      code: "NOT_FOUND",
      message: expect.stringContaining("has no record of node '0.steps.9'; its nodes: 0, 0.steps.0, 0.steps.1, 0.steps.2"),
    });
    await expect(stack.client.nodes(newTaskId())).rejects.toMatchObject({ code: "NOT_FOUND" });

    // `dirigent show` prints the tree and a node's conversation from another process.
    const flags = ["--nats", server.url, "--prefix", stack.root];
    const tree = startCli(["show", taskId, ...flags]);
    expect(await tree.exited).toBe(0);
    expect(tree.stdout()).toMatch(/^task \S+: 4 nodes, 1100 tokens/);
    expect(tree.stdout()).toMatch(/\n {2}0\.steps\.0 {2}step 1 · gather {2}\[atomic\] completed in .* 330 tokens/);
    const one = startCli(["show", taskId, "--node", "0.steps.0", ...flags]);
    expect(await one.exited).toBe(0);
    expect(one.stdout()).toContain("[user]");
    expect(one.stdout()).toMatch(/→ read_file\n\s+\{\n\s+"path": "notes.md"/);
    expect(one.stdout()).toMatch(/\[tool\] read_file \(builtin\) in /);
    expect(one.stdout()).not.toContain(SECRET);

    // The secret was in an input, a file the tool read and the model's answer: masked everywhere it was kept.
    const session1 = new TextDecoder().decode(sessionBytes);
    expect(session1).toContain("[redacted]");
    for (const text of [...raw, session1, JSON.stringify(events.values), JSON.stringify(detail), tree.stdout()])
      expect(text).not.toContain(SECRET);
  });

  it("records each branch of a map over a list under its own path and name", async () => {
    await using stack = await startStack({ url: server.url, script: SCRIPT, config: { reparse: false } });
    const taskId = newTaskId();
    const xml = `<task type="map" over="files" as="path">
      <inputs><input name="files" from="files"/></inputs>
      <steps><task><description>Summarise {{path}}.</description></task></steps>
    </task>`;
    expect((await stack.client.run({ xml, taskId, inputs: { files: ["a.md", "b.md", "c.md"] } })).status).toBe("COMPLETE");
    const { nodes } = await stack.client.nodes(taskId);
    expect(nodes.map((n) => [n.path, n.name, n.kind]).sort()).toEqual([
      ["0", "map", "map"],
      ["0/map:0:0.steps.0", "branch 1 · summarise", "atomic"],
      ["0/map:1:0.steps.0", "branch 2 · summarise", "atomic"],
      ["0/map:2:0.steps.0", "branch 3 · summarise", "atomic"],
    ]);
    const branch = await stack.client.node(taskId, "0/map:1:0.steps.0");
    expect(branch.node.output.content).toBe("- one\n- two\n- three");
    expect(branch.conversations[0]?.messages.find((m) => m.role === "user")?.content).toContain("Summarise b.md.");
  });

  it("answers EXPIRED once a finished task's records aged out of the turns bucket", async () => {
    await using stack = await startStack({ url: server.url, script: SCRIPT, config: { recordsMaxAgeMs: 1500, reparse: false } });
    const taskId = newTaskId();
    expect((await stack.client.run({ xml: "<task><description>Say hi</description></task>", taskId })).status).toBe("COMPLETE");
    const err = await pollUntil(
      () =>
        stack.client.nodes(taskId).then(
          () => undefined,
          (e: unknown) => (e instanceof RemoteError && e.code === "EXPIRED" ? e : undefined),
        ),
      "the records to expire",
    );
    expect(err.message).toMatch(new RegExp(`node records of task '${taskId}' have expired.*DIRIGENT_RECORDS_MAX_AGE_MS`));
    await expect(stack.client.node(taskId, "0")).rejects.toMatchObject({ code: "EXPIRED" });
  });
});
