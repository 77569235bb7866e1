/**
 * An autonomous goal's plan and how it advances: how a plan becomes sub-goals, which
 * sub-goals run next, when the goal is complete, the metric divergence triggers and the replan rule. Pure: no I/O, no
 * clock (times come in as arguments).
 */
import {
  parseTaskId,
  type CostEntry,
  type DivergenceEvaluation,
  type Goal,
  type GoalPlan,
  type SubGoal,
  type SubGoalOutcome,
  type TaskId,
} from "../../protocol/index.js";

/**
 * Defaults of the goal loop, as the README documents them (`DIRIGENT_GOAL_COST_THRESHOLD` and
 * `DIRIGENT_GOAL_MAX_REPLANS` change the first two).
 */
export const GOAL_DEFAULTS = {
  /** Cost per goal over a rolling 24 h that counts as a major divergence (USD, the price table's unit). */
  costThresholdUsd: 5,
  /** Replans before the goal is paused and an operator alerted (the 6th attempt escalates). */
  maxReplans: 5,
  /** Sub-goals of one goal that run at once. */
  maxParallel: 3,
  /** Sub-goals a sub-goal's outcome is cut to, in characters. */
  outcomeChars: 4_000,
} as const;

const DAY_MS = 24 * 60 * 60 * 1000;

/** Whether every sub-goal is `completed` or `skipped`, and at least one completed (an empty plan is not a success). */
export function goalComplete(goal: Goal): boolean {
  return (
    goal.subGoals.some((s) => s.status === "completed") && goal.subGoals.every((s) => s.status === "completed" || s.status === "skipped")
  );
}

/** Pending sub-goals whose dependencies are all completed, highest priority (lowest number) first, then plan order. */
export function runnable(goal: Goal): SubGoal[] {
  const done = new Set(goal.subGoals.filter((s) => s.status === "completed").map((s) => s.id));
  return goal.subGoals
    .map((s, index) => ({ s, index }))
    .filter(({ s }) => s.status === "pending" && s.dependsOn.every((d) => done.has(d)))
    .sort((a, b) => a.s.priority - b.s.priority || a.index - b.index)
    .map(({ s }) => s);
}

/** The sub-goals of the next wave: those still in progress (a takeover re-awaits them), then runnable ones up to `maxParallel`. */
export function nextWave(goal: Goal, maxParallel: number): SubGoal[] {
  const inProgress = goal.subGoals.filter((s) => s.status === "in-progress");
  const room = Math.max(0, maxParallel - inProgress.length);
  return [...inProgress, ...runnable(goal).slice(0, room)];
}

/** The task id of a sub-goal: derived, so a Supervisor that takes the goal over finds the same task. */
export function subGoalTaskId(goalId: string, subGoalId: string): TaskId {
  // A valid task id by construction: the Goal schema keeps a goal id to 40 characters and a sub-goal id to 12, both
  // of the task-id alphabet, so the two joined by '-' are at most 53 characters of it.
  return `${goalId}-${subGoalId}` as TaskId;
}

/**
 * The task of a sub-goal of goal `goalId`: the one it records (set by {@link startWave}), else the derived one. The
 * recorded one is read back from the goals bucket as a plain string, so it is checked before it is used as a task id.
 */
export function taskOfSubGoal(goalId: string, s: SubGoal): TaskId {
  return parseTaskId(s.taskId) ?? subGoalTaskId(goalId, s.id);
}

/** Cost of the goal in the 24 hours before `now`. */
export function cost24h(costs: readonly CostEntry[], now: number): number {
  return costs.filter((c) => c.at > now - DAY_MS).reduce((sum, c) => sum + c.usd, 0);
}

/**
 * The metric triggers, at no model cost: a failed sub-goal is a major divergence; so is a goal whose cost over the
 * last 24 h passed the threshold. `undefined`: no metric decides, the model judges.
 */
export function metricDivergence(
  subGoalId: string,
  outcome: SubGoalOutcome,
  costs: readonly CostEntry[],
  now: number,
  thresholdUsd: number,
): DivergenceEvaluation | undefined {
  if (!outcome.success)
    return {
      subGoalId,
      divergent: true,
      severity: "major",
      reason: `Sub-goal failed: ${outcome.error ?? "no reason given"}`,
      source: "metric",
    };
  const spent = cost24h(costs, now);
  if (spent > thresholdUsd) {
    return {
      subGoalId,
      divergent: true,
      severity: "major",
      reason: `Goal cost over the last 24 h is ${spent.toFixed(4)} USD, over the ${thresholdUsd} USD threshold`,
      source: "metric",
    };
  }
  return undefined;
}

/**
 * Normalises a model judgement so severity and divergence agree: divergent with severity none → minor (a divergence
 * the model saw is never dropped); not divergent → none.
 */
export function normaliseJudgement(
  subGoalId: string,
  judgement: { divergent: boolean; severity: "none" | "minor" | "major"; reason: string },
): DivergenceEvaluation {
  if (!judgement.divergent) return { subGoalId, divergent: false, severity: "none", reason: judgement.reason, source: "model" };
  return {
    subGoalId,
    divergent: true,
    severity: judgement.severity === "none" ? "minor" : judgement.severity,
    reason: judgement.reason,
    source: "model",
  };
}

/** A judgement that failed: unknown, never "not divergent". */
export function unknownJudgement(subGoalId: string, reason: string): DivergenceEvaluation {
  return { subGoalId, divergent: null, severity: "unknown", reason, source: "model" };
}

/** The replan decision and why. */
export interface ReplanDecision {
  replan: boolean;
  /** Whether a major divergence triggered it (operators are alerted only for major replans and escalations). */
  major: boolean;
  reason: string;
}

/**
 * The replan rule: one major divergence replans at once; minor ones replan once they pile up (more than 2), and so
 * does a plan that goes wrong more often than right (at least 4 evaluations, more than half divergent). Unknown
 * evaluations count towards neither side.
 */
export function shouldReplan(evaluations: readonly DivergenceEvaluation[]): ReplanDecision {
  const known = evaluations.filter((e) => e.severity !== "unknown");
  const major = known.find((e) => e.severity === "major");
  if (major) return { replan: true, major: true, reason: `major divergence at ${major.subGoalId}: ${major.reason}` };
  const minors = known.filter((e) => e.severity === "minor").length;
  if (minors > 2) return { replan: true, major: false, reason: `${minors} minor divergences` };
  const divergent = known.filter((e) => e.divergent === true).length;
  if (known.length >= 4 && divergent > known.length / 2)
    return { replan: true, major: false, reason: `${divergent} of ${known.length} evaluations divergent` };
  return { replan: false, major: false, reason: "" };
}

/**
 * Appends a plan's items as new pending sub-goals of round `goal.rounds + 1`. Ids are `s<n>`, numbered on from the
 * existing ones; `dependsOn` may name plan ids (mapped) or existing sub-goal ids; unknown names are dropped.
 */
export function applyPlan(goal: Goal, plan: GoalPlan): Goal {
  const round = goal.rounds + 1;
  let next = goal.subGoals.length + 1;
  const idOf = new Map<string, string>();
  const fresh = plan.subGoals.map((item, i) => {
    const id = `s${next++}`;
    idOf.set(item.id ?? String(i + 1), id);
    return { item, id };
  });
  const existing = new Set(goal.subGoals.map((s) => s.id));
  const added: SubGoal[] = fresh.map(({ item, id }) => ({
    id,
    description: item.description,
    status: "pending",
    dependsOn: item.dependsOn.map((d) => idOf.get(d) ?? (existing.has(d) ? d : "")).filter((d) => d !== "" && d !== id),
    priority: item.priority,
    round,
  }));
  return { ...goal, rounds: round, subGoals: [...goal.subGoals, ...added] };
}

/** Replaces one sub-goal. */
export function withSubGoal(goal: Goal, id: string, change: (s: SubGoal) => SubGoal): Goal {
  return { ...goal, subGoals: goal.subGoals.map((s) => (s.id === id ? change(s) : s)) };
}

/** Counts of sub-goals by status (for lists and events). */
export function statusCounts(goal: Goal): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const s of goal.subGoals) counts[s.status] = (counts[s.status] ?? 0) + 1;
  return counts;
}

/** What a wave's bookkeeping changes: the goal, the sub-goals still running and those the model judges. */
export interface WaveState {
  goal: Goal;
  wave: string[];
  toJudge: string[];
}

/** A sub-goal whose task ended; `at`: when (ms since the epoch). */
export interface Settlement {
  subGoalId: string;
  outcome: SubGoalOutcome;
  at: number;
}

/**
 * A settled sub-goal: its cost is booked on the goal (when it has one), it becomes completed or failed with its
 * outcome, it leaves the wave, and the metric triggers evaluate it (a failure, or the goal's 24 h cost over
 * `thresholdUsd`); an outcome no metric decided is left for the model to judge.
 */
export function settle(state: WaveState, settled: Settlement, thresholdUsd: number): WaveState & { lastSettled: string } {
  const { subGoalId, outcome, at } = settled;
  const costs = outcome.costUsd ? [...state.goal.costs, { at, usd: outcome.costUsd }] : state.goal.costs;
  let goal = withSubGoal({ ...state.goal, costs }, subGoalId, (s) => ({ ...s, status: outcome.success ? "completed" : "failed", outcome }));
  const metric = metricDivergence(subGoalId, outcome, costs, at, thresholdUsd);
  if (metric) goal = { ...goal, evaluations: [...goal.evaluations, metric] };
  return {
    goal,
    wave: state.wave.filter((id) => id !== subGoalId),
    toJudge: metric ? state.toJudge : [...state.toJudge, subGoalId],
    lastSettled: subGoalId,
  };
}

/** The next wave starts: its sub-goals become in-progress, each with its task id. */
export function startWave(goal: Goal, maxParallel: number): { goal: Goal; wave: string[] } {
  const wave = nextWave(goal, maxParallel);
  let next = goal;
  for (const s of wave) next = withSubGoal(next, s.id, (x) => ({ ...x, status: "in-progress", taskId: taskOfSubGoal(next.id, x) }));
  return { goal: next, wave: wave.map((s) => s.id) };
}

/** A review decision of an in-progress sub-goal during a replan. */
export interface KeepResult {
  subGoalId: string;
  keep: boolean;
  reason: string;
}

/** The in-progress sub-goals the review did not keep become skipped, and their tasks are to be cancelled. */
export function skipUnkeptAndCancel(goal: Goal, decisions: readonly KeepResult[]): { goal: Goal; cancelled: TaskId[] } {
  const next = skipUnkept(goal, decisions);
  const skipped = goal.subGoals.filter((s) => s.status === "in-progress" && next.subGoals.find((x) => x.id === s.id)?.status === "skipped");
  return { goal: next, cancelled: skipped.map((s) => taskOfSubGoal(next.id, s)) };
}

/** A sub-goal whose judgement failed: unknown. */
export function failedJudgement(subGoalId: string): DivergenceEvaluation {
  return { subGoalId, divergent: null, severity: "unknown", reason: "the judgement failed", source: "model" };
}

/** In-progress sub-goals the review did not keep become skipped; no decision keeps (conservative). */
export function skipUnkept(goal: Goal, decisions: readonly KeepResult[]): Goal {
  let next = goal;
  for (const d of decisions) {
    const s = goal.subGoals.find((x) => x.id === d.subGoalId);
    if (s?.status === "in-progress" && !d.keep)
      next = withSubGoal(next, s.id, (x) => ({ ...x, status: "skipped", skipReason: d.reason || "not kept by the replan" }));
  }
  return next;
}

/**
 * Every pending sub-goal becomes skipped, and so does every failed one: the new plan replaces it (its outcome, with
 * the error, stays on it), so a goal can still complete after a replan.
 */
export function skipStale(goal: Goal, replan: number): Goal {
  return {
    ...goal,
    subGoals: goal.subGoals.map((s) => {
      if (s.status === "pending") return { ...s, status: "skipped" as const, skipReason: `skipped by replan ${replan}` };
      if (s.status === "failed") return { ...s, status: "skipped" as const, skipReason: `failed; replaced by replan ${replan}` };
      return s;
    }),
  };
}

export function evaluationSummary(evaluations: readonly DivergenceEvaluation[]): string {
  return evaluations.map((e) => `${e.subGoalId}: ${e.severity}${e.reason ? ` (${e.reason})` : ""}`).join("; ");
}
