import { describe, expect, it } from "vitest";
import { createActor, fromCallback, fromPromise, toPromise } from "xstate";
import {
  applyPlan,
  goalMachine,
  goalComplete,
  metricDivergence,
  nextWave,
  normaliseJudgement,
  settle,
  shouldReplan,
  type GoalInput,
  type KeepResult,
  type WaveItem,
} from "../../../machines/supervisor/goal.js";
import { Goal, type DivergenceEvaluation, type GoalPlan, type SubGoalOutcome } from "../../../protocol/index.js";

const NOW = 1_800_000_000_000;
const newGoal = (extra: Partial<Goal> = {}): Goal =>
  Goal.parse({ id: "g1", description: "ship the release", status: "active", createdAt: NOW, updatedAt: NOW, ...extra });
const plan = (...items: (string | { id: string; description: string; dependsOn?: string[]; priority?: number })[]): GoalPlan => ({
  subGoals: items.map((i) =>
    typeof i === "string" ? { description: i, dependsOn: [], priority: 50 } : { dependsOn: [], priority: 50, ...i },
  ),
});
const ev = (
  severity: DivergenceEvaluation["severity"],
  divergent: boolean | null = severity === "none" ? false : true,
): DivergenceEvaluation => ({
  subGoalId: "s1",
  divergent: severity === "unknown" ? null : divergent,
  severity,
  reason: "",
  source: "model",
});

interface Script {
  plans: GoalPlan[];
  /** Outcome of each sub-goal by description; missing: success. */
  outcome?: (description: string) => SubGoalOutcome | "hang";
  judge?: (ids: string[]) => DivergenceEvaluation[];
  review?: (ids: string[]) => KeepResult[];
}

async function run(script: Script, input: Partial<GoalInput> = {}) {
  const events: { type: string; message: string }[] = [];
  const alerts: { kind: string; reason: string }[] = [];
  const persisted: Goal[] = [];
  const cancelled: string[] = [];
  const waves: WaveItem[][] = [];
  let plans = 0;
  const machine = goalMachine.provide({
    actions: {
      persist: (_, p) => void persisted.push(p.goal),
      publish: (_, p) => void events.push({ type: p.type, message: p.message }),
      alert: (_, p) => void alerts.push({ kind: p.kind, reason: p.reason }),
      cancelTasks: (_, p) => void cancelled.push(...p.taskIds),
    },
    actors: {
      decompose: fromPromise(async () => {
        const next = script.plans[plans++];
        if (!next) throw new Error("no more plans");
        return next;
      }),
      runWave: fromCallback<{ type: "noop" }, { goal: Goal; items: WaveItem[] }>(({ input: { items }, sendBack }) => {
        waves.push(items);
        for (const item of items) {
          const outcome = script.outcome?.(item.description) ?? { success: true, content: `done: ${item.description}` };
          if (outcome === "hang") continue;
          queueMicrotask(() => sendBack({ type: "subgoal.settled", subGoalId: item.subGoalId, outcome, at: NOW }));
        }
      }),
      judge: fromPromise(async ({ input }: { input: { goal: Goal; subGoalIds: string[] } }) => {
        if (!script.judge) throw new Error("the cheap model is down");
        return script.judge(input.subGoalIds);
      }),
      review: fromPromise(
        async ({ input }: { input: { goal: Goal; subGoalIds: string[]; reason: string } }) => script.review?.(input.subGoalIds) ?? [],
      ),
    },
  });
  const actor = createActor(machine, { input: { goal: newGoal(), ...input } });
  if (process.env.GOAL_DEBUG)
    actor.subscribe((s) =>
      console.log(JSON.stringify(s.value), s.context.wave, s.context.goal.subGoals.map((x) => x.id + ":" + x.status).join(" ")),
    );
  const done = toPromise(actor);
  actor.start();
  return { actor, done, events, alerts, persisted, cancelled, waves };
}

const none = (ids: string[]) => ids.map((id) => normaliseJudgement(id, { divergent: false, severity: "none", reason: "on track" }));
const minor = (ids: string[]) => ids.map((id) => normaliseJudgement(id, { divergent: true, severity: "none", reason: "drifting" }));

describe("goal rules", () => {
  it("runs sub-goals whose dependencies completed, highest priority first", () => {
    let goal = applyPlan(
      newGoal(),
      plan(
        { id: "a", description: "A", priority: 60 },
        { id: "b", description: "B", dependsOn: ["a"] },
        { id: "c", description: "C", priority: 10 },
      ),
    );
    expect(goal.subGoals.map((s) => [s.id, s.dependsOn])).toEqual([
      ["s1", []],
      ["s2", ["s1"]],
      ["s3", []],
    ]);
    expect(nextWave(goal, 5).map((s) => s.id)).toEqual(["s3", "s1"]);
    expect(nextWave(goal, 1).map((s) => s.id)).toEqual(["s3"]);
    goal = { ...goal, subGoals: goal.subGoals.map((s) => (s.id === "s1" ? { ...s, status: "completed" } : s)) };
    expect(nextWave(goal, 5).map((s) => s.id)).toEqual(["s3", "s2"]);
  });

  it("completes when every sub-goal is completed or skipped, never on an empty plan", () => {
    expect(goalComplete(newGoal())).toBe(false);
    const goal = applyPlan(newGoal(), plan("A", "B"));
    const statuses = (a: string, b: string) =>
      ({
        ...goal,
        subGoals: [
          { ...goal.subGoals[0]!, status: a },
          { ...goal.subGoals[1]!, status: b },
        ],
      }) as Goal;
    expect(goalComplete(statuses("completed", "skipped"))).toBe(true);
    expect(goalComplete(statuses("skipped", "skipped"))).toBe(false);
    expect(goalComplete(statuses("completed", "failed"))).toBe(false);
  });

  it("decides failures and spending over the 24 h threshold by metric, and nothing else", () => {
    expect(metricDivergence("s1", { success: false, content: "", error: "boom" }, [], NOW, 5)).toMatchObject({
      severity: "major",
      source: "metric",
      reason: "Sub-goal failed: boom",
    });
    const costs = [
      { at: NOW - 25 * 3_600_000, usd: 10 },
      { at: NOW - 3_600_000, usd: 3 },
    ];
    expect(metricDivergence("s1", { success: true, content: "" }, costs, NOW, 5)).toBeUndefined();
    expect(metricDivergence("s1", { success: true, content: "" }, [...costs, { at: NOW, usd: 2.5 }], NOW, 5)).toMatchObject({
      severity: "major",
      source: "metric",
    });
  });

  it("replans on any major, on more than 2 minor, and on a divergent majority of at least 4", () => {
    expect(shouldReplan([])).toMatchObject({ replan: false });
    expect(shouldReplan([ev("none"), ev("major")])).toMatchObject({ replan: true, major: true });
    expect(shouldReplan([ev("minor"), ev("minor")])).toMatchObject({ replan: false });
    expect(shouldReplan([ev("minor"), ev("minor"), ev("minor")])).toMatchObject({
      replan: true,
      major: false,
      reason: "3 minor divergences",
    });
    expect(shouldReplan([ev("none", true), ev("none", true), ev("none", true), ev("none")])).toMatchObject({
      replan: true,
      reason: "3 of 4 evaluations divergent",
    });
    expect(shouldReplan([ev("none", true), ev("none", true), ev("none"), ev("none")])).toMatchObject({ replan: false });
    // Unknown judgements count on neither side: three of them are not "at least 4 evaluations".
    expect(shouldReplan([ev("none", true), ev("none", true), ev("unknown"), ev("unknown")])).toMatchObject({ replan: false });
  });
});

describe("goal machine", () => {
  it("decomposes, runs the waves in dependency order, judges each outcome and completes", async () => {
    const r = await run({
      plans: [plan({ id: "1", description: "build" }, { id: "2", description: "test", dependsOn: ["1"] })],
      judge: none,
    });
    const out = await r.done;
    expect(out.status).toBe("completed");
    expect(out.goal.subGoals.map((s) => [s.id, s.status, s.taskId])).toEqual([
      ["s1", "completed", "g1-s1"],
      ["s2", "completed", "g1-s2"],
    ]);
    expect(r.waves.map((w) => w.map((i) => i.subGoalId))).toEqual([["s1"], ["s2"]]);
    expect(out.goal.evaluations.map((e) => e.severity)).toEqual(["none", "none"]);
    expect(r.events.map((e) => e.type)).toEqual([
      "goal.decomposed",
      "subgoal.started",
      "subgoal.settled",
      "goal.evaluation",
      "subgoal.started",
      "subgoal.settled",
      "goal.evaluation",
      "goal.completed",
    ]);
    expect(r.persisted.at(-1)?.status).toBe("completed");
    expect(r.alerts).toEqual([]);
  });

  it("replans at once on a failed sub-goal (metric, no model call), alerts the major replan and skips what was pending", async () => {
    let judged = 0;
    const r = await run({
      plans: [plan("fetch", { id: "x", description: "deploy", dependsOn: ["1"] }), plan("fetch again")],
      outcome: (d) => (d === "fetch" ? { success: false, content: "", error: "network down" } : { success: true, content: "ok" }),
      judge: (ids) => (judged++, none(ids)),
    });
    const out = await r.done;
    expect(out.status).toBe("completed");
    expect(out.goal.subGoals.map((s) => [s.description, s.status, s.round, s.skipReason])).toEqual([
      ["fetch", "skipped", 1, "failed; replaced by replan 1"],
      ["deploy", "skipped", 1, "skipped by replan 1"],
      ["fetch again", "completed", 2, undefined],
    ]);
    expect(out.goal.subGoals[0]?.outcome).toMatchObject({ success: false, error: "network down" });
    expect(out.goal.replanCount).toBe(1);
    expect(r.alerts).toEqual([{ kind: "goal.major_replan", reason: "major divergence at s1: Sub-goal failed: network down" }]);
    expect(judged).toBe(1); // only "fetch again"; the failure was decided by its metric
    expect(out.goal.evaluations).toHaveLength(1); // evaluations start afresh after a replan
  });

  it("replans after more than two minor divergences without alerting the operator", async () => {
    const r = await run({ plans: [plan("a", "b", "c"), plan("d")], judge: (ids) => (ids.includes("s4") ? none(ids) : minor(ids)) });
    const out = await r.done;
    expect(out.status).toBe("completed");
    expect(out.goal.replanCount).toBe(1);
    expect(r.events.find((e) => e.type === "goal.replanned")?.message).toBe("replan 1/5: 3 minor divergences");
    expect(r.alerts).toEqual([]);
  });

  it("records a failed judgement as unknown, never as not divergent", async () => {
    const r = await run({ plans: [plan("a")] });
    const out = await r.done;
    expect(out.status).toBe("completed");
    expect(out.goal.evaluations).toEqual([
      { subGoalId: "s1", divergent: null, severity: "unknown", reason: "the judgement failed", source: "model" },
    ]);
  });

  it("pauses the goal with an escalation alert past its replan limit", async () => {
    const r = await run(
      { plans: [plan("a"), plan("b")], outcome: () => ({ success: false, content: "", error: "broken" }) },
      { goal: newGoal({ maxReplans: 1 }) },
    );
    const out = await r.done;
    expect(out.status).toBe("paused");
    expect(out.goal.status).toBe("paused");
    expect(out.goal.replanCount).toBe(2);
    expect(out.goal.pauseReason).toBe("escalated after 1 replan(s): major divergence at s2: Sub-goal failed: broken");
    expect(r.alerts.map((a) => a.kind)).toEqual(["goal.major_replan", "goal.escalated"]);
    expect(r.persisted.at(-1)?.status).toBe("paused");
  });

  it("reviews in-progress sub-goals on a replan: the kept one runs on, the other is skipped and its task cancelled", async () => {
    let round = 0;
    const r = await run({
      plans: [plan("fail fast", "slow kept", "slow dropped"), plan("retry")],
      outcome: (d) => {
        if (d === "fail fast") return { success: false, content: "", error: "bad input" };
        if (d === "slow kept") return round++ === 0 ? "hang" : { success: true, content: "kept result" };
        if (d === "slow dropped") return "hang";
        return { success: true, content: "retried" };
      },
      review: (ids) => ids.map((id) => ({ subGoalId: id, keep: id === "s2", reason: id === "s2" ? "almost done" : "no longer needed" })),
      judge: none,
    });
    const out = await r.done;
    expect(out.status).toBe("completed");
    expect(out.goal.subGoals.map((s) => [s.description, s.status])).toEqual([
      ["fail fast", "skipped"],
      ["slow kept", "completed"],
      ["slow dropped", "skipped"],
      ["retry", "completed"],
    ]);
    expect(out.goal.subGoals[2]?.skipReason).toBe("no longer needed");
    expect(r.cancelled).toEqual(["g1-s3"]);
    // The kept sub-goal is awaited again under the same task id.
    expect(r.waves[1]?.map((i) => i.taskId)).toEqual(["g1-s2", "g1-s4"]);
  });

  it("resumes a stored goal where it was: in-progress sub-goals are awaited again, nothing is decomposed twice", async () => {
    const stored = applyPlan(newGoal(), plan("a", "b"));
    const goal = {
      ...stored,
      subGoals: [
        { ...stored.subGoals[0]!, status: "completed" as const, taskId: "g1-s1" },
        { ...stored.subGoals[1]!, status: "in-progress" as const, taskId: "g1-s2" },
      ],
    };
    const r = await run({ plans: [], judge: none }, { goal });
    const out = await r.done;
    expect(out.status).toBe("completed");
    expect(r.events[0]?.type).toBe("subgoal.started");
    expect(r.waves).toEqual([[{ subGoalId: "s2", taskId: "g1-s2", description: "b" }]]);
  });

  it("stops at once on STOP", async () => {
    const r = await run({ plans: [plan("a")], outcome: () => "hang" });
    expect(r.actor.getSnapshot().value).toBe("running");
    r.actor.send({ type: "stop", reason: "lease lost" });
    expect(await r.done).toMatchObject({ status: "stopped", reason: "lease lost" });
  });
});

describe("settle (goal-plan.ts): a settled sub-goal's cost accounting", () => {
  const started = () => {
    const goal = applyPlan(newGoal(), plan("a", "b"));
    const [a, b] = goal.subGoals.map((s) => s.id) as [string, string];
    return { a, b, state: { goal, wave: [a, b], toJudge: [] as string[] } };
  };

  it("books the outcome's cost, marks the sub-goal and leaves it to the model when no metric decides", () => {
    const { a, b, state } = started();
    const next = settle(state, { subGoalId: a, outcome: { success: true, content: "done", costUsd: 0.25 }, at: NOW }, 10);
    expect(next.goal.costs).toEqual([{ at: NOW, usd: 0.25 }]);
    expect(next.goal.subGoals.find((s) => s.id === a)).toMatchObject({ status: "completed", outcome: { costUsd: 0.25 } });
    expect(next).toMatchObject({ wave: [b], toJudge: [a], lastSettled: a });
    expect(next.goal.evaluations).toEqual([]);
  });

  it("books no cost entry for an outcome without cost", () => {
    const { a, state } = started();
    expect(settle(state, { subGoalId: a, outcome: { success: true, content: "done" }, at: NOW }, 10).goal.costs).toEqual([]);
  });

  it("records a metric major, not judged by the model, once the 24 h cost passes the threshold", () => {
    const { a, b, state } = started();
    const next = settle(state, { subGoalId: a, outcome: { success: true, content: "done", costUsd: 11 }, at: NOW }, 10);
    expect(next.goal.evaluations).toMatchObject([{ subGoalId: a, source: "metric", severity: "major" }]);
    expect(next).toMatchObject({ wave: [b], toJudge: [] });
  });

  it("does not change the state it is given", () => {
    const { a, state } = started();
    const before = structuredClone(state);
    settle(state, { subGoalId: a, outcome: { success: false, content: "", error: "boom", costUsd: 1 }, at: NOW }, 10);
    expect(state).toEqual(before);
  });
});
