/**
 * One goal's loop in a Supervisor: take the goal's lease, run the `goal` machine from the stored goal, store every
 * change with compare-and-set, renew the lease, and give it up when the machine ends. A write that loses its
 * compare-and-set (the goal was cancelled or changed by another process) or a lost lease stops the loop at once.
 */
import { createActor, toPromise } from "xstate";
import { encodeJson, parseTaskId, Requests, type Goal, type GoalEvent, type OperatorAlert, type TaskId } from "../../protocol/index.js";
import { goalMachine, taskOfSubGoal, type GoalOutput } from "../../machines/supervisor/goal.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { goalActors, type GoalEffectOptions } from "./goal-effects.js";
import type { GoalStore } from "./goal-store.js";
import { inspectOption } from "../inspect-option.js";
import { ask } from "../ask.js";

/** Settings of the goal loops of a Supervisor (part of its `SupervisorOptions`). */
export interface GoalLoopOptions {
  /** This process's name in leases and events. */
  owner: string;
  /** How long a lease holds without renewal; renewed every third of it. */
  leaseMs: number;
  /** Sub-goals of one goal run at once. */
  maxParallel: number;
  /** Cost per goal over 24 h that counts as a major divergence (USD). */
  costThresholdUsd: number;
  /** POST every operator alert there too. */
  alertWebhook?: string | undefined;
  effects: GoalEffectOptions;
}

/** A running loop. */
export interface LoopHandle {
  /** Stops the goal machine; `done` resolves once it has halted and the lease is given up. */
  stop(reason: string): void;
  readonly done: Promise<GoalOutput | undefined>;
}

/** Starts the loop of `goalId`; it ends at once (resolving `undefined`) when the lease is not free or the goal not active. */
export function runGoalLoop(deps: ActorDeps, store: GoalStore, goalId: string, options: GoalLoopOptions): LoopHandle {
  let stopRequest: string | undefined;
  let stopMachine: ((reason: string) => void) | undefined;
  const done = (async (): Promise<GoalOutput | undefined> => {
    const { log } = deps;
    const now = () => deps.now().getTime();
    if (!(await store.acquire(goalId, options.owner, now(), options.leaseMs))) return undefined;
    try {
      const stored = await store.get(goalId);
      if (!stored || stored.goal.status !== "active" || stopRequest !== undefined) return undefined;
      const started: GoalEvent = {
        goalId,
        type: "goal.started",
        status: "active",
        message: `run by ${options.owner}`,
        supervisor: options.owner,
        at: now(),
        data: { replanCount: stored.goal.replanCount, subGoals: stored.goal.subGoals.length },
      };
      deps.bus.publish(deps.subjects.goalEvents(goalId), encodeJson(started));
      let revision = stored.revision;
      let writes: Promise<void> = Promise.resolve();
      const actor = createActor(
        goalMachine.provide({
          actions: {
            persist: (_, { goal }) => {
              writes = writes.then(async () => {
                if (actor.getSnapshot().status === "stopped") return;
                const next = await store.update({ ...goal, updatedAt: now() }, revision).catch((err: unknown) => {
                  log.error({ goalId, err: messageOf(err) }, "goal write failed");
                  return undefined;
                });
                if (next === undefined) actor.send({ type: "stop", reason: "the goal was changed by another process" });
                else revision = next;
              });
            },
            // Events and alerts go out after the writes before them: what they announce is stored.
            publish: ({ context }, p) => {
              const message: GoalEvent = {
                goalId,
                type: p.type,
                status: context.goal.status,
                message: p.message,
                supervisor: options.owner,
                at: now(),
                ...(p.data ? { data: p.data } : {}),
              };
              writes = writes.then(() => deps.bus.publish(deps.subjects.goalEvents(goalId), encodeJson(message)));
            },
            alert: (_, p) => {
              writes = writes.then(() => void sendAlert(deps, options, p.kind, p.goal, p.reason));
            },
            cancelTasks: (_, { taskIds }) => void cancelTasks(deps, taskIds),
          },
          actors: goalActors(deps, options.effects),
        }),
        {
          input: { goal: stored.goal, costThresholdUsd: options.costThresholdUsd, maxParallel: options.maxParallel },
          ...inspectOption(deps, "supervisor"),
        },
      );
      stopMachine = (reason) => actor.send({ type: "stop", reason });
      const renew = setInterval(
        () => {
          store.acquire(goalId, options.owner, now(), options.leaseMs).then(
            (held) => held || actor.send({ type: "stop", reason: "the lease was lost" }),
            (err: unknown) => log.warn({ goalId, err: messageOf(err) }, "lease renewal failed"),
          );
        },
        Math.max(50, Math.floor(options.leaseMs / 3)),
      );
      try {
        actor.start();
        const output = await toPromise(actor);
        await writes;
        log.info({ goalId, status: output.status, reason: output.reason }, "goal loop ended");
        return output;
      } finally {
        clearInterval(renew);
        actor.stop();
      }
    } catch (err) {
      log.error({ goalId, err: messageOf(err) }, "goal loop failed");
      return undefined;
    } finally {
      await store.release(goalId, options.owner).catch(() => undefined);
    }
  })();
  return {
    stop(reason) {
      stopRequest = reason;
      stopMachine?.(reason);
    },
    done,
  };
}

/** Publishes an operator alert and POSTs it to the webhook, if one is configured (failures are logged, never fatal). */
async function sendAlert(
  deps: ActorDeps,
  options: GoalLoopOptions,
  kind: OperatorAlert["kind"],
  goal: Goal,
  reason: string,
): Promise<void> {
  const alert: OperatorAlert = {
    kind,
    goalId: goal.id,
    description: goal.description,
    reason,
    replanCount: goal.replanCount,
    at: deps.now().getTime(),
    ...(kind === "goal.escalated" ? { action: `dirigent goal resume ${goal.id}` } : {}),
  };
  deps.bus.publish(deps.subjects.operatorAlerts, encodeJson(alert));
  if (!options.alertWebhook) return;
  try {
    const response = await fetch(options.alertWebhook, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(alert),
      signal: AbortSignal.timeout(5_000),
    });
    if (!response.ok) deps.log.warn({ goalId: goal.id, status: response.status }, "alert webhook refused the alert");
  } catch (err) {
    deps.log.warn({ goalId: goal.id, err: messageOf(err) }, "alert webhook unreachable");
  }
}

/** Cancels tasks; unknown and finished ones are left as they are. */
export async function cancelTasks(deps: ActorDeps, taskIds: readonly TaskId[]): Promise<TaskId[]> {
  const cancelled = await Promise.all(
    taskIds.map(async (taskId) => {
      try {
        return (await ask(deps, Requests.taskCancel.at(taskId), {}, { timeoutMs: 10_000 })).cancelled ? taskId : undefined;
      } catch {
        return undefined;
      }
    }),
  );
  return cancelled.filter((id): id is TaskId => id !== undefined);
}

/**
 * Cancels every task of a goal's tree that may still run: the tasks of in-progress sub-goals, the next
 * decomposition, and the judgements and reviews that may be in flight. Each task's own cancellation reaches its
 * subtasks and the Handler sessions of every process. Returns the tasks this cancelled.
 */
export function cancelGoalTree(deps: ActorDeps, goal: Goal): Promise<TaskId[]> {
  const inProgress = goal.subGoals.filter((s) => s.status === "in-progress");
  const judged = new Set(goal.evaluations.map((e) => e.subGoalId));
  const steps = [
    `${goal.id}-plan${goal.rounds + 1}-r${goal.replanCount}`,
    ...goal.subGoals.filter((s) => s.outcome && !judged.has(s.id)).map((s) => `${goal.id}-judge-${s.id}`),
    ...inProgress.map((s) => `${goal.id}-keep-${s.id}-r${goal.replanCount}`),
  ];
  // A step id too long for a task id (a goal past thousands of rounds or replans) names no task that could run.
  const ids = [...inProgress.map((s) => taskOfSubGoal(goal.id, s)), ...steps.flatMap((id) => parseTaskId(id) ?? [])];
  return cancelTasks(deps, ids);
}
