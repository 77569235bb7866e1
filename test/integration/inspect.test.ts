/**
 * Inspection end to end in one process (in-process bus): the roles publish their actors, the inspector server
 * aggregates them and answers the page's data endpoints; and, over a real nats-server, finished tasks are replayed
 * from the events stream.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import { createSubjects } from "../../protocol/index.js";
import { machineGraph } from "../../runtime/charts/graph.js";
import { machines } from "../../runtime/charts/registry.js";
import { startInspectServer, type InspectServer } from "../../runtime/inspect/server.js";
import { natsTaskReplay } from "../../runtime/inspect/replay.js";
import type { ActorView, TaskView, TimelineEntry } from "../../runtime/inspect/state.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";

const SECRET = "sk-inspect-4f9a-never-show-me";
const xml = "<task><description>Say hello to {{name}}</description></task>";

describe("inspector over the in-process bus", () => {
  let stack: Stack;
  let server: InspectServer;
  const raw: string[] = [];
  const taskId = newTaskId();

  beforeAll(async () => {
    const rules = [
      { match: { lastUser: "hello" }, reply: "Hello, Ada" },
      // A session that asks for a subtask (CONTINUATION), then answers with its result.
      {
        match: { lastUser: { regex: "^PARENT" }, turn: 1 },
        toolCalls: [{ name: "run_subtask", arguments: { type: "atomic", description: "CHILD name a city" } }],
      },
      { match: { lastUser: { regex: "^CHILD" } }, reply: "Oslo" },
      { match: { lastUser: "LEAK" }, status: 400, error: `invalid request: the key ${SECRET} is not allowed here` },
      { match: { lastUser: { regex: "^PARENT" }, hasToolResult: { regex: "Oslo" } }, reply: "Visit Oslo" },
    ];
    stack = await startStack({ config: { inspect: true, openaiApiKey: SECRET }, script: { rules } });
    stack.transport.bus.subscribe(createSubjects(stack.root).anyInspect, (msg) => void raw.push(new TextDecoder().decode(msg.data)));
    server = await startInspectServer({ bus: stack.transport.bus, subjects: createSubjects(stack.root), port: 0 });
    const outcome = await stack.client.run({ taskId, xml, inputs: { name: "Ada" } });
    expect(outcome.status).toBe("COMPLETE");
    await stack.transport.bus.flush();
  });

  afterAll(async () => {
    await server?.close();
    await stack?.stop();
  });

  const get = async <T>(path: string): Promise<{ status: number; body: T }> => {
    const res = await fetch(new URL(path, server.url));
    return { status: res.status, body: (await res.json()) as T };
  };

  it("never shows the API key set in the config in any inspection message", () => {
    expect(raw.length).toBeGreaterThan(20);
    for (const message of raw) expect(message).not.toContain(SECRET);
    const machinesSeen = new Set(raw.map((m) => (JSON.parse(m) as { machine?: string }).machine).filter(Boolean));
    expect([...machinesSeen]).toEqual(expect.arrayContaining(["task", "evaluation", "handlerSession"]));
  });

  it("serves every machine's chart", async () => {
    const { body } = await get<Array<{ name: string; id: string; svg: string }>>("/api/machines");
    expect(body.map((m) => m.name)).toEqual(machines.map((m) => m.name));
    const task = body.find((m) => m.name === "task");
    for (const state of machineGraph(machines.find((m) => m.name === "task")!.machine).states)
      expect(task?.svg).toContain(`data-state="${state.id}"`);
  });

  it("lists the actors of every role with their current state, and the task with its final state", async () => {
    const { body } = await get<{ actors: ActorView[]; tasks: TaskView[] }>("/api/state");
    const taskActor = body.actors.find((a) => a.taskId === taskId && a.machine === "task");
    expect(taskActor).toMatchObject({ role: "director", isMachine: true, snapshot: { status: "done", value: "completed" } });
    expect(body.actors.find((a) => a.taskId === taskId && a.machine === "handlerSession")).toMatchObject({
      role: "handler",
      snapshot: { status: "done" },
    });
    const task = body.tasks.find((t) => t.taskId === taskId);
    expect(task).toMatchObject({ state: "completed", status: "COMPLETE" });
    expect(task?.roles).toEqual(expect.arrayContaining(["director", "evaluator", "handler"]));
    expect(task?.nodes).toContain("0");
  });

  it("filters by task id, role and process", async () => {
    const byRole = await get<{ actors: ActorView[] }>("/api/state?role=handler");
    expect(byRole.body.actors.length).toBeGreaterThan(0);
    expect(new Set(byRole.body.actors.map((a) => a.role))).toEqual(new Set(["handler"]));
    const byTask = await get<{ actors: ActorView[]; tasks: TaskView[] }>(`/api/state?task=${taskId}`);
    expect(byTask.body.tasks.map((t) => t.taskId)).toEqual([taskId]);
    expect(byTask.body.actors.every((a) => a.taskId === taskId)).toBe(true);
    const byProcess = await get<{ actors: ActorView[] }>("/api/state?process=nowhere:0");
    expect(byProcess.body.actors).toEqual([]);
  });

  it("answers one task with its timeline of lifecycle and machine events, and 404 for an unknown one", async () => {
    const { body } = await get<{ timeline: TimelineEntry[]; actors: ActorView[] }>(`/api/tasks/${taskId}`);
    const types = body.timeline.map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(["task.running", "model.turn", "task.completed", "result.complete", "task.start"]));
    expect(body.timeline.find((e) => e.type === "model.turn")).toMatchObject({ kind: "task", nodePath: "0" });
    expect(body.actors.length).toBeGreaterThan(2);
    expect((await get("/api/tasks/no-such-task")).status).toBe(404);
  });

  it("answers a task's node records and one node's conversation, asked of the Director, with an HTTP status per error", async () => {
    const list = await get<{ taskId: string; nodes: Array<{ path: string; name: string; state: string }> }>(`/api/tasks/${taskId}/nodes`);
    expect(list.status).toBe(200);
    expect(list.body.nodes).toEqual([expect.objectContaining({ path: "0", state: "completed", name: "say hello to" })]);
    const node = await get<{ node: { path: string }; conversations: Array<{ messages: Array<{ role: string; content: string | null }> }> }>(
      `/api/tasks/${taskId}/node?path=0&occurrence=1`,
    );
    expect(node.status).toBe(200);
    expect(node.body.node.path).toBe("0");
    expect(node.body.conversations[0]?.messages.map((m) => [m.role, m.content])).toEqual(
      expect.arrayContaining([
        ["user", expect.stringContaining("Say hello to Ada")],
        ["assistant", "Hello, Ada"],
      ]),
    );
    expect(await get(`/api/tasks/no-such-task/nodes`)).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    expect(await get(`/api/tasks/${taskId}/node?path=9.steps.9`)).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    expect((await get(`/api/tasks/${taskId}/node`)).status).toBe(400);
    expect((await get(`/api/tasks/${taskId}/node?path=0&occurrence=0`)).status).toBe(400);
  });

  it("shows a subtask in the task tree and the task machine passing through awaitingSubtask", async () => {
    const parent = newTaskId();
    const outcome = await stack.client.run({ taskId: parent, xml: "<task><description>PARENT plan a trip</description></task>" });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "Visit Oslo" });
    await stack.transport.bus.flush();
    const { body } = await get<TaskView & { timeline: TimelineEntry[]; actors: ActorView[] }>(`/api/tasks/${parent}`);
    expect(body.nodes).toEqual(expect.arrayContaining(["0", "0/subtask1:0"]));
    expect(body.timeline.map((e) => e.type)).toContain("continuation.subtask");
    expect(body.actors.filter((a) => a.machine === "handlerSession").length).toBeGreaterThanOrEqual(2);
    // The walk is one actor system: the subtask's evaluation is a child of the task's root evaluation.
    const evaluations = body.actors.filter((a) => a.role === "evaluator" && a.machine === "evaluation");
    const root = evaluations.find((a) => a.parentId === undefined);
    expect(evaluations.map((a) => a.parentId ?? "root")).toEqual(expect.arrayContaining(["root", root?.actorId]));
    expect(evaluations.length).toBe(2);
    for (const evaluation of evaluations) expect(evaluation.rootId).toBe(root?.actorId);
    const values = raw
      .map((m) => JSON.parse(m) as { taskId?: string; machine?: string; snapshot?: { value?: unknown } })
      .filter((m) => m.taskId === parent && m.machine === "task");
    expect(values.map((m) => m.snapshot?.value)).toContainEqual({ running: "awaitingSubtask" });
  });

  it("pushes changes as Server-Sent Events", async () => {
    const res = await fetch(new URL("/api/stream", server.url));
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const second = newTaskId();
    const run = stack.client.run({ taskId: second, xml, inputs: { name: "Bo" } });
    let text = "";
    while (!text.includes(`"${second}"`)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    await reader.cancel();
    expect(text).toMatch(/^data: \{"actors":/m);
    expect((await run).status).toBe("COMPLETE");
  });

  it("never shows the API key placed inside a task's input or inside a model's error message", async () => {
    const inInput = newTaskId();
    const inError = newTaskId();
    expect((await stack.client.run({ taskId: inInput, xml, inputs: { name: `Ada (key ${SECRET})` } })).status).toBe("COMPLETE");
    expect((await stack.client.run({ taskId: inError, xml: "<task><description>LEAK the key</description></task>" })).status).not.toBe(
      "COMPLETE",
    );
    await stack.transport.bus.flush();
    const of = (taskId: string) => raw.filter((m) => m.includes(`"taskId":"${taskId}"`));
    // The secret did reach the machines (the input in the contexts, the error in events and contexts) and was masked.
    expect(of(inInput).some((m) => m.includes("Ada (key [redacted])"))).toBe(true);
    expect(of(inError).some((m) => m.includes("the key [redacted] is not allowed"))).toBe(true);
    for (const message of raw) expect(message).not.toContain(SECRET);
  });

  it("serves the page from the package with no reference to another origin", async () => {
    for (const path of ["/", "/app.js", "/dom.js", "/task-tree.js", "/app.css"]) {
      const res = await fetch(new URL(path, server.url));
      expect(res.status).toBe(200);
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(await res.text()).not.toMatch(/(https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i);
    }
  });
});

describe("inspector replay from the events stream", () => {
  let nats: TestNatsServer;
  beforeAll(async () => {
    nats = await startTestNatsServer();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  it("lists finished tasks and answers their timeline, read back from JetStream", async () => {
    const taskId = newTaskId();
    const root = `insp${Date.now()}`;
    {
      await using stack = await startStack({ url: nats.url, root, script: { rules: [{ match: { lastUser: "hello" }, reply: "Hello" }] } });
      expect((await stack.client.run({ taskId, xml, inputs: { name: "Cy" } })).status).toBe("COMPLETE");
    }
    const nc = await connect({ servers: nats.url });
    const { NatsBus } = await import("../../runtime/nats/bus.js");
    const bus = new NatsBus(nc, { onError: () => undefined });
    const subjects = createSubjects(root);
    await using server = await startInspectServer({ bus, subjects, port: 0, replay: natsTaskReplay(nc, subjects) });
    const state = (await (await fetch(new URL("/api/state", server.url))).json()) as { tasks: TaskView[] };
    expect(state.tasks.find((t) => t.taskId === taskId)).toMatchObject({ state: "completed", status: "COMPLETE", replayed: true });
    const task = (await (await fetch(new URL(`/api/tasks/${taskId}`, server.url))).json()) as { timeline: TimelineEntry[] };
    expect(task.timeline.map((e) => e.type)).toEqual(
      expect.arrayContaining(["task.queued", "task.running", "task.completed", "result.complete"]),
    );
    await server.close();
    await bus.close();
  });
});
