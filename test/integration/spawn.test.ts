/**
 * Sessions that fan out, over a real nats-server with the mock model: a session spawns subtasks (spawn_subtask),
 * keeps working, collects their results (await_subtasks) and finishes with them; the subtasks run at the same time
 * (the mock model holds each one's answer at a gate until all of them have asked); cancel_subtask, the cancelling
 * of the ones a finished session never awaited, and of every one when the task is cancelled. The spawn tools are
 * not offered by default (`DIRIGENT_CONTINUATION_TOOLS`): the stacks here offer them; one checks the default.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../../protocol/index.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { newTaskId, startStack } from "../support/stack.js";

let server: TestNatsServer;
let mock: MockLlmServer;
const lines: string[] = [];
const watchers: Array<() => void> = [];

const spawn = (description: string) => ({ name: "spawn_subtask", arguments: { type: "atomic", description } });
const atomic = (description: string) => `<task type="atomic"><description>${description}</description></task>`;

/** Resolves once the mock has logged `count` lines containing `text`. */
function logged(text: string, count: number): Promise<void> {
  const enough = () => lines.filter((l) => l.includes(text)).length >= count;
  if (enough()) return Promise.resolve();
  return new Promise((resolve) => {
    const check = () => {
      if (!enough()) return;
      watchers.splice(watchers.indexOf(check), 1);
      resolve();
    };
    watchers.push(check);
  });
}

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    log: (line) => {
      lines.push(line);
      for (const check of [...watchers]) check();
    },
    script: {
      rules: [
        // Three spawns, one per turn, then an await of them all, then an answer made of their results.
        { match: { lastUser: { regex: "^FANOUT" }, turn: 1 }, toolCalls: [spawn("WORKER alpha")] },
        { match: { lastUser: { regex: "^FANOUT" }, turn: 2 }, toolCalls: [spawn("WORKER beta")] },
        { match: { lastUser: { regex: "^FANOUT" }, turn: 3 }, toolCalls: [spawn("WORKER gamma")] },
        { match: { lastUser: { regex: "^FANOUT" }, turn: 4 }, toolCalls: [{ name: "await_subtasks", arguments: {} }] },
        { match: { lastUser: { regex: "^FANOUT" }, turn: 5 }, reply: "collected: {{lastUser}}" },
        // Each worker's answer waits until all three workers have asked: they only finish if they run at once.
        { match: { lastUser: { regex: "^WORKER alpha" } }, gate: { name: "workers", count: 3 }, reply: "A-result" },
        { match: { lastUser: { regex: "^WORKER beta" } }, gate: { name: "workers", count: 3 }, reply: "B-result" },
        { match: { lastUser: { regex: "^WORKER gamma" } }, gate: { name: "workers", count: 3 }, reply: "C-result" },
        // Workers that never answer (their gate never fills): cancelled by cancel_subtask, the session's end, the task's cancel.
        { match: { lastUser: { regex: "^STUCK" } }, gate: { name: "never", count: 1000 }, reply: "never" },
        { match: { lastUser: { regex: "^QUITTER" }, turn: 1 }, toolCalls: [spawn("STUCK one")] },
        { match: { lastUser: { regex: "^QUITTER" }, turn: 2 }, toolCalls: [spawn("STUCK two")] },
        { match: { lastUser: { regex: "^QUITTER" }, turn: 3 }, toolCalls: [{ name: "cancel_subtask", arguments: { handle: "s1" } }] },
        { match: { lastUser: { regex: "^QUITTER" }, turn: 4 }, reply: "gave up" },
        { match: { lastUser: { regex: "^WAITER" }, turn: 1 }, toolCalls: [spawn("STUCK three")] },
        { match: { lastUser: { regex: "^WAITER" }, turn: 2 }, toolCalls: [spawn("STUCK four")] },
        { match: { lastUser: { regex: "^WAITER" }, turn: 3 }, toolCalls: [{ name: "await_subtasks", arguments: {} }] },
      ],
      default: { reply: "echo:{{lastUser}}" },
    },
  });
});

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

/** The tool responses the last request of the session whose prompt starts with `marker` carried. */
function toolResponses(marker: string): string[] {
  const last = mock.requests.findLast((r) => JSON.stringify(r.body).includes(marker));
  const messages = (last?.body as { messages: { role: string; content: string | null }[] }).messages;
  return messages.filter((m) => m.role === "tool").map((m) => m.content ?? "");
}

describe("spawned subtasks over NATS", () => {
  it("spawns three subtasks that run at the same time, awaits them, and finishes with their results", async () => {
    await using s = await startStack({ url: server.url, mock, config: { continuationTools: ["subtask", "spawn", "input"] } });
    const events: TaskEvent[] = [];
    const outcome = await s.client.run({ xml: atomic("FANOUT three workers"), taskId: newTaskId() }, (e) => events.push(e));
    expect(outcome).toMatchObject({ status: "COMPLETE", notes: { spawned_subtasks: 3 } });
    expect(outcome.notes).not.toHaveProperty("cancelled_subtasks");
    // The session got its handles at once, then every result from the await.
    const responses = toolResponses("FANOUT three workers");
    expect(responses.slice(0, 3)).toEqual(['{"handle":"s1"}', '{"handle":"s2"}', '{"handle":"s3"}']);
    expect(JSON.parse(responses[3] ?? "")).toEqual({
      s1: { status: "complete", content: "A-result" },
      s2: { status: "complete", content: "B-result" },
      s3: { status: "complete", content: "C-result" },
    });
    // Each spawned subtask runs under a node path of its own.
    const started = events.filter((e) => e.type === "node.started").map((e) => e.data?.["nodePath"]);
    expect(started).toEqual(expect.arrayContaining(["0", "0/spawn1:0", "0/spawn2:0", "0/spawn3:0"]));
    expect(events.filter((e) => e.type === "continuation.spawn").map((e) => e.data?.["handle"])).toEqual(["s1", "s2", "s3"]);
  });

  it("cancels a spawned subtask on cancel_subtask and the one a finished session never awaited", async () => {
    await using s = await startStack({ url: server.url, mock, config: { continuationTools: ["subtask", "spawn", "input"] } });
    const outcome = await s.client.run({ xml: atomic("QUITTER two stuck workers"), taskId: newTaskId() });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "gave up", notes: { spawned_subtasks: 2, cancelled_subtasks: ["s2"] } });
    expect(JSON.parse(toolResponses("QUITTER two stuck workers")[2] ?? "")).toEqual({ handle: "s1", status: "cancelled", content: "" });
  });

  it("offers the spawn tools only when configured", async () => {
    await using plain = await startStack({ url: server.url, mock });
    await plain.client.run({ xml: atomic("PLAIN hello"), taskId: newTaskId() });
    const offered = (marker: string) => {
      const request = mock.requests.findLast((r) => JSON.stringify(r.body).includes(marker));
      return ((request?.body as { tools?: { function: { name: string } }[] }).tools ?? []).map((t) => t.function.name);
    };
    expect(offered("PLAIN hello")).toContain("run_subtask");
    expect(offered("PLAIN hello")).not.toContain("spawn_subtask");
    await using fanning = await startStack({ url: server.url, mock, config: { continuationTools: ["spawn"] } });
    await fanning.client.run({ xml: atomic("SPAWNER hello"), taskId: newTaskId() });
    expect(offered("SPAWNER hello").filter((name) => !["read_file", "list_files"].includes(name))).toEqual([
      "spawn_subtask",
      "await_subtasks",
      "cancel_subtask",
    ]);
  });

  it("cancels every spawned subtask when the task is cancelled", async () => {
    await using s = await startStack({ url: server.url, mock, config: { continuationTools: ["subtask", "spawn", "input"] } });
    const taskId = newTaskId();
    const before = lines.filter((l) => l.includes("aborted by client at gate 'never'")).length;
    const held = lines.filter((l) => l.includes("at gate 'never'") && !l.includes("aborted")).length;
    const run = s.client.run({ xml: atomic("WAITER two stuck workers"), taskId });
    // Both workers are at the gate and the session awaits them.
    await logged("at gate 'never'", held + before + 2);
    expect(await s.client.cancel(taskId)).toMatchObject({ taskId, cancelled: true });
    expect(await run).toMatchObject({ status: "CANCELLED" });
    await logged("aborted by client at gate 'never'", before + 2);
  });
});
