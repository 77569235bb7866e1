/**
 * Node records across processes and crashes: two Directors, an Evaluator and a Handler each in its own `dirigent
 * worker` process on a real nats-server, the scripted mock model in this process. A sequential task whose steps are a
 * session with a tool call, a map and a session that runs a subtask loses its owning Director (`kill -9`) while the
 * map's branches are at the model and its Handler (`kill -9`) while the subtask is; it completes, and every node's
 * record is there, completed, with the conversations the model was sent and answered. The API key the roles run with,
 * placed in the task's input and in a model's error, is in no record, no event and no role's log.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decode, NodeRecord, TurnRecord } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer, type RecordedRequest } from "../../runtime/model/mock-server.js";
import { JetStreamWorkQueue } from "../../runtime/nats/queue.js";
import { seenMessage } from "../support/conversation.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { pollUntil } from "../support/process-group.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { follow } from "../support/durability.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";

const SECRET = `sk-records-${randomBytes(12).toString("hex")}`;
const ACK_WAIT_MS = 1500;
/** A gate no count reaches: the calls held there wait until the test opens it, once its kill has landed. */
const held = (name: string) => ({ name, count: 1000 });

const TASK = `<task type="sequential">
  <description>Survey, map and plan.</description>
  <inputs><input name="topic" from="topic"/><input name="files" from="files"/></inputs>
  <steps>
    <task><description>TOOLY list the workspace for {{topic}}, then say so.</description></task>
    <task type="map" over="files" as="path">
      <steps><task><description>MAPPED {{path}}</description></task></steps>
    </task>
    <task><description>PARENT plan with a subtask.</description></task>
  </steps>
</task>`;

let server: TestNatsServer;
let mock: MockLlmServer;
let stack: Stack;
let root: string;
const directors: CliProcess[] = [];
const processes: CliProcess[] = [];

const env = {
  OPENAI_API_KEY: SECRET,
  DIRIGENT_MODEL_MAX_RETRIES: "0",
  DIRIGENT_REPARSE: "off",
  DIRIGENT_LOG_LEVEL: "info",
  DIRIGENT_ACK_WAIT_MS: String(ACK_WAIT_MS),
};

function worker(role: string): CliProcess {
  const p = startCli(["worker", "--role", role, "--nats", server.url, "--prefix", root, "--concurrency", "4"], {
    ...env,
    OPENAI_BASE_URL: mock.url,
  });
  processes.push(p);
  return p;
}

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "LEAK" }, status: 400, error: `invalid request: the key ${SECRET} is not allowed here` },
        { match: { lastUser: { regex: "^TOOLY" }, turn: 1 }, toolCalls: [{ name: "list_files", arguments: { path: "." } }] },
        { match: { lastUser: { regex: "^TOOLY" }, hasToolResult: true }, reply: "listed" },
        { match: { lastUser: { regex: "^MAPPED" } }, reply: "mapped", gate: held("map") },
        {
          match: { lastUser: { regex: "^PARENT" }, turn: 1 },
          toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "CHILD name a city" } }],
        },
        { match: { lastUser: { regex: "^CHILD" } }, reply: "Oslo", gate: held("child") },
        { match: { lastUser: { regex: "^PARENT" }, hasToolResult: { regex: "Oslo" } }, reply: "plan: Oslo" },
      ],
      default: { reply: "unexpected" },
    },
  });
  root = randomRoot();
  // The client (and Memory) opens the intake first: the last process to open it sets its ack wait (the Directors').
  stack = await startStack({ url: server.url, mock, root, roles: ["memory"], config: { openaiApiKey: SECRET } });
  directors.push(worker("director"), worker("director"));
  worker("evaluator");
  worker("handler");
  await Promise.all(processes.map((p) => p.waitFor(/ready/)));
}, 120_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await stack?.stop();
  await mock?.close();
  await server?.stop();
});

/** Every stored record of `taskId` as text: its node records and the session records they name. */
async function storedRecords(taskId: string): Promise<{ nodes: NodeRecord[]; texts: string[] }> {
  const turns = stack.transport.turns;
  if (!turns?.keys) throw new Error("the turns store cannot list");
  const texts: string[] = [];
  const nodes: NodeRecord[] = [];
  for (const key of await turns.keys(`${taskId}.node.*`)) {
    const bytes = await turns.get(key);
    if (!bytes) continue;
    texts.push(new TextDecoder().decode(bytes));
    const decoded = decode(NodeRecord, bytes);
    if (!decoded.ok) throw decoded.error;
    nodes.push(decoded.value);
    for (const session of decoded.value.sessions ?? []) {
      const record = await turns.get(session);
      if (!record) throw new Error(`the session record ${session} of ${decoded.value.path} is missing`);
      expect(decode(TurnRecord, record).ok).toBe(true);
      texts.push(new TextDecoder().decode(record));
    }
  }
  return { nodes, texts };
}

/** The model answers of the conversations of `path`, each model call's messages checked against a request the model got. */
async function answersOf(taskId: string, path: string): Promise<string[]> {
  const detail = await stack.client.node(taskId, path);
  const answers: string[] = [];
  // A record keeps the messages masked: the key the input carried into the prompt is `[redacted]` there.
  const requests = mock.requests.map((r: RecordedRequest) =>
    JSON.stringify(r.body.messages.map(seenMessage)).replaceAll(SECRET, "[redacted]"),
  );
  for (const conversation of detail.conversations)
    for (const turn of conversation.turns) {
      const sent = JSON.stringify(conversation.messages.slice(0, turn.sent).map((m) => seenMessage(m as Record<string, unknown>)));
      expect(requests, `the model call of turn ${turn.turn} of ${path}`).toContain(sent);
      const answer = conversation.messages[turn.sent];
      if (answer?.role !== "assistant") throw new Error(`turn ${turn.turn} of ${path} recorded no answer`);
      answers.push(answer.content ? answer.content : (answer.tool_calls ?? []).map((c) => c.function.name).join(","));
    }
  return answers;
}

const lastUser = (r: RecordedRequest) => String([...r.body.messages].reverse().find((m) => m["role"] === "user")?.["content"] ?? "");
const requestsFor = (token: string) => mock.requests.filter((r) => lastUser(r).startsWith(token));

describe("node records across processes", () => {
  it("of a model error carrying the API key: the node's record and the events have it masked", { timeout: 120_000 }, async () => {
    const taskId = newTaskId();
    const { events, results } = await follow(stack, taskId);
    await stack.client.submit({ taskId, xml: "<task><description>LEAK this</description></task>" });
    await results.count(1, "the result", 60_000);
    expect(results.values[0]).toMatchObject({ status: "FAILED" });
    await events.until((v) => v.some((e) => e.type === "task.failed"), "the final event");
    const { nodes, texts } = await storedRecords(taskId);
    expect(nodes.map((n) => [n.path, n.state])).toEqual([["0", "failed"]]);
    const error = nodes[0]?.error;
    expect(error && "message" in error ? error.message : "").toContain("[redacted]");
    for (const text of [...texts, JSON.stringify(events.values), JSON.stringify(results.values)]) expect(text).not.toContain(SECRET);
  });

  it(
    "survive a Director and a Handler killed mid-task: every node recorded, matching what the model was sent and answered",
    { timeout: 240_000 },
    async () => {
      const taskId = newTaskId();
      const { events, results } = await follow(stack, taskId);
      await stack.client.submit({ taskId, xml: TASK, inputs: { topic: `the plan (${SECRET})`, files: ["x.md", "y.md"] } });

      // The map's two branches are at the model: kill the Director that owns the task.
      await pollUntil(() => (requestsFor("MAPPED").length === 2 ? true : undefined), "the map's model calls", 60_000);
      const claimed = new RegExp(`"taskId":"${taskId}"[^\\n]*"task claimed"`);
      const owner = directors.find((d) => claimed.test(d.output()));
      if (!owner) throw new Error("no Director claimed the task");
      owner.child.kill("SIGKILL");
      await owner.exited;
      mock.openGate("map");
      await events.until((v) => v.some((e) => e.type === "task.resumed"), "the resume", 60_000);

      // The subtask is at the model: start a second Handler, kill the first.
      await pollUntil(() => (requestsFor("CHILD").length >= 1 ? true : undefined), "the subtask's model call", 60_000);
      const first = processes.find((p) => p.child.spawnargs.includes("handler"));
      if (!first) throw new Error("no Handler");
      await worker("handler").waitFor(/ready/);
      first.child.kill("SIGKILL");
      await first.exited;
      mock.openGate("child");

      await results.count(1, "the result", 120_000);
      expect(results.values[0]).toMatchObject({ taskId, status: "COMPLETE", content: "plan: Oslo" });
      // Nothing signals "no second result": wait until the intake message is acked, then look.
      const queue = stack.transport.queue;
      if (!(queue instanceof JetStreamWorkQueue)) throw new Error("expected the JetStream work queue");
      await pollUntil(async () => ((await queue.size()) === 0 ? true : undefined), "the intake message to be acked");
      await stack.transport.bus.flush();
      expect(results.values).toHaveLength(1);
      // What ended before a kill was not asked again; the subtask's call, in flight at the Handler's kill, was.
      expect(requestsFor("TOOLY")).toHaveLength(2);
      expect(requestsFor("MAPPED").length).toBeLessThanOrEqual(4);
      expect(requestsFor("CHILD").length).toBeGreaterThanOrEqual(2);

      // Every node, recorded once per evaluation, completed.
      const branch = (n: number) => `0.steps.1/map:${n}:0.steps.1.steps.0`;
      const child = "0.steps.2/subtask1:0";
      const { nodes } = await stack.client.nodes(taskId);
      expect(nodes.map((n) => [n.path, n.occurrence, n.state]).sort()).toEqual(
        [
          ["0", 1, "completed"],
          ["0.steps.0", 1, "completed"],
          ["0.steps.1", 1, "completed"],
          [branch(0), 1, "completed"],
          [branch(1), 1, "completed"],
          ["0.steps.2", 1, "completed"],
          [child, 1, "completed"],
        ].sort(),
      );
      // Each model call in a record is one the model received, with the answer it gave.
      expect(await answersOf(taskId, "0.steps.0")).toEqual(["list_files", "listed"]);
      expect(await answersOf(taskId, branch(0))).toEqual(["mapped"]);
      expect(await answersOf(taskId, branch(1))).toEqual(["mapped"]);
      expect(await answersOf(taskId, "0.steps.2")).toEqual(["run_subtask", "plan: Oslo"]);
      expect(await answersOf(taskId, child)).toEqual(["Oslo"]);
      const tooly = await stack.client.node(taskId, "0.steps.0");
      expect(tooly.conversations.flatMap((c) => c.toolCalls)).toEqual([
        expect.objectContaining({ tool: "list_files", arguments: JSON.stringify({ path: "." }), result: expect.any(String) }),
      ]);
      expect(tooly.conversations[0]?.messages[1]).toMatchObject({
        role: "user",
        content: "TOOLY list the workspace for the plan ([redacted]), then say so.",
      });

      // The key, in the input and so in the prompt, is in no record, no event and no role's log.
      const { texts } = await storedRecords(taskId);
      for (const text of [...texts, JSON.stringify(events.values), ...processes.map((p) => p.output())]) expect(text).not.toContain(SECRET);
    },
  );
});
