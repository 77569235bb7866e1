/**
 * Per-role users and permissions (runtime/nats/permissions.ts) against a real nats-server started with the production
 * form of the authorization block: every role connects as its own user and a task completes end to end without a
 * single permission violation; a submitter cannot reach internal subjects, the task records or the intake stream;
 * clients without credentials or with a wrong password are refused with a clear error. Also: `nats.conf` is not stale.
 * Inspection is on: every runtime role publishes its actors' inspection messages, which the read-only `inspector`
 * user receives, and that user replays finished tasks from the events stream.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Kvm } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { createSubjects, decode, TaskEvent, TaskOutcome } from "../../protocol/index.js";
import type { InspectMessage } from "../../protocol/inspect.js";
import { DirigentClient } from "../../runtime/client.js";
import { GoalClient } from "../../runtime/goal-client.js";
import { loadConfig, type Config } from "../../runtime/config.js";
import { place } from "../../runtime/nats/connect.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { natsTaskReplay } from "../../runtime/inspect/replay.js";
import { startInspectServer } from "../../runtime/inspect/server.js";
import type { TaskView } from "../../runtime/inspect/state.js";
import { connectNats, NatsBus, type NatsConnection } from "../../runtime/nats/bus.js";
import {
  GENERATED_BEGIN,
  GENERATED_END,
  NATS_ROLES,
  passwordVariable,
  renderAuthorization,
  renderDevAuthorization,
  type NatsRole,
} from "../../runtime/nats/permissions.js";
import { startSystem, type SystemHandle } from "../../runtime/system.js";
import { openNatsTransport, type OpenTransport } from "../../runtime/transport.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli } from "../support/processes.js";
import { newTaskId } from "../support/stack.js";

const root = randomRoot();
const subjects = createSubjects(root);
const passwords = Object.fromEntries(NATS_ROLES.map((role) => [role, randomBytes(12).toString("hex")])) as Record<NatsRole, string>;
const RUNTIME = ["memory", "handler", "evaluator", "director", "supervisor"] as const;

let server: TestNatsServer;
let mock: MockLlmServer;
let config: Config;
const transports: OpenTransport[] = [];
const systems: SystemHandle[] = [];
const connections: NatsConnection[] = [];

const as = (role: NatsRole) => ({ user: role, pass: passwords[role] });
const violations = () =>
  server
    .stderr()
    .split("\n")
    .filter((line) => /violation/i.test(line));

beforeAll(async () => {
  // The production form: passwords from variables (here set in the file), no `dev` user, no anonymous clients.
  const variables = Object.fromEntries(NATS_ROLES.map((role) => [passwordVariable(role), passwords[role]]));
  server = await startTestNatsServer({
    config: `max_payload: 2MB\njetstream { store_dir: ".dirigent/jetstream" }\n${renderAuthorization(root, { variables })}`,
    // PERM_TRACE=/tmp/trace.log: a protocol trace of every user's subjects, to revise the permission sets (the
    // log then goes to the file, so the tests that read violations from stderr fail).
    ...(process.env["PERM_TRACE"] ? { args: ["-DV", "-l", process.env["PERM_TRACE"]] } : {}),
  });
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        { match: { lastUser: "slowly" }, reply: "slow answer", delayMs: 3000 },
        {
          match: { lastUser: { regex: "Decompose this goal[\\s\\S]*PERMITTED-GOAL" } },
          reply: JSON.stringify({ subGoals: [{ description: "PERMITTED-STEP" }] }),
        },
        {
          match: { lastUser: { regex: "Does this outcome diverge" } },
          reply: JSON.stringify({ divergent: false, severity: "none", reason: "fine" }),
        },
      ],
      default: { reply: "permitted answer" },
    },
  });
  config = {
    ...loadConfig({}, {}),
    supervisorTickMs: 200,
    supervisorStaggerMs: 0,
    prefix: root,
    openaiBaseUrl: mock.url,
    openaiApiKey: "test-key",
    modelMaxRetries: 0,
    model: "mock-model",
    inspect: true,
  };
  // Each role in its own connection, as its own user, opening only its own stores.
  for (const role of RUNTIME) {
    const transport = await openNatsTransport(server.url, subjects, {
      name: `perm-${role}`,
      log: silentLogger,
      auth: as(role),
      roles: [role],
    });
    transports.push(transport);
    systems.push(await startSystem({ config, transport, roles: [role] }));
  }
});

afterAll(async () => {
  for (const system of systems.reverse()) await system.stop();
  for (const transport of transports) await transport.close();
  for (const nc of connections) await nc.close();
  await mock?.close();
  await server?.stop();
});

async function connectAs(role: NatsRole): Promise<NatsConnection> {
  const nc = await connectNats({ servers: server.url, name: `perm-test-${role}`, ...as(role) });
  connections.push(nc);
  return nc;
}

describe("each role as its own user", () => {
  it("runs a task end to end, with get and cancel from a submitter, and no permission violation", async () => {
    const client = await openNatsTransport(server.url, subjects, {
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

  it("runs a task longer than the keepalive interval: keepalives and answers reach the requesting roles", async () => {
    const client = await openNatsTransport(server.url, subjects, {
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
    const client = await openNatsTransport(server.url, subjects, {
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
      const client = await openNatsTransport(server.url, subjects, {
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

describe("dirigent worker", () => {
  it("runs a role as its user from NATS_USER and NATS_PASSWORD, and a task completes through it", async () => {
    const env = { NATS_USER: "evaluator", NATS_PASSWORD: passwords.evaluator, OPENAI_BASE_URL: mock.url, DIRIGENT_LOG_LEVEL: "warn" };
    const worker = startCli(["worker", "--role", "evaluator", "--nats", server.url, "--prefix", root], env);
    try {
      await worker.waitFor(/ready/);
      // Stop the in-process Evaluator, so the task has to go through the worker process.
      const inProcess = systems[2];
      if (!inProcess) throw new Error("no evaluator system");
      await inProcess.stop();
      const client = await openNatsTransport(server.url, subjects, {
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

describe("a submitter", () => {
  it("cannot publish to internal subjects", async () => {
    const nc = await connectAs("submitter");
    for (const subject of [subjects.execute, subjects.intake("x"), subjects.evaluate, subjects.cancelBroadcast]) {
      await expect(nc.request(subject, new Uint8Array(), { timeout: 2000 })).rejects.toThrow(/permissions violation/i);
    }
    expect(violations().join("\n")).toMatch(new RegExp(`Publish Violation.*"${subjects.execute.replace(/\./g, "\\.")}"`, "i"));
  });

  it("cannot read the task records nor the intake stream", async () => {
    const nc = await connectAs("submitter");
    await expect(new Kvm(nc).open(subjects.tasksBucket).then((kv) => kv.get("anything"))).rejects.toThrow(/permissions violation/i);
    for (const subject of [`$KV.${subjects.tasksBucket}.>`, subjects.anyIntake, "_INBOX_director.>"]) {
      const sub = nc.subscribe(subject);
      const closed = (async () => {
        try {
          for await (const _ of sub) return "message";
          return "closed";
        } catch (err) {
          return String(err);
        }
      })();
      expect(await closed).toMatch(/permissions violation/i);
    }
  });
});

describe("an inspector", () => {
  it("cannot publish to internal subjects, as another role's inspection, nor write to or consume from JetStream", async () => {
    const nc = await connectAs("inspector");
    const forbidden = [
      subjects.execute,
      subjects.evaluate,
      subjects.intake("x"),
      subjects.cancelBroadcast,
      subjects.inspect("director", "snapshot"),
      `$KV.${subjects.tasksBucket}.x`,
      `$JS.API.CONSUMER.CREATE.${subjects.eventsStream}.spy`,
      `$JS.API.STREAM.PURGE.${subjects.eventsStream}`,
      `$JS.API.STREAM.DELETE.${subjects.eventsStream}`,
    ];
    for (const subject of forbidden)
      await expect(nc.request(subject, new Uint8Array(), { timeout: 2000 })).rejects.toThrow(/permissions violation/i);
  });

  it("a runtime role cannot publish inspection messages as another role", async () => {
    const nc = await connectAs("memory");
    await expect(nc.request(subjects.inspect("director", "snapshot"), "{}", { timeout: 2000 })).rejects.toThrow(/permissions violation/i);
  });

  it("a user without read access to the events stream gets the replay error reported, not an empty list", async () => {
    const nc = await connectAs("submitter");
    const errors: unknown[] = [];
    await using inspector = await startInspectServer({
      bus: new NatsBus(nc, { onError: () => undefined }),
      subjects,
      port: 0,
      replay: natsTaskReplay(nc, subjects),
      onReplayError: (err) => void errors.push(err),
    });
    expect(String(errors[0])).toMatch(/cannot read the events stream.*permissions violation/i);
    const state = (await (await fetch(new URL("/api/state", inspector.url))).json()) as { replayError?: string };
    expect(state.replayError).toMatch(/permissions violation/i);
    const task = await fetch(new URL("/api/tasks/finished-long-ago", inspector.url));
    expect(task.status).toBe(502);
  });
});

describe("authentication", () => {
  it("refuses a client without credentials", async () => {
    await expect(connectNats({ servers: server.url, name: "anonymous" })).rejects.toThrow(/authorization violation/i);
  });

  it("refuses a wrong password with a clear error", async () => {
    await expect(
      place({
        url: server.url,
        auth: { user: "submitter", pass: "wrong" },
        roles: [],
        subjects,
        log: silentLogger,
        name: "wrong",
        dataDir: server.dir,
        startServer: false,
      }),
    ).rejects.toThrow(/NATS at .*: authorization violation: the server refused the connection as user 'submitter'/);
  });

  it("refuses a user running a role it has no permissions for with a clear error", async () => {
    await expect(
      place({
        url: server.url,
        auth: as("submitter"),
        roles: ["director"],
        subjects,
        log: silentLogger,
        name: "wrong-role",
        dataDir: server.dir,
        startServer: false,
      }),
    ).rejects.toThrow(/Permissions Violation.*user 'submitter' lacks the permissions of the director role/);
  });

  it("the CLI exits 1 with 'authorization violation' on a wrong password, and works with the right one from a file", async () => {
    const bad = startCli(["status", "nope", "--nats", server.url, "--prefix", root, "--nats-user", "submitter"], {
      NATS_PASSWORD: "wrong",
    });
    expect(await bad.exited).toBe(1);
    expect(bad.output()).toMatch(/authorization violation/i);
    expect(bad.output()).not.toContain("wrong");
    const file = join(server.dir, "submitter.password");
    await writeFile(file, `${passwords.submitter}\n`, { mode: 0o600 });
    const good = startCli([
      "status",
      "nope",
      "--nats",
      server.url,
      "--prefix",
      root,
      "--nats-user",
      "submitter",
      "--nats-password-file",
      file,
    ]);
    expect(await good.exited).toBe(1);
    expect(good.output()).toMatch(/no task 'nope'/);
    expect(violations()).not.toEqual(expect.arrayContaining([expect.stringContaining(".get")]));
  });
});

describe("nats.conf", () => {
  it("holds the current development authorization block (regenerate with `dirigent nats-conf --dev`)", () => {
    const text = readFileSync(fileURLToPath(new URL("../../nats.conf", import.meta.url)), "utf8");
    const start = text.indexOf(GENERATED_BEGIN);
    const end = text.indexOf(GENERATED_END);
    expect(start).toBeGreaterThanOrEqual(0);
    expect(text.slice(start, end + GENERATED_END.length + 1)).toBe(renderDevAuthorization());
  });
});
