/**
 * Two Supervisor processes share the goals; the one running a goal is killed (`kill -9`) mid-goal. Its lease
 * expires, the other takes the goal over from the stored state, re-awaits the sub-goal task already running (no
 * second run of it), and completes the goal.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSubjects, decode, GoalEvent } from "../../protocol/index.js";
import { GoalClient } from "../../runtime/goal-client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { randomRoot, startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { startCli, type CliProcess } from "../support/processes.js";
import { Recorder } from "../support/recorder.js";
import { startStack } from "../support/stack.js";

const LEASE_MS = 1_500;
let server: TestNatsServer;
let mock: MockLlmServer;
const processes: CliProcess[] = [];

beforeAll(async () => {
  server = await startTestNatsServer();
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        {
          match: { lastUser: { regex: "Decompose this goal[\\s\\S]*GOAL: TAKEOVER" } },
          reply: JSON.stringify({ subGoals: [{ id: "1", description: "TAKEOVER-STEP" }] }),
        },
        {
          match: { lastUser: { regex: "Does this outcome diverge" } },
          reply: JSON.stringify({ divergent: false, severity: "none", reason: "fine" }),
        },
        // Held until the other Supervisor has taken the goal over: the kill lands while the sub-goal's task runs.
        { match: { lastUser: "TAKEOVER-STEP" }, reply: "step done", gate: { name: "step", count: 1000 } },
      ],
    },
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await mock?.close();
  await server?.stop();
});

describe("a Supervisor killed mid-goal", () => {
  it("is replaced by another Supervisor process, which carries the goal on without re-running its task", async () => {
    const root = randomRoot();
    await using stack = await startStack({ url: server.url, mock, root, roles: ["director", "evaluator", "handler", "memory"] });
    const env = {
      DIRIGENT_SUPERVISOR_TICK_MS: "200",
      DIRIGENT_SUPERVISOR_STAGGER_MS: "0",
      DIRIGENT_GOAL_LEASE_MS: String(LEASE_MS),
      DIRIGENT_LOG_LEVEL: "info",
    };
    const supervisors = ["a", "b"].map(() => startCli(["worker", "--role", "supervisor", "--nats", server.url, "--prefix", root], env));
    processes.push(...supervisors);
    await Promise.all(supervisors.map((s) => s.waitFor(/ready/)));

    const goals = new GoalClient(stack.transport.bus, createSubjects(root));
    const events = new Recorder<{ event: GoalEvent; at: number }>();
    stack.transport.bus.subscribe(createSubjects(root).goalEvents("g-takeover"), (m) => {
      const d = decode(GoalEvent, m.data);
      if (d.ok) events.push({ event: d.value, at: Date.now() });
    });
    await stack.transport.bus.flush();
    await goals.submit({ goalId: "g-takeover", description: "TAKEOVER: one slow step" });

    // Kill the Supervisor that runs the goal once its sub-goal task is running.
    const running = await events.until((v) => v.some((e) => e.event.type === "subgoal.started"), "the sub-goal started", 60_000);
    const owner = running.find((e) => e.event.type === "goal.started")?.event.supervisor ?? "";
    const pid = Number(owner.split(":")[1]);
    const victim = supervisors.find((s) => s.child.pid === pid);
    expect(victim, `the owner ${owner} is one of the two Supervisors`).toBeDefined();
    const killedAt = Date.now();
    victim?.child.kill("SIGKILL");

    const taken = await events.until((v) => v.filter((e) => e.event.type === "goal.started").length === 2, "the takeover", 60_000);
    console.log(`kill -9 → goal.started again: ${taken.filter((e) => e.event.type === "goal.started")[1]!.at - killedAt} ms`);
    mock.openGate("step");
    const done = await events.until((v) => v.some((e) => e.event.type === "goal.completed"), "the goal completed", 60_000);
    const starts = done.filter((e) => e.event.type === "goal.started");
    expect(starts).toHaveLength(2);
    expect(starts[1]?.event.supervisor).not.toBe(owner);
    const goal = (await goals.get("g-takeover")).goal;
    expect(goal.status).toBe("completed");
    expect(goal.subGoals.map((s) => [s.status, s.outcome?.content])).toEqual([["completed", "step done"]]);
    // The decomposition and the sub-goal's task each ran once: the new Supervisor found them by their ids.
    const asked = (text: string) =>
      mock.requests.filter((r) => JSON.stringify(r.body).includes(text) && !JSON.stringify(r.body).includes("diverge")).length;
    expect(asked("Decompose this goal")).toBe(1);
    expect(asked("TAKEOVER-STEP")).toBe(1);
  });
});
