/**
 * Autonomous goals over a real nats-server with the scripted mock model: decomposition and dependency order, the
 * cheap-tier judgements, a model-judged major replan with its alert, the more-than-two-minor rule without an alert,
 * escalation (PAUSED, alert on NATS and to a webhook) and resume, cancellation of the goal's task tree, the
 * Supervisor's cap and stagger, and result collection with one timeout and one unknown id.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../actors/deps.js";
import { collectResults, type CollectedResult } from "../../actors/supervisor/result-collector.js";
import { decode, GoalEvent, OperatorAlert, TaskEvent, type Goal } from "../../protocol/index.js";
import { GoalClient } from "../../runtime/goal-client.js";
import { startMockLlm, type MockLlmServer } from "../../runtime/model/mock-server.js";
import { startTestNatsServer, type TestNatsServer } from "../support/nats-server.js";
import { Recorder } from "../support/recorder.js";
import { newTaskId, startStack, type Stack } from "../support/stack.js";
import { tid } from "../support/ids.js";

let server: TestNatsServer;
let mock: MockLlmServer;
let stack: Stack;
let goals: GoalClient;
let webhook: Server;
const posted = new Recorder<OperatorAlert>();
const events = new Recorder<GoalEvent>();
const alerts = new Recorder<OperatorAlert>();

const plan = (...items: { id: string; description: string; dependsOn?: string[] }[]) => JSON.stringify({ subGoals: items });
const planFor = (marker: string, extra = "") => ({ lastUser: { regex: `Decompose this goal[\\s\\S]*GOAL: ${marker}${extra}` } });
const judgeFor = (marker: string) => ({ lastUser: { regex: `Does this outcome diverge[\\s\\S]*SUB-GOAL: ${marker}` } });
const verdict = (divergent: boolean, severity: string, reason: string) => JSON.stringify({ divergent, severity, reason });

beforeAll(async () => {
  server = await startTestNatsServer();
  webhook = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      posted.push(OperatorAlert.parse(JSON.parse(body)));
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => webhook.listen(0, "127.0.0.1", resolve));
  mock = await startMockLlm({
    port: 0,
    script: {
      rules: [
        // Judgements first (their prompts name the sub-goals the step rules below match).
        { match: judgeFor("MAJOR-STEP-1"), reply: verdict(true, "major", "it built the wrong thing") },
        { match: judgeFor("MINOR-STEP-"), reply: verdict(true, "minor", "a bit off") },
        { match: { lastUser: { regex: "Does this outcome diverge" } }, reply: verdict(false, "none", "on track") },
        // A goal that completes: B depends on A.
        {
          match: planFor("GOAL-OK"),
          reply: plan({ id: "a", description: "OK-STEP-A" }, { id: "b", description: "OK-STEP-B", dependsOn: ["a"] }),
        },
        { match: { lastUser: "OK-STEP-A" }, reply: "result of A" },
        { match: { lastUser: "OK-STEP-B" }, reply: "result of B" },
        // A major divergence judged by the model, then a second plan.
        { match: planFor("GOAL-MAJOR", "[\\s\\S]*MAJOR-STEP-1: completed"), reply: plan({ id: "1", description: "MAJOR-STEP-2" }) },
        { match: planFor("GOAL-MAJOR"), reply: plan({ id: "1", description: "MAJOR-STEP-1" }) },
        // Three minor divergences, then a second plan.
        { match: planFor("GOAL-MINOR", "[\\s\\S]*MINOR-STEP-C: completed"), reply: plan({ id: "1", description: "MINOR-FIX" }) },
        {
          match: planFor("GOAL-MINOR"),
          reply: plan(
            { id: "1", description: "MINOR-STEP-A" },
            { id: "2", description: "MINOR-STEP-B" },
            { id: "3", description: "MINOR-STEP-C" },
          ),
        },
        // Escalation: the step's model call fails twice (the task fails: a metric major), then succeeds.
        { match: planFor("GOAL-ESC"), reply: plan({ id: "1", description: "ESC-STEP" }) },
        { match: planFor("GOAL-COST"), reply: plan({ id: "1", description: "COST-STEP" }) },
        { match: { lastUser: "ESC-STEP" }, status: 500, times: 2 },
        // Cancellation: slow steps.
        {
          match: planFor("GOAL-CANCEL"),
          reply: plan({ id: "1", description: "CANCEL-STEP-1" }, { id: "2", description: "CANCEL-STEP-2" }),
        },
        { match: { lastUser: "CANCEL-STEP" }, reply: "too late", delayMs: 20_000 },
        // Cap and stagger: each goal has one step of 600 ms.
        { match: planFor("GOAL-CAP-(\\d)"), reply: plan({ id: "1", description: "CAP-STEP" }) },
        { match: { lastUser: "CAP-STEP" }, reply: "capped", delayMs: 600 },
        // Result collection.
        { match: { lastUser: "COLLECT-SLOW" }, reply: "slow", delayMs: 5_000 },
        { match: { lastUser: "COLLECT-LATE" }, reply: "late", delayMs: 300 },
      ],
      default: { reply: "done: {{lastUser}}" },
    },
  });
  stack = await startStack({
    url: server.url,
    mock,
    config: {
      cheapModel: "cheap-model",
      supervisorTickMs: 200,
      supervisorStaggerMs: 0,
      supervisorMaxGoals: 10,
      goalLeaseMs: 3_000,
      alertWebhook: `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/alerts`,
    },
  });
  goals = new GoalClient(stack.transport.bus, stack.system.subjects);
  goals.events("*", (e) => events.push(e));
  goals.alerts((a) => alerts.push(a));
  await stack.transport.bus.flush();
});

afterAll(async () => {
  await stack?.stop();
  await mock?.close();
  await new Promise<void>((resolve) => (webhook ? webhook.close(() => resolve()) : resolve()));
  await server?.stop();
});

/** Waits until the goal's events include `type`. */
const eventOf = (goalId: string, type: string, timeoutMs = 15_000) =>
  events
    .until((es) => es.some((e) => e.goalId === goalId && e.type === type), `${type} of ${goalId}`, timeoutMs)
    .then((es) => es.filter((e) => e.goalId === goalId));
const goalOf = async (goalId: string): Promise<Goal> => (await goals.get(goalId)).goal;

describe("autonomous goals", () => {
  it("decomposes a goal, runs sub-goals in dependency order with earlier results, judges each on the cheap model and completes", async () => {
    const { goalId } = await goals.submit({ goalId: "g-ok", description: "GOAL-OK: write a report" });
    const seen = await eventOf(goalId, "goal.completed");
    expect(seen.map((e) => e.type)).toEqual([
      "goal.submitted",
      "goal.started",
      "goal.decomposed",
      "subgoal.started",
      "subgoal.settled",
      "goal.evaluation",
      "subgoal.started",
      "subgoal.settled",
      "goal.evaluation",
      "goal.completed",
    ]);
    const goal = await goalOf(goalId);
    expect(goal.status).toBe("completed");
    expect(goal.subGoals.map((s) => [s.description, s.status, s.taskId, s.outcome?.content])).toEqual([
      ["OK-STEP-A", "completed", "g-ok-s1", "result of A"],
      ["OK-STEP-B", "completed", "g-ok-s2", "result of B"],
    ]);
    // Each sub-goal is an ordinary task, and B's session was told what A produced.
    expect((await stack.client.get("g-ok-s2")).result?.status).toBe("COMPLETE");
    const bRequest = mock.requests.find((r) => JSON.stringify(r.body).includes("OK-STEP-B") && !JSON.stringify(r.body).includes("diverge"));
    expect(JSON.stringify(bRequest)).toContain("result of A");
    // Judgements ran on the cheap tier, the work on the default model.
    const judgements = mock.requests.filter(
      (r) => JSON.stringify(r.body).includes("Does this outcome diverge") && JSON.stringify(r.body).includes("OK-STEP"),
    );
    expect(judgements.map((r) => (r.body as { model: string }).model)).toEqual(["cheap-model", "cheap-model"]);
    expect(goal.evaluations.map((e) => [e.severity, e.source])).toEqual([
      ["none", "model"],
      ["none", "model"],
    ]);
  });

  it("replans on a major divergence judged by the model, and alerts the operator of it", async () => {
    const { goalId } = await goals.submit({ goalId: "g-major", description: "GOAL-MAJOR: build a parser" });
    await eventOf(goalId, "goal.completed");
    const goal = await goalOf(goalId);
    expect(goal.replanCount).toBe(1);
    expect(goal.subGoals.map((s) => [s.description, s.status, s.round])).toEqual([
      ["MAJOR-STEP-1", "completed", 1],
      ["MAJOR-STEP-2", "completed", 2],
    ]);
    const alert = (await alerts.until((as) => as.some((a) => a.goalId === goalId), "the major replan alert")).find(
      (a) => a.goalId === goalId,
    );
    expect(alert).toMatchObject({ kind: "goal.major_replan", reason: "major divergence at s1: it built the wrong thing", replanCount: 1 });
    expect(
      (await posted.until((as) => as.some((a) => a.goalId === goalId), "the webhook POST")).filter((a) => a.goalId === goalId),
    ).toHaveLength(1);
  });

  it("replans after more than two minor divergences, without an alert", async () => {
    const { goalId } = await goals.submit({ goalId: "g-minor", description: "GOAL-MINOR: tidy the docs" });
    const seen = await eventOf(goalId, "goal.completed");
    expect(seen.find((e) => e.type === "goal.replanned")?.message).toBe("replan 1/5: 3 minor divergences");
    const goal = await goalOf(goalId);
    expect(goal.subGoals.filter((s) => s.status === "completed").map((s) => s.description)).toEqual([
      "MINOR-STEP-A",
      "MINOR-STEP-B",
      "MINOR-STEP-C",
      "MINOR-FIX",
    ]);
    expect(alerts.values.filter((a) => a.goalId === goalId)).toEqual([]);
  });

  it("pauses a goal past its replan limit with an alert on NATS and to the webhook; resume carries it to completion", async () => {
    const { goalId } = await goals.submit({ goalId: "g-esc", description: "GOAL-ESC: deploy", maxReplans: 1 });
    await eventOf(goalId, "goal.paused");
    const paused = await goalOf(goalId);
    expect(paused.status).toBe("paused");
    expect(paused.pauseReason).toMatch(/^escalated after 1 replan\(s\): major divergence at s2: Sub-goal failed: /);
    const escalation = (
      await alerts.until((as) => as.some((a) => a.goalId === goalId && a.kind === "goal.escalated"), "the escalation")
    ).find((a) => a.kind === "goal.escalated" && a.goalId === goalId);
    expect(escalation).toMatchObject({ action: "dirigent goal resume g-esc", replanCount: 2 });
    await posted.until((as) => as.some((a) => a.goalId === goalId && a.kind === "goal.escalated"), "the escalation POST");
    // Paused is not abandoned: a resume starts again with a fresh replan count.
    expect(await goals.resume(goalId)).toEqual({ goalId, status: "resumed" });
    expect(await goals.resume("g-ok")).toEqual({ goalId: "g-ok", status: "not_paused" });
    await eventOf(goalId, "goal.completed");
    const done = await goalOf(goalId);
    expect(done.status).toBe("completed");
    expect(done.subGoals.map((s) => s.status)).toEqual(["skipped", "skipped", "completed"]);
  });

  it("cancels a goal and every task of its tree; the goal stays cancelled", async () => {
    const running = new Recorder<string>();
    for (const id of ["g-cancel-s1", "g-cancel-s2"]) {
      stack.transport.bus.subscribe(stack.system.subjects.taskEvents(id), (m) => {
        const d = decode(TaskEvent, m.data);
        if (d.ok && d.value.type === "node.started") running.push(id);
      });
    }
    await stack.transport.bus.flush();
    const { goalId } = await goals.submit({ goalId: "g-cancel", description: "GOAL-CANCEL: slow work" });
    // Both sub-goal tasks run (their model calls take 20 s) when the goal is cancelled.
    await running.until((v) => new Set(v).size === 2, "both sub-goal tasks running", 10_000);
    expect(await goals.cancel(goalId)).toEqual({ goalId, status: "cancelled" });
    await eventOf(goalId, "goal.cancelled");
    const states = await Promise.all(["g-cancel-s1", "g-cancel-s2"].map(async (id) => (await stack.client.get(id)).state));
    expect(states).toEqual(["cancelled", "cancelled"]);
    expect((await goalOf(goalId)).status).toBe("cancelled");
    expect(await goals.cancel(goalId)).toEqual({ goalId, status: "already_final" });
    const { goals: listed } = await goals.list();
    expect(listed.find((g) => g.id === goalId)).toMatchObject({ status: "cancelled" });
  });

  it("answers bad and unknown goal requests with named errors, and keeps running", async () => {
    await expect(goals.submit({ description: "  " } as never)).rejects.toMatchObject({ code: "INVALID_MESSAGE" });
    await expect(goals.get("no-such-goal")).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect((await goals.submit({ goalId: "g-ok", description: "again" })).status).toBe("duplicate");
  });
});

describe("the Supervisor's cap and stagger", () => {
  it("runs at most the cap at once, starts them a stagger apart, and the next once one has halted", async () => {
    await using capped = await startStack({
      url: server.url,
      mock,
      config: { supervisorTickMs: 200, supervisorStaggerMs: 400, supervisorMaxGoals: 2, goalLeaseMs: 3_000 },
    });
    const client = new GoalClient(capped.transport.bus, capped.system.subjects);
    const seen = new Recorder<{ e: GoalEvent; at: number }>();
    client.events("*", (e) => seen.push({ e, at: Date.now() }));
    await capped.transport.bus.flush();
    for (const n of [1, 2, 3]) await client.submit({ goalId: `cap-${n}`, description: `GOAL-CAP-${n}` });
    await seen.until(
      (v) => ["cap-1", "cap-2", "cap-3"].every((id) => v.some((x) => x.e.goalId === id && x.e.type === "goal.completed")),
      "three goals completed",
      20_000,
    );
    const first = (id: string, type: string) => seen.values.find((x) => x.e.goalId === id && x.e.type === type)?.at ?? Number.NaN;
    const starts = ["cap-1", "cap-2", "cap-3"].map((id) => first(id, "goal.started")).sort((a, b) => a - b);
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(350);
    // The third started only after one of the first two had completed.
    const firstDone = Math.min(first("cap-1", "goal.completed"), first("cap-2", "goal.completed"), first("cap-3", "goal.completed"));
    expect(starts[2]!).toBeGreaterThanOrEqual(firstDone);
  });
});

describe("the cost trigger", () => {
  it("pauses a goal whose tasks cost more than the threshold over 24 hours, by metric, without a model judgement", async () => {
    await using priced = await startStack({
      url: server.url,
      mock,
      // 1 USD per 1,000 tokens: one small task costs a few cents, over a 0.01 threshold.
      config: {
        supervisorTickMs: 200,
        supervisorStaggerMs: 0,
        goalCostThreshold: 0.01,
        modelPrices: { "mock-model": { input: 1_000, output: 1_000 } },
      },
    });
    const client = new GoalClient(priced.transport.bus, priced.system.subjects);
    const judged = () => mock.requests.filter((r) => JSON.stringify(r.body).includes("SUB-GOAL: COST-STEP")).length;
    const before = judged();
    const seen = new Recorder<GoalEvent>();
    client.events("g-cost", (e) => seen.push(e));
    await priced.transport.bus.flush();
    await client.submit({ goalId: "g-cost", description: "GOAL-COST: spend", maxReplans: 0 });
    await seen.until((v) => v.some((e) => e.type === "goal.paused"), "the goal paused", 15_000);
    const { goal } = await client.get("g-cost");
    expect(goal.status).toBe("paused");
    expect(goal.pauseReason).toMatch(/major divergence at s1: Goal cost over the last 24 h is [\d.]+ USD, over the 0.01 USD threshold/);
    expect(goal.subGoals[0]?.outcome?.costUsd).toBeGreaterThan(0.01);
    expect(goal.evaluations.map((e) => e.source)).toEqual(["metric"]);
    expect(judged()).toBe(before);
  });
});

describe("result collection", () => {
  it("returns results in input order: completed, unknown at once, late by its result event, and one timeout", async () => {
    const xml = (text: string) => `<task><description>${text}</description></task>`;
    const fast = newTaskId();
    await stack.client.run({ xml: xml("COLLECT-FAST"), taskId: fast });
    const slow = newTaskId();
    const late = newTaskId();
    await stack.client.submit({ xml: xml("COLLECT-SLOW"), taskId: slow });
    await stack.client.submit({ xml: xml("COLLECT-LATE"), taskId: late });
    const order: string[] = [];
    const deps = { bus: stack.transport.bus, subjects: stack.system.subjects, log: silentLogger, now: () => new Date(), newId: newTaskId };
    const started = Date.now();
    const results: CollectedResult[] = await collectResults(deps, [slow, tid("never-submitted"), fast, late], {
      timeoutMs: 1_500,
      onSettled: (r) => order.push(r.taskId),
    });
    expect(results.map((r) => r.status)).toEqual(["timeout", "unknown", "completed", "completed"]);
    expect(results[0]).toMatchObject({ taskId: slow, error: expect.stringMatching(/^timeout after 1500 ms/) });
    expect(results[1]).toMatchObject({ taskId: "never-submitted", error: "no task 'never-submitted'" });
    expect(results.map((r) => r.taskId)).toEqual([slow, "never-submitted", fast, late]);
    // The unknown id failed fast, before the late result arrived; the timeout came last.
    expect(order.indexOf("never-submitted")).toBeLessThan(order.indexOf(late));
    expect(order.at(-1)).toBe(slow);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    await stack.client.cancel(slow);
  });
});
