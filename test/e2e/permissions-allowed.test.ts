/**
 * Per-role users and permissions (runtime/nats/conf/permissions.ts), what they allow, against a real nats-server started
 * with the production form of the authorization block (test/support/permissions-stack.ts): every role connects as its
 * own user and a task and a goal complete end to end without a single permission violation; a worker process runs a
 * role as its user from NATS_USER and NATS_PASSWORD. Inspection is on: every runtime role publishes its actors'
 * inspection messages, which the read-only `inspector` user receives, and that user replays finished tasks from the
 * events stream. (test/e2e/permissions-refused.test.ts checks what they refuse.)
 */
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { decode, TaskEvent, TaskOutcome } from "../../protocol/index.js";
import type { InspectMessage } from "../../protocol/inspect.js";
import { DirigentClient } from "../../runtime/client.js";
import { GoalClient } from "../../runtime/goal-client.js";
import { natsTaskReplay } from "../../runtime/inspect/replay.js";
import { startInspectServer } from "../../runtime/inspect/server.js";
import type { TaskView } from "../../runtime/inspect/state.js";
import { NatsBus, type NatsConnection } from "../../runtime/nats/bus.js";
import { openNatsTransport } from "../../runtime/transport.js";
import { RUNTIME, usePermissionsStack } from "../support/permissions-stack.js";
import { startCli } from "../support/processes.js";
import { newTaskId } from "../support/stack.js";

// Submissions and inputs may exceed one message (2 MB here): they travel by reference through the bodies bucket.
const stack = usePermissionsStack({
  config: {
    maxSubmissionBytes: 8 * 1024 * 1024,
    maxInputBytes: 8 * 1024 * 1024,
    contextWindowTokens: 20_000_000,
    maxContextWindowFraction: 1,
  },
});
const { root, subjects, passwords, transports, systems, as, violations, connectAs } = stack;

describe("each role as its own user", () => {
  it("runs a task end to end, with get, cancel and its node records from a submitter, and no permission violation", async () => {
    const client = await openNatsTransport(stack.server.url, subjects, {
      name: "perm-submitter",
      log: silentLogger,
      auth: as("submitter"),
      roles: [],
    });
    transports.push(client);
    const api = new DirigentClient(client.bus, subjects);
    const taskId = newTaskId();
    const outcome = await api.run({ taskId, xml: "<task><description>Say something permitted</description></task>" });
    expect(outcome).toMatchObject({ taskId, status: "COMPLETE", content: "permitted answer" });
    expect(await api.get(taskId)).toMatchObject({ taskId, state: "completed" });
    expect(await api.cancel(taskId)).toMatchObject({ taskId, cancelled: false });
    // The node records: listed by a Director from the turns bucket the Evaluator wrote them to.
    expect((await api.nodes(taskId)).nodes).toEqual([expect.objectContaining({ path: "0", state: "completed" })]);
    expect((await api.node(taskId, "0")).conversations).toHaveLength(1);
    // What a Director reads of the events stream: a redelivered final task's result, a task's last event.
    const director = transports[3];
    expect(director?.lastPublished).toBeDefined();
    if (director?.lastPublished) {
      expect(decode(TaskOutcome, (await director.lastPublished(subjects.taskResult(taskId))) ?? new Uint8Array(0))).toMatchObject({
        ok: true,
        value: { taskId },
      });
      expect(decode(TaskEvent, (await director.lastPublished(subjects.taskEvents(taskId))) ?? new Uint8Array(0))).toMatchObject({
        ok: true,
        value: { state: "completed" },
      });
      expect(await director.lastPublished(subjects.taskResult(newTaskId()))).toBeUndefined();
    }
    expect(violations()).toEqual([]);
  });

  it("carries a 3 MB input from a submitter through every role by reference, with no permission violation", async () => {
    const client = await openNatsTransport(stack.server.url, subjects, {
      name: "perm-large",
      log: silentLogger,
      auth: as("submitter"),
      roles: [],
    });
    transports.push(client);
    expect(client.bus.maxMessageBytes).toBeLessThan(3_000_000);
    const doc = "permitted ".repeat(300_000);
    const outcome = await new DirigentClient(client.bus, subjects).run({
      taskId: newTaskId(),
      xml: "<task><description>{{doc}}</description></task>",
      inputs: { doc },
    });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "permitted answer" });
    expect(violations()).toEqual([]);
  });

  it("runs a task longer than the keepalive interval: keepalives and answers reach the requesting roles", async () => {
    const client = await openNatsTransport(stack.server.url, subjects, {
      name: "perm-submitter-slow",
      log: silentLogger,
      auth: as("submitter"),
      roles: [],
    });
    transports.push(client);
    const outcome = await new DirigentClient(client.bus, subjects).run({ xml: "<task><description>Answer slowly</description></task>" });
    expect(outcome).toMatchObject({ status: "COMPLETE", content: "slow answer" });
    expect(violations()).toEqual([]);
  });

  it("runs a goal for a submitter: the supervisor user decomposes it, runs its task and stores it, with no violation", async () => {
    const client = await openNatsTransport(stack.server.url, subjects, {
      name: "perm-submitter-goal",
      log: silentLogger,
      auth: as("submitter"),
      roles: [],
    });
    transports.push(client);
    const goals = new GoalClient(client.bus, subjects);
    const events: string[] = [];
    let completed!: () => void;
    const done = new Promise<void>((resolve) => (completed = resolve));
    goals.events("perm-goal", (e) => {
      events.push(e.type);
      if (e.type === "goal.completed") completed();
    });
    await client.bus.flush();
    expect(await goals.submit({ goalId: "perm-goal", description: "PERMITTED-GOAL" })).toEqual({ goalId: "perm-goal", status: "accepted" });
    await done;
    const { goal } = await goals.get("perm-goal");
    expect(goal.subGoals.map((s) => [s.description, s.status])).toEqual([["PERMITTED-STEP", "completed"]]);
    expect((await goals.list()).goals.map((g) => g.id)).toContain("perm-goal");
    expect(violations()).toEqual([]);
  });

  it("lets the memory user write, replace and read the file index", async () => {
    const memory = transports[0];
    if (!memory) throw new Error("no memory transport");
    const entry = (path: string) => ({ path, metadata: `file ${path}`, stamp: "1" });
    await memory.index.updateGlobalIndex([entry("/a.txt")]);
    await memory.index.updateGlobalIndex([entry("/b.txt")]);
    expect((await memory.index.getGlobalIndex()).entries.map((e) => e.path)).toEqual(["/b.txt"]);
    expect(violations()).toEqual([]);
  });
});

describe("the inspector user", () => {
  const busOf = (nc: NatsConnection) => new NatsBus(nc, { onError: () => undefined });

  it("receives the inspection messages of a task from every role, live, and replays it from the events stream", async () => {
    const nc = await connectAs("inspector");
    const taskId = newTaskId();
    const roles = new Set<string>();
    let seenAll: () => void = () => undefined;
    const allRoles = new Promise<void>((resolve) => (seenAll = resolve));
    const onMessage = (m: InspectMessage) => {
      if (m.taskId !== taskId) return;
      roles.add(m.role);
      if (["director", "evaluator", "handler"].every((role) => roles.has(role))) seenAll();
    };
    const replayErrors: unknown[] = [];
    const replay = natsTaskReplay(nc, subjects);
    {
      await using live = await startInspectServer({
        bus: busOf(nc),
        subjects,
        port: 0,
        replay,
        onMessage,
        onReplayError: (err) => void replayErrors.push(err),
      });
      const client = await openNatsTransport(stack.server.url, subjects, {
        name: "perm-submitter-inspect",
        log: silentLogger,
        auth: as("submitter"),
        roles: [],
      });
      transports.push(client);
      expect(
        await new DirigentClient(client.bus, subjects).run({ taskId, xml: "<task><description>Be inspected</description></task>" }),
      ).toMatchObject({ status: "COMPLETE" });
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`inspection messages seen only from [${[...roles].join(", ")}]; violations: ${violations().join("\n")}`)),
          10_000,
        );
      });
      await Promise.race([allRoles, deadline]).finally(() => clearTimeout(timer));
      expect(
        live.state
          .view()
          .actors.filter((a) => a.taskId === taskId)
          .map((a) => a.machine),
      ).toEqual(expect.arrayContaining(["task", "evaluation", "handlerSession"]));
    }
    // Finished: a new inspector reads it back from the events stream, as this user.
    const stored = await replay.task(taskId);
    expect(stored.map((m) => m.subject)).toEqual(expect.arrayContaining([subjects.taskEvents(taskId), subjects.taskResult(taskId)]));
    expect(stored.at(-1)?.subject).toBe(subjects.taskResult(taskId));
    await using later = await startInspectServer({
      bus: busOf(nc),
      subjects,
      port: 0,
      replay,
      onReplayError: (err) => void replayErrors.push(err),
    });
    const state = (await (await fetch(new URL("/api/state", later.url))).json()) as { tasks: TaskView[]; replayError?: string };
    expect(state.replayError).toBeUndefined();
    expect(state.tasks.find((t) => t.taskId === taskId)).toMatchObject({ state: "completed", status: "COMPLETE", replayed: true });
    expect(replayErrors).toEqual([]);
    expect(violations()).toEqual([]);
  });

  it("forks an ended task through its page's Re-run from here (POST /api/tasks/<id>/rerun), with no permission violation", async () => {
    const client = await openNatsTransport(stack.server.url, subjects, {
      name: "perm-submitter-rerun",
      log: silentLogger,
      auth: as("submitter"),
      roles: [],
    });
    transports.push(client);
    const api = new DirigentClient(client.bus, subjects);
    const taskId = newTaskId();
    const xml = `<task type="sequential"><steps>
      <task><description>Say something permitted</description></task>
      <task><description>Say something else permitted</description></task>
    </steps></task>`;
    expect(await api.run({ taskId, xml })).toMatchObject({ status: "COMPLETE" });
    const nc = await connectAs("inspector");
    await using page = await startInspectServer({ bus: busOf(nc), subjects, port: 0, replay: natsTaskReplay(nc, subjects) });
    const forkId = newTaskId();
    const fork = api.watch(forkId);
    try {
      const answer = await fetch(new URL(`/api/tasks/${taskId}/rerun`, page.url), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ from: "0.steps.1", taskId: forkId }),
      });
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({ taskId: forkId, status: "accepted", forkOf: { taskId, from: "0.steps.1" }, replayed: 1 });
      expect(await fork.result).toMatchObject({ taskId: forkId, status: "COMPLETE" });
    } finally {
      await fork.close();
    }
    // The page reads the fork's nodes as it reads any task's.
    const nodes = (await (await fetch(new URL(`/api/tasks/${forkId}/nodes`, page.url))).json()) as { nodes: { path: string }[] };
    expect(nodes.nodes.map((n) => n.path)).toEqual(["0", "0.steps.0", "0.steps.1"]);
    expect(violations()).toEqual([]);
  });

  it("receives what each runtime role publishes under its own role name", async () => {
    const nc = await connectAs("inspector");
    const received: string[] = [];
    // Only the test's own messages ("{}"): the running roles publish real inspection messages too (the
    // Supervisor's reconciliation tick, for one).
    const sub = nc.subscribe(subjects.anyInspect, { callback: (_err, msg) => void (msg.string() === "{}" && received.push(msg.subject)) });
    await nc.flush();
    for (const role of RUNTIME) {
      const publisher = await connectAs(role);
      publisher.publish(subjects.inspect(role, "snapshot"), "{}");
      // Once the server has routed it, the inspector's own flush returns after the message.
      await publisher.flush();
    }
    await nc.flush();
    sub.unsubscribe();
    expect(received.sort()).toEqual(RUNTIME.map((role) => subjects.inspect(role, "snapshot")).sort());
    expect(violations()).toEqual([]);
  });
});

describe("Handlers passing work to each other", () => {
  it("lets a Handler user report its free slots to the others and pass a request to another's own subject", async () => {
    const [one, other] = [await connectAs("handler"), await connectAs("handler")];
    const received: string[] = [];
    for (const subject of [subjects.handlerLoad, subjects.handlerDirect("other", "execute")])
      other.subscribe(subject, { callback: (_err, msg) => void received.push(msg.subject) });
    await other.flush();
    one.publish(subjects.handlerLoad, JSON.stringify({ type: "handler.load", handler: "one", free: { execute: 1, script: 1 } }));
    one.publish(subjects.handlerDirect("other", "execute"), "{}");
    await one.flush();
    await other.flush();
    expect(received).toEqual([subjects.handlerLoad, subjects.handlerDirect("other", "execute")]);
    expect(violations()).toEqual([]);
  });
});

describe("dirigent worker", () => {
  it("runs a role as its user from NATS_USER and NATS_PASSWORD, and a task completes through it", async () => {
    const env = {
      NATS_USER: as("evaluator").user,
      NATS_PASSWORD: passwords.evaluator,
      OPENAI_BASE_URL: stack.mock.url,
      DIRIGENT_LOG_LEVEL: "warn",
    };
    const worker = startCli(["worker", "--role", "evaluator", "--nats", stack.server.url, "--prefix", root], env);
    try {
      await worker.waitFor(/ready/);
      // Stop the in-process Evaluator, so the task has to go through the worker process.
      const inProcess = systems[2];
      if (!inProcess) throw new Error("no evaluator system");
      await inProcess.stop();
      const client = await openNatsTransport(stack.server.url, subjects, {
        name: "perm-submitter-2",
        log: silentLogger,
        auth: as("submitter"),
        roles: [],
      });
      transports.push(client);
      const outcome = await new DirigentClient(client.bus, subjects).run({
        xml: "<task><description>Through the worker</description></task>",
      });
      expect(outcome).toMatchObject({ status: "COMPLETE", content: "permitted answer" });
      expect(violations()).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});
