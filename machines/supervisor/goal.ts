/**
 * One goal's cycle: decompose → run a wave of sub-goals → evaluate each outcome for
 * divergence → replan or carry on, until every sub-goal is completed or skipped.
 *
 * starting → decomposing → selecting → running → judging → deciding → selecting … → completed
 *                                         ↘ (metric major) ↘ (replan rule) → replanning → reviewing → decomposing
 *                                                                             ↘ (past maxReplans) → paused
 * - A wave is the sub-goals still in progress plus the runnable ones (dependencies completed, by priority), up to
 *   `maxParallel`. Each runs as one task (`runWave` reports each as it settles).
 * - A settled outcome is evaluated at once by the metric triggers (a failure, or the goal's 24 h cost over the
 *   threshold: major). A metric major stops waiting for the wave and replans; outcomes no metric decided are judged
 *   by the cheap-tier model once the wave has settled (`judge`); a failed judgement is `unknown`.
 * - A replan counts up; past `maxReplans` the goal is **paused** with an escalation alert and waits for an operator's
 *   resume. Otherwise in-progress sub-goals are reviewed (keep or skip; a failed review keeps), pending and failed
 *   ones are skipped (the new plan replaces them), the goal is decomposed again, and the evaluations start afresh. Major replans alert the operator.
 * - `stop` (lease lost, cancelled, paused from outside) ends the cycle at once in `stopped`.
 * Effects: `decompose`, `runWave`, `judge`, `review`; actions `persist` (store the goal), `publish` (a goal event),
 * `alert` (operator alert), `cancelTasks`.
 */
import { assertEvent, assign, enqueueActions, fromCallback, fromPromise, setup } from "xstate";
import type { DivergenceEvaluation, Goal, GoalPlan, SubGoalOutcome, TaskId } from "../../protocol/index.js";
import {
  applyPlan,
  goalComplete,
  nextWave,
  settle,
  shouldReplan,
  startWave,
  statusCounts,
  subGoalTaskId,
  taskOfSubGoal,
  skipStale,
  skipUnkeptAndCancel,
  failedJudgement,
  evaluationSummary,
  type KeepResult,
  GOAL_DEFAULTS,
} from "./goal-plan.js";
import { notProvided } from "../not-provided.js";

export * from "./goal-plan.js";

/** Input of the goal machine. */
export interface GoalInput {
  goal: Goal;
  costThresholdUsd?: number;
  maxParallel?: number;
}

/** A sub-goal of a wave, as `runWave` gets it. */
export interface WaveItem {
  subGoalId: string;
  taskId: TaskId;
  description: string;
}

/** Sent by `runWave` for each sub-goal whose task ended; `at`: when (ms since the epoch). */
export interface SettledEvent {
  type: "subgoal.settled";
  subGoalId: string;
  outcome: SubGoalOutcome;
  at: number;
}

/** Events of the goal machine. */
export type GoalMachineEvent = SettledEvent | { type: "stop"; reason: string };

interface GoalContext {
  goal: Goal;
  costThresholdUsd: number;
  maxParallel: number;
  /** Sub-goals of the running wave not settled yet. */
  wave: string[];
  /** Settled sub-goals of this wave no metric decided: the model judges them. */
  toJudge: string[];
  replan: { major: boolean; reason: string };
  /** The sub-goal that settled last (for its event). */
  lastSettled?: string;
  /** Tasks of in-progress sub-goals a replan skipped: cancelled. */
  cancelled: TaskId[];
  stopReason?: string;
}

/** What the cycle ended with. */
export interface GoalOutput {
  status: "completed" | "paused" | "stopped";
  goal: Goal;
  reason?: string;
}

export interface GoalEventParams {
  type: string;
  message: string;
  data?: Record<string, unknown>;
}

const event = (type: string, message: (c: GoalContext) => string, data?: (c: GoalContext) => Record<string, unknown>) => ({
  type: "publish" as const,
  params: ({ context }: { context: GoalContext }): GoalEventParams => ({
    type,
    message: message(context),
    ...(data ? { data: data(context) } : {}),
  }),
});
const persist = { type: "persist" as const, params: ({ context }: { context: GoalContext }) => ({ goal: context.goal }) };

/** The goal machine. */
export const goalMachine = setup({
  types: {
    input: {} as GoalInput,
    context: {} as GoalContext,
    events: {} as GoalMachineEvent,
    output: {} as GoalOutput,
  },
  actions: {
    persist: (_, _params: { goal: Goal }) => undefined,
    publish: (_, _params: GoalEventParams) => undefined,
    alert: (_, _params: { kind: "goal.escalated" | "goal.major_replan"; reason: string; goal: Goal }) => undefined,
    cancelTasks: (_, _params: { taskIds: TaskId[] }) => undefined,
    recordStop: assign({ stopReason: ({ event }) => (assertEvent(event, "stop"), event.reason) }),
    applyPlan: assign({ goal: ({ context }, params: { plan: GoalPlan }) => applyPlan(context.goal, params.plan) }),
    replanNothingRunnable: assign({ replan: () => ({ major: false, reason: "no runnable sub-goal is left" }) }),
    startWave: assign(({ context }) => startWave(context.goal, context.maxParallel)),
    settleSubGoal: assign(
      ({ context, event }) => (assertEvent(event, "subgoal.settled"), settle(context, event, context.costThresholdUsd)),
    ),
    planReplan: assign({ replan: ({ context }) => shouldReplan(context.goal.evaluations) }),
    recordJudgements: assign({
      goal: ({ context }, params: { evaluations: DivergenceEvaluation[] }) => ({
        ...context.goal,
        evaluations: [...context.goal.evaluations, ...params.evaluations],
      }),
      toJudge: () => [],
    }),
    recordJudgementFailed: assign({
      goal: ({ context }) => ({ ...context.goal, evaluations: [...context.goal.evaluations, ...context.toJudge.map(failedJudgement)] }),
      toJudge: () => [],
    }),
    countReplan: assign({ goal: ({ context }) => ({ ...context.goal, replanCount: context.goal.replanCount + 1 }) }),
    pauseEscalated: assign({
      goal: ({ context }) => ({
        ...context.goal,
        status: "paused",
        pauseReason: `escalated after ${context.goal.maxReplans} replan(s): ${context.replan.reason}`,
      }),
    }),
    skipUnkept: assign(({ context }, params: { decisions: KeepResult[] }) => skipUnkeptAndCancel(context.goal, params.decisions)),
    keepAll: assign({ cancelled: () => [] }),
    startAfresh: assign(({ context }) => ({
      goal: { ...skipStale(context.goal, context.goal.replanCount), evaluations: [] },
      wave: [],
      toJudge: [],
    })),
    markCompleted: assign({ goal: ({ context }) => ({ ...context.goal, status: "completed" }) }),
  },
  actors: {
    decompose: fromPromise<GoalPlan, { goal: Goal }>(async () => notProvided("goal.decompose")),
    runWave: fromCallback<{ type: "noop" }, { goal: Goal; items: WaveItem[] }>(() => notProvided("goal.runWave")),
    judge: fromPromise<DivergenceEvaluation[], { goal: Goal; subGoalIds: string[] }>(async () => notProvided("goal.judge")),
    review: fromPromise<KeepResult[], { goal: Goal; subGoalIds: string[]; reason: string }>(async () => notProvided("goal.review")),
  },
  guards: {
    inWave: ({ context, event }) => event.type === "subgoal.settled" && context.wave.includes(event.subGoalId),
    hasPlan: ({ context }) => context.goal.subGoals.length > 0,
    complete: ({ context }) => goalComplete(context.goal),
    canRun: ({ context }) => nextWave(context.goal, context.maxParallel).length > 0,
    waveSettled: ({ context }) => context.wave.length === 0,
    metricMajor: ({ context }) =>
      context.goal.evaluations.at(-1)?.source === "metric" && context.goal.evaluations.at(-1)?.severity === "major",
    nothingToJudge: ({ context }) => context.toJudge.length === 0,
    replanRule: ({ context }) => shouldReplan(context.goal.evaluations).replan,
    pastLimit: ({ context }) => context.goal.replanCount > context.goal.maxReplans,
  },
}).createMachine({
  id: "goal",
  context: ({ input }) => ({
    goal: input.goal,
    costThresholdUsd: input.costThresholdUsd ?? GOAL_DEFAULTS.costThresholdUsd,
    maxParallel: input.maxParallel ?? GOAL_DEFAULTS.maxParallel,
    wave: [],
    toJudge: [],
    cancelled: [],
    replan: { major: false, reason: "" },
  }),
  on: {
    stop: { target: ".stopped", actions: "recordStop" },
  },
  initial: "starting",
  states: {
    starting: {
      description: "A goal without sub-goals is decomposed first; a stored one (a takeover, a resume) carries on.",
      always: [{ guard: "hasPlan", target: "selecting" }, { target: "decomposing" }],
    },
    decomposing: {
      description: "The model writes the plan: sub-goals with dependencies and priorities.",
      invoke: {
        src: "decompose",
        input: ({ context }) => ({ goal: context.goal }),
        onDone: {
          target: "selecting",
          actions: [
            { type: "applyPlan", params: ({ event }) => ({ plan: event.output }) },
            persist,
            event(
              "goal.decomposed",
              (c) => `plan ${c.goal.rounds}: ${c.goal.subGoals.filter((s) => s.round === c.goal.rounds).length} sub-goal(s)`,
              (c) => ({
                round: c.goal.rounds,
                subGoals: c.goal.subGoals
                  .filter((s) => s.round === c.goal.rounds)
                  .map((s) => ({ id: s.id, description: s.description, dependsOn: s.dependsOn, priority: s.priority })),
              }),
            ),
          ],
        },
        onError: {
          target: "selecting",
          actions: event(
            "goal.decompose_failed",
            () => "the decomposition failed",
            () => ({}),
          ),
        },
      },
    },
    selecting: {
      description: "Complete when every sub-goal is completed or skipped; else run the next wave; nothing runnable replans.",
      always: [
        { guard: "complete", target: "completed" },
        { guard: "canRun", target: "running" },
        { target: "replanning", actions: "replanNothingRunnable" },
      ],
    },
    running: {
      description: "The wave's tasks run; each outcome is recorded and checked by the metric triggers as it settles.",
      entry: [
        "startWave",
        persist,
        event(
          "subgoal.started",
          (c) => `running ${c.wave.join(", ")}`,
          (c) => ({ subGoals: c.wave, taskIds: c.wave.map((id) => subGoalTaskId(c.goal.id, id)) }),
        ),
      ],
      invoke: {
        src: "runWave",
        input: ({ context }) => ({
          goal: context.goal,
          items: context.goal.subGoals
            .filter((s) => context.wave.includes(s.id))
            .map((s) => ({ subGoalId: s.id, taskId: taskOfSubGoal(context.goal.id, s), description: s.description })),
        }),
      },
      always: [
        { guard: "metricMajor", target: "replanning", actions: "planReplan" },
        { guard: "waveSettled", target: "judging" },
      ],
      on: {
        "subgoal.settled": {
          guard: "inWave",
          actions: [
            "settleSubGoal",
            persist,
            event(
              "subgoal.settled",
              (c) => {
                const s = c.goal.subGoals.find((x) => x.id === c.lastSettled);
                return s ? `${s.id} ${s.status}${s.outcome?.error ? `: ${s.outcome.error}` : ""}` : "sub-goal settled";
              },
              (c) => ({ subGoalId: c.lastSettled, counts: statusCounts(c.goal) }),
            ),
          ],
        },
      },
    },
    judging: {
      description: "The cheap-tier model judges the outcomes no metric decided; a failed judgement is unknown.",
      always: { guard: "nothingToJudge", target: "deciding" },
      invoke: {
        src: "judge",
        input: ({ context }) => ({ goal: context.goal, subGoalIds: context.toJudge }),
        onDone: {
          target: "deciding",
          actions: [
            { type: "recordJudgements", params: ({ event }) => ({ evaluations: event.output }) },
            persist,
            event(
              "goal.evaluation",
              (c) => evaluationSummary(c.goal.evaluations.slice(-1)),
              (c) => ({ evaluations: c.goal.evaluations }),
            ),
          ],
        },
        onError: {
          target: "deciding",
          actions: ["recordJudgementFailed", persist],
        },
      },
    },
    deciding: {
      description: "The replan rule over the evaluations since the last replan.",
      always: [{ guard: "replanRule", target: "replanning", actions: "planReplan" }, { target: "selecting" }],
    },
    replanning: {
      description: "A replan counts; past the limit the goal is paused and an operator alerted.",
      entry: "countReplan",
      always: [
        {
          guard: "pastLimit",
          target: "paused",
          actions: [
            "pauseEscalated",
            persist,
            {
              type: "alert",
              params: ({ context }) => ({
                kind: "goal.escalated" as const,
                reason: context.goal.pauseReason ?? context.replan.reason,
                goal: context.goal,
              }),
            },
            event(
              "goal.paused",
              (c) => `paused: ${c.goal.pauseReason ?? ""}`,
              (c) => ({ replanCount: c.goal.replanCount }),
            ),
          ],
        },
        { target: "reviewing", actions: persist },
      ],
    },
    reviewing: {
      description: "Each in-progress sub-goal is kept or skipped (a failed review keeps it).",
      invoke: {
        src: "review",
        input: ({ context }) => ({
          goal: context.goal,
          subGoalIds: context.goal.subGoals.filter((s) => s.status === "in-progress").map((s) => s.id),
          reason: context.replan.reason,
        }),
        onDone: {
          target: "replanned",
          actions: { type: "skipUnkept", params: ({ event }) => ({ decisions: event.output }) },
        },
        onError: { target: "replanned", actions: "keepAll" },
      },
    },
    replanned: {
      description: "Pending sub-goals are skipped, skipped tasks cancelled, evaluations start afresh; then a new plan.",
      entry: [
        "startAfresh",
        { type: "cancelTasks", params: ({ context }) => ({ taskIds: context.cancelled }) },
        persist,
        enqueueActions(({ context, enqueue }) => {
          if (context.replan.major)
            enqueue({ type: "alert", params: { kind: "goal.major_replan", reason: context.replan.reason, goal: context.goal } });
        }),
        event(
          "goal.replanned",
          (c) => `replan ${c.goal.replanCount}/${c.goal.maxReplans}: ${c.replan.reason}`,
          (c) => ({ replanCount: c.goal.replanCount, major: c.replan.major, reason: c.replan.reason }),
        ),
      ],
      always: { target: "decomposing" },
    },
    completed: {
      type: "final",
      description: "Every sub-goal is completed or skipped.",
      entry: [
        "markCompleted",
        persist,
        event(
          "goal.completed",
          (c) => `completed: ${summary(c)}`,
          (c) => ({ counts: statusCounts(c.goal) }),
        ),
      ],
    },
    paused: { type: "final", description: "Escalated: waits for `dirigent goal resume`." },
    stopped: { type: "final", description: "Stopped from outside (lease lost, paused or cancelled)." },
  },
  output: ({ context }) => {
    if (context.goal.status === "completed") return { status: "completed", goal: context.goal };
    if (context.goal.status === "paused")
      return { status: "paused", goal: context.goal, ...(context.goal.pauseReason ? { reason: context.goal.pauseReason } : {}) };
    return { status: "stopped", goal: context.goal, ...(context.stopReason ? { reason: context.stopReason } : {}) };
  },
});

function summary(c: GoalContext): string {
  return Object.entries(statusCounts(c.goal))
    .map(([k, v]) => `${v} ${k}`)
    .join(", ");
}
