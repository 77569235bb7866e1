/**
 * `dirigent a2a` driven by the A2A SDK's own client against a runtime on a real nats-server and the mock model: the
 * agent card, message/send, message/stream, tasks/get, tasks/cancel, an input-required round trip, a v0.3 client,
 * and the HTTP rules.
 */
import { randomUUID } from "node:crypto";
import { request } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Role, TaskState, type Message, type Part, type SendMessageResult, type Task } from "@a2a-js/sdk";
import { ClientFactory, type Client } from "@a2a-js/sdk/client";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { startStack, type Stack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let stack: Stack;
let dir: string;
let cli: CliProcess;
let url: string;
let client: Client;

const SUMMARY = "Actors exchange typed messages over NATS.";

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "HOLD" }, reply: "released", gate: { name: "hold", count: 1000 } },
        {
          match: { lastUser: { regex: "ASK" }, turn: 1 },
          toolCalls: [{ name: "request_user_input", arguments: { question: "Which city?" } }],
        },
        { match: { lastUser: { regex: "ASK" }, hasToolResult: { regex: "Paris" } }, reply: "Going to Paris" },
      ],
      default: { reply: SUMMARY, usage: { prompt_tokens: 40, completion_tokens: 9 } },
    },
  });
  dir = mkdtempSync(join(tmpdir(), "dirigent-a2a-"));
  writeFileSync(
    join(dir, "summarize.xml"),
    '<task name="summarize" type="atomic"><description>Summarize the key points of this text: {{text}}</description></task>',
  );
  stack = await startStack({ url: server.url, mock, config: { templates: dir } });
  cli = startCli(["a2a", "--port", "0", "--nats", server.url, "--prefix", stack.root, "--templates", dir]);
  url = (await cli.waitFor(/A2A agent on (http:\/\/\S+)/))[1] ?? "";
  client = await new ClientFactory().createFromUrl(url);
});

afterAll(async () => {
  await cli?.stop();
  await stack?.stop();
  await mock?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const text = (value: string): Part => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });

function message(parts: Part[], options: { skill?: string; taskId?: string } = {}): Message {
  return {
    messageId: randomUUID(),
    contextId: "",
    taskId: options.taskId ?? "",
    role: Role.ROLE_USER,
    parts,
    metadata: options.skill ? { skill: options.skill } : {},
    extensions: [],
    referenceTaskIds: [],
  };
}

const send = (m: Message) => ({ tenant: "", message: m, configuration: undefined, metadata: {} });

function asTask(result: SendMessageResult): Task {
  if (!("status" in result)) throw new Error(`expected a task, got a message: ${JSON.stringify(result)}`);
  return result;
}

const statusText = (task: Task) => task.status?.message?.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

describe("dirigent a2a", () => {
  it("serves an agent card whose skills are the library templates", async () => {
    const card = await client.getAgentCard();
    expect(card.name).toBe("dirigent");
    expect(card.capabilities?.streaming).toBe(true);
    expect(card.skills.map((s) => s.id)).toEqual(["summarize"]);
    expect(card.skills[0]?.description).toMatch(/Summarize the key points.*Inputs: text/);
  });

  it("message/send runs a skill as a dirigent task that keeps the A2A task's id, answering with the result as an artifact", async () => {
    const task = asTask(await client.sendMessage(send(message([text("dirigent")], { skill: "summarize" }))));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const parts = task.artifacts[0]?.parts ?? [];
    expect(parts[0]?.content).toEqual({ $case: "text", value: SUMMARY });
    expect(parts[1]?.content).toMatchObject({
      $case: "data",
      value: { status: "COMPLETE", usage: { promptTokens: 40, completionTokens: 9 } },
    });
    expect(mock.requests.some((r) => JSON.stringify(r).includes("this text: dirigent"))).toBe(true);
    expect(await stack.client.get(task.id)).toMatchObject({ taskId: task.id, state: "completed" });

    const got = await client.getTask({ tenant: "", id: task.id, historyLength: undefined });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("rejects a message naming no skill of the library", async () => {
    const task = asTask(await client.sendMessage(send(message([text("x")], { skill: "nope" }))));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(statusText(task)).toMatch(/no skill 'nope' \(skills: summarize\)/);
  });

  it("message/stream sends the task's events as status updates over SSE, then the result", async () => {
    const states: TaskState[] = [];
    const notes: string[] = [];
    const kinds: string[] = [];
    let artifact = "";
    for await (const event of client.sendMessageStream(send(message([text("Say hello")])))) {
      const p = event.payload;
      kinds.push(p?.$case === "task" ? `task ${p.value.status?.state ?? ""}` : (p?.$case ?? ""));
      if (p?.$case === "statusUpdate") {
        states.push(p.value.status?.state ?? TaskState.UNRECOGNIZED);
        notes.push(p.value.status?.message?.parts.map((x) => (x.content?.$case === "text" ? x.content.value : "")).join("") ?? "");
      }
      if (p?.$case === "artifactUpdate")
        artifact = p.value.artifact?.parts[0]?.content?.$case === "text" ? String(p.value.artifact.parts[0].content.value) : "";
    }
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(states.filter((s) => s === TaskState.TASK_STATE_WORKING).length).toBeGreaterThan(1);
    // The task is reported submitted, then the submission's answer, before any of the task's events.
    expect(kinds.slice(0, 2)).toEqual([`task ${TaskState.TASK_STATE_SUBMITTED}`, "statusUpdate"]);
    expect(notes[0]).toMatch(/^task \S+ submitted$/);
    expect(notes[1]).toMatch(/^task\.queued \(queued\)/);
    expect(notes).toContainEqual(expect.stringMatching(/^task\.completed \(completed\)/));
    expect(artifact).toBe(SUMMARY);
  });

  it("tasks/cancel cancels the dirigent task and ends the stream canceled", async () => {
    const stream = client.sendMessageStream(send(message([text("HOLD on")])));
    let taskId = "";
    const states: TaskState[] = [];
    for await (const event of stream) {
      const p = event.payload;
      if (p?.$case === "task") taskId = p.value.id;
      if (p?.$case === "statusUpdate") {
        states.push(p.value.status?.state ?? TaskState.UNRECOGNIZED);
        // Once the task runs (its model call is held at the gate), cancel it.
        if (/^task \S+ submitted$/.test(p.value.status?.message?.parts[0]?.content?.value ?? "")) {
          const cancelled = await client.cancelTask({ tenant: "", id: taskId, metadata: {} });
          expect(cancelled.id).toBe(taskId);
        }
      }
    }
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_CANCELED);
    expect(await stack.client.get(taskId)).toMatchObject({ state: "cancelled", result: { status: "CANCELLED" } });
  });

  it("maps a question of the task to input-required, answered by the next message", async () => {
    const asked = asTask(await client.sendMessage(send(message([text("ASK where to go")]))));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(statusText(asked)).toBe("Which city?");
    expect(await stack.client.get(asked.id)).toMatchObject({ state: "awaiting_input" });

    const done = asTask(await client.sendMessage(send(message([text("Paris")], { taskId: asked.id }))));
    expect(done.id).toBe(asked.id);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.artifacts[0]?.parts[0]?.content).toEqual({ $case: "text", value: "Going to Paris" });
  });

  it("cancels a task that waits for input", async () => {
    const asked = asTask(await client.sendMessage(send(message([text("ASK again")]))));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const cancelled = await client.cancelTask({ tenant: "", id: asked.id, metadata: {} });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const watch = stack.client.watch(asked.id);
    const status = await stack.client.get(asked.id);
    if (status.state !== "cancelled") expect((await watch.result).status).toBe("CANCELLED");
    await watch.close();
  });

  it("answers a v0.3 client's message/send", async () => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "message/send",
        params: { message: { kind: "message", messageId: randomUUID(), role: "user", parts: [{ kind: "text", text: "hello" }] } },
      }),
    });
    const body = (await res.json()) as {
      result?: { kind: string; id: string; status: { state: string }; artifacts: { parts: { text?: string }[] }[] };
    };
    expect(body.result).toMatchObject({ kind: "task", status: { state: "completed" } });
    expect(body.result?.artifacts[0]?.parts[0]?.text).toBe(SUMMARY);
  });

  it("answers only its own Host, and refuses to listen beyond loopback without a token", async () => {
    const { port } = new URL(url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port, path: "/.well-known/agent-card.json", headers: { host: `evil.example:${port}` } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(421);
    expect((await fetch(`${url}.well-known/agent-card.json`, { headers: { origin: "http://evil.example" } })).status).toBe(403);
    const refused = startCli(["a2a", "--port", "0", "--host", "0.0.0.0", "--nats", server.url, "--prefix", stack.root, "--templates", dir]);
    expect(await refused.exited).toBe(2);
    expect(refused.output()).toMatch(/not on loopback: give a bearer token with --token-file FILE/);
  });
});
