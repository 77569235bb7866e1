/**
 * The effects of the goal machine: every model step of a goal is an ordinary dirigent task submitted on
 * `<root>.tasks.submit` (so it is durable, recorded, budgeted and visible like any task), under an id derived from
 * the goal, so a Supervisor that takes a goal over finds the same tasks again instead of running them twice.
 *
 * - `decompose`: `<goal>-plan<round>-r<replans>`, answers a {@link GoalPlan} as JSON.
 * - `runWave`: one task per sub-goal (`<goal>-<sub-goal>`); results are collected as they arrive.
 * - `judge`: `<goal>-judge-<sub-goal>` on the cheap-tier model, answers a {@link DivergenceJudgement}.
 * - `review`: `<goal>-keep-<sub-goal>-r<replans>` on the cheap-tier model, answers a {@link KeepDecision}.
 */
import { fromCallback, fromPromise } from "xstate";
import {
  DivergenceJudgement,
  GoalPlan,
  KeepDecision,
  parseAnswer,
  Requests,
  TaskId,
  type DivergenceEvaluation,
  type Goal,
  type SubGoalOutcome,
  type TaskOutcome,
} from "../../protocol/index.js";
import { GOAL_DEFAULTS, normaliseJudgement, unknownJudgement, type KeepResult, type WaveItem } from "../../machines/supervisor/goal.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { collectResults, type CollectedResult } from "./result-collector.js";
import { ask } from "../ask.js";

/** Settings of the goal effects. */
export interface GoalEffectOptions {
  /** Cheap-tier model of divergence judgements and replan reviews; the Handler's default model when absent. */
  cheapModel?: string | undefined;
  /** Longest a sub-goal's task may take before it counts as failed (timeout). */
  subGoalTimeoutMs: number;
  /** Longest a decomposition, judgement or review task may take. */
  stepTimeoutMs: number;
}

const ATOMIC = (model: string | undefined) => `<task type="atomic">
  <description>{{request}}</description>
  <system>{{system}}</system>${model ? `\n  <model>${escapeXml(model)}</model>` : ""}
</task>`;

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Submits an atomic task whose texts travel as inputs (never parsed as XML nor scanned for `{{…}}`). */
export async function submitTask(
  deps: ActorDeps,
  taskId: TaskId,
  request: string,
  system: string,
  model: string | undefined,
): Promise<void> {
  await ask(deps, Requests.submit, { taskId, xml: ATOMIC(model), inputs: { request, system } }, { timeoutMs: 10_000 });
}

/**
 * The id of a goal's step task, derived from the goal: a valid task id unless the goal has run to thousands of rounds
 * or replans, when it is too long and the step fails, as it did when the Director refused to take it.
 */
function stepTaskId(id: string): TaskId {
  const parsed = TaskId.safeParse(id);
  if (!parsed.success) throw new Error(`task id '${id}': ${parsed.error.issues[0]?.message ?? "not a task id"}`);
  return parsed.data;
}

/** Submits a task (or finds it, after a takeover) and waits for its outcome. */
async function runTask(
  deps: ActorDeps,
  taskId: TaskId,
  request: string,
  system: string,
  model: string | undefined,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<TaskOutcome> {
  await submitTask(deps, taskId, request, system, model);
  const [result] = await collectResults(deps, [taskId], { timeoutMs, ...(signal ? { signal } : {}) });
  if (!result || !("outcome" in result)) throw new Error(`task ${taskId}: ${result && "error" in result ? result.error : "no result"}`);
  return result.outcome;
}

/** The outcome of a sub-goal's task as the goal keeps it. */
export function outcomeOf(result: CollectedResult): SubGoalOutcome {
  if (!("outcome" in result)) return { success: false, content: "", error: result.error };
  const { outcome } = result;
  const cost = typeof outcome.notes["task_cost"] === "number" ? outcome.notes["task_cost"] : undefined;
  return {
    success: outcome.status === "COMPLETE",
    content: outcome.content.slice(0, GOAL_DEFAULTS.outcomeChars),
    ...(outcome.status === "COMPLETE" ? {} : { error: outcome.error?.message ?? outcome.status.toLowerCase() }),
    ...(cost !== undefined ? { costUsd: cost } : {}),
  };
}

function progressOf(goal: Goal): string {
  const done = goal.subGoals.filter((s) => s.status === "completed");
  if (done.length === 0) return "(nothing yet)";
  return done.map((s) => `- ${s.description}: ${(s.outcome?.content ?? "").slice(0, 500)}`).join("\n");
}

export function planRequest(goal: Goal): string {
  const history =
    goal.subGoals.length === 0
      ? ""
      : `\n\nWhat happened so far (sub-goal: status):\n${goal.subGoals.map((s) => `- ${s.description}: ${s.status}${s.outcome?.error ? ` (${s.outcome.error})` : ""}`).join("\n")}`;
  return `Decompose this goal into 1 to 10 concrete sub-goals, each small enough for one task.\n\nGOAL: ${goal.description}${history}\n\nAnswer with JSON only: {"subGoals": [{"id": "1", "description": "…", "dependsOn": [], "priority": 50}]}. "dependsOn" lists ids of sub-goals that must be completed first; a lower priority number runs first.`;
}

export function judgeRequest(goal: Goal, subGoalId: string): string {
  const s = goal.subGoals.find((x) => x.id === subGoalId);
  return `Does this outcome diverge from the goal?\n\nGOAL: ${goal.description}\nSUB-GOAL: ${s?.description ?? subGoalId}\nOUTCOME:\n${s?.outcome?.content ?? ""}\n\nAnswer with JSON only: {"divergent": true|false, "severity": "none"|"minor"|"major", "reason": "…"}`;
}

export function reviewRequest(goal: Goal, subGoalId: string, reason: string): string {
  const s = goal.subGoals.find((x) => x.id === subGoalId);
  return `The goal is being replanned (${reason}). Should this sub-goal, still in progress, be kept?\n\nGOAL: ${goal.description}\nSUB-GOAL: ${s?.description ?? subGoalId}\n\nAnswer with JSON only: {"keep": true|false, "reason": "…"}`;
}

/** The goal machine's actors, bound to the bus. `now` stamps settled outcomes (the 24 h cost window). */
export function goalActors(deps: ActorDeps, options: GoalEffectOptions) {
  const cheap = options.cheapModel;
  return {
    decompose: fromPromise<GoalPlan, { goal: Goal }>(async ({ input: { goal }, signal }) => {
      const outcome = await runTask(
        deps,
        stepTaskId(`${goal.id}-plan${goal.rounds + 1}-r${goal.replanCount}`),
        planRequest(goal),
        "You plan work. Answer with JSON only.",
        undefined,
        options.stepTimeoutMs,
        signal,
      );
      if (outcome.status !== "COMPLETE") throw new Error(`the decomposition task failed: ${outcome.error?.message ?? outcome.status}`);
      const plan = parseAnswer(GoalPlan, outcome.content);
      if (!plan.ok) throw new Error(`the decomposition is not a plan: ${plan.error}`);
      return plan.value;
    }),

    runWave: fromCallback<{ type: "noop" }, { goal: Goal; items: WaveItem[] }>(({ input: { goal, items }, sendBack }) => {
      const abort = new AbortController();
      const system = (item: WaveItem) =>
        `You work on one step of a larger goal. GOAL: ${goal.description}\nDone so far:\n${progressOf(goal)}\nDo only this step: ${item.description}`;
      void (async () => {
        const submitted: TaskId[] = [];
        for (const item of items) {
          try {
            await submitTask(deps, item.taskId, item.description, system(item), undefined);
            submitted.push(item.taskId);
          } catch (err) {
            if (abort.signal.aborted) return;
            sendBack({
              type: "subgoal.settled",
              subGoalId: item.subGoalId,
              outcome: { success: false, content: "", error: `could not submit: ${messageOf(err)}` },
              at: deps.now().getTime(),
            });
          }
        }
        await collectResults(deps, submitted, {
          timeoutMs: options.subGoalTimeoutMs,
          signal: abort.signal,
          onSettled: (result) => {
            if (abort.signal.aborted) return;
            const item = items.find((i) => i.taskId === result.taskId);
            if (item)
              sendBack({ type: "subgoal.settled", subGoalId: item.subGoalId, outcome: outcomeOf(result), at: deps.now().getTime() });
          },
        });
      })().catch((err: unknown) => deps.log.error({ goalId: goal.id, err: messageOf(err) }, "goal wave failed"));
      return () => abort.abort();
    }),

    judge: fromPromise<DivergenceEvaluation[], { goal: Goal; subGoalIds: string[] }>(async ({ input: { goal, subGoalIds }, signal }) =>
      Promise.all(
        subGoalIds.map(async (id) => {
          try {
            const outcome = await runTask(
              deps,
              stepTaskId(`${goal.id}-judge-${id}`),
              judgeRequest(goal, id),
              "You judge progress towards a goal. Answer with JSON only.",
              cheap,
              options.stepTimeoutMs,
              signal,
            );
            if (outcome.status !== "COMPLETE")
              return unknownJudgement(id, `the judgement task failed: ${outcome.error?.message ?? outcome.status}`);
            const judgement = parseAnswer(DivergenceJudgement, outcome.content);
            return judgement.ok
              ? normaliseJudgement(id, judgement.value)
              : unknownJudgement(id, `the judgement is not valid: ${judgement.error}`);
          } catch (err) {
            return unknownJudgement(id, `the judgement failed: ${messageOf(err)}`);
          }
        }),
      ),
    ),

    review: fromPromise<KeepResult[], { goal: Goal; subGoalIds: string[]; reason: string }>(
      async ({ input: { goal, subGoalIds, reason }, signal }) =>
        Promise.all(
          subGoalIds.map(async (id): Promise<KeepResult> => {
            try {
              const outcome = await runTask(
                deps,
                stepTaskId(`${goal.id}-keep-${id}-r${goal.replanCount}`),
                reviewRequest(goal, id, reason),
                "You review plans. Answer with JSON only.",
                cheap,
                options.stepTimeoutMs,
                signal,
              );
              const decision = outcome.status === "COMPLETE" ? parseAnswer(KeepDecision, outcome.content) : undefined;
              // Conservative: anything but a clear "no" keeps it.
              return decision?.ok
                ? { subGoalId: id, keep: decision.value.keep, reason: decision.value.reason }
                : { subGoalId: id, keep: true, reason: "kept: the review failed" };
            } catch (err) {
              return { subGoalId: id, keep: true, reason: `kept: the review failed (${messageOf(err)})` };
            }
          }),
        ),
    ),
  };
}
