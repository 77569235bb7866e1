/**
 * The Supervisor role: serves the goal API and runs goal cycles; goals, their work and operator alerts all go over NATS.
 *
 * Subjects: `<root>.goals.submit` and `<root>.goals.list`, `<root>.goals.*.get|resume|cancel` (queue group
 * `supervisor`); `<root>.control.goals` (every Supervisor: stop a loop, reconcile now); publishes
 * `<root>.goals.<id>.events` and `<root>.operator.alerts` (and POSTs alerts to a webhook when configured).
 *
 * Each process runs the `supervisor` machine (cap, stagger, reconciliation tick) and one `goal` machine per goal
 * it holds the lease of (`goals-loop.ts`). A lease expires unless renewed, so the goals of a Supervisor that died
 * are taken over by another, which carries on from the stored goal.
 */
import { createActor, fromPromise, type Actor } from "xstate";
import {
  decode,
  encodeJson,
  Goal,
  GoalControl,
  GoalGetReply,
  GoalId,
  GoalListReply,
  GoalReply,
  Requests,
  type GoalSummary,
} from "../../protocol/index.js";
import { statusCounts } from "../../machines/supervisor/goal.js";
import { supervisorMachine } from "../../machines/supervisor/supervisor.js";
import type { BusSubscription } from "../bus.js";
import { messageOf, type ActorDeps, type RoleHandle } from "../deps.js";
import { cancelGoalTree, runGoalLoop, type GoalLoopOptions, type LoopHandle } from "./goal-loop.js";
import { GoalStore, type KeyedStore } from "./goal-store.js";
import { inspectOption } from "../inspect-option.js";
import { RemoteError } from "../ask.js";
import { serve } from "../serve.js";

/** Settings of the Supervisor role: those of each goal's loop, and its own. */
export interface SupervisorOptions extends GoalLoopOptions {
  /** Goal cycles one process runs at once (default 5). */
  maxConcurrent: number;
  /** Pause between two starts (default 2 s). */
  staggerMs: number;
  /** Reconciliation tick (default 10 s). */
  tickMs: number;
  /** Replans before a goal is paused (for goals submitted without their own). */
  maxReplans: number;
  /** Requests served at once. */
  concurrency: number;
}

/** Starts the Supervisor role on a goals bucket. */
export function startSupervisor(deps: ActorDeps, kv: KeyedStore, options: SupervisorOptions): RoleHandle {
  const { subjects, log } = deps;
  const store = new GoalStore(kv);
  const loops = new Map<string, LoopHandle>();
  const control = (message: GoalControl) => deps.bus.publish(subjects.goalControl, encodeJson(message));

  let supervisor: Actor<typeof supervisorMachine>;
  const machine = supervisorMachine.provide({
    actions: {
      startLoop: (_, { goalId }) => {
        const handle = runGoalLoop(deps, store, goalId, options);
        loops.set(goalId, handle);
        void handle.done.finally(() => {
          loops.delete(goalId);
          supervisor.send({ type: "loop.halted", goalId });
        });
      },
      stopLoop: (_, { goalId, reason }) => loops.get(goalId)?.stop(reason),
    },
    actors: {
      listActive: fromPromise<string[], Record<string, never>>(async () => {
        const now = deps.now().getTime();
        const goals = await store.list((key, err) => log.warn({ key, err: messageOf(err) }, "goals bucket: entry skipped"));
        const active = goals.filter((g) => g.status === "active");
        const free = await Promise.all(active.map(async (g) => loops.has(g.id) || (await store.leaseFree(g.id, options.owner, now))));
        return active.filter((_, i) => free[i]).map((g) => g.id);
      }),
    },
  });
  supervisor = createActor(machine, {
    input: { maxConcurrent: options.maxConcurrent, staggerMs: options.staggerMs, tickMs: options.tickMs },
    systemId: "supervisor",
    ...inspectOption(deps, "supervisor"),
  });

  const getGoal = async (subject: string): Promise<Goal> => {
    const id = subjects.goalIdOf(subject) ?? "";
    if (!GoalId.safeParse(id).success) throw new RemoteError("INVALID_ID", `illegal goal id in subject '${subject}'`);
    const stored = await store.get(id);
    if (!stored) throw new RemoteError("NOT_FOUND", `no goal '${id}'`);
    return stored.goal;
  };
  const event = (goal: Goal, type: string, message: string) =>
    deps.bus.publish(
      subjects.goalEvents(goal.id),
      encodeJson({ goalId: goal.id, type, status: goal.status, message, supervisor: options.owner, at: deps.now().getTime() }),
    );

  const queue = subjects.queue("supervisor");
  const common = { queue, concurrency: options.concurrency };
  const subs: BusSubscription[] = [
    serve(deps, Requests.goalsSubmit, {
      ...common,
      handle: async (request) => {
        const now = deps.now().getTime();
        const goal = Goal.parse({
          id: request.goalId ?? deps.newId(),
          description: request.description,
          status: "active",
          ...(request.priority !== undefined ? { priority: request.priority } : {}),
          maxReplans: request.maxReplans ?? options.maxReplans,
          createdAt: now,
          updatedAt: now,
        });
        if ((await store.create(goal)) === "exists") return { goalId: goal.id, status: "duplicate" } satisfies GoalReply;
        event(goal, "goal.submitted", `goal submitted: ${goal.description.slice(0, 200)}`);
        control({ action: "reconcile" });
        return { goalId: goal.id, status: "accepted" } satisfies GoalReply;
      },
    }),
    serve(deps, Requests.goalsList, {
      ...common,
      handle: async () => {
        const goals = await store.list();
        return { goals: goals.map(summaryOf) } satisfies GoalListReply;
      },
    }),
    serve(deps, Requests.goalGet, { ...common, handle: async (_, msg) => ({ goal: await getGoal(msg.subject) }) satisfies GoalGetReply }),
    serve(deps, Requests.goalResume, {
      ...common,
      handle: async (_, msg) => {
        const goal = await getGoal(msg.subject);
        const result = await store.modify(goal.id, (g) => {
          if (g.status !== "paused") return undefined;
          const { pauseReason: _dropped, ...rest } = g;
          return { ...rest, status: "active", replanCount: 0, updatedAt: deps.now().getTime() };
        });
        if (!result?.changed) return { goalId: goal.id, status: "not_paused" } satisfies GoalReply;
        event(result.goal, "goal.resumed", "resumed by an operator: replan count reset");
        control({ action: "reconcile" });
        return { goalId: goal.id, status: "resumed" } satisfies GoalReply;
      },
    }),
    serve(deps, Requests.goalCancel, {
      ...common,
      handle: async (_, msg) => {
        const goal = await getGoal(msg.subject);
        const result = await store.modify(goal.id, (g) =>
          g.status === "completed" || g.status === "cancelled" ? undefined : { ...g, status: "cancelled", updatedAt: deps.now().getTime() },
        );
        if (!result?.changed) return { goalId: goal.id, status: "already_final" } satisfies GoalReply;
        control({ action: "stop", goalId: goal.id, reason: "the goal was cancelled" });
        const cancelled = await cancelGoalTree(deps, result.goal);
        event(result.goal, "goal.cancelled", `cancelled; ${cancelled.length} task(s) of its tree cancelled`);
        return { goalId: goal.id, status: "cancelled" } satisfies GoalReply;
      },
    }),
    deps.bus.subscribe(subjects.goalControl, (msg) => {
      const decoded = decode(GoalControl, msg.data);
      if (!decoded.ok) return void log.warn({ err: decoded.error.message }, "rejected goal control message");
      if (decoded.value.action === "reconcile") supervisor.send({ type: "reconcile" });
      else supervisor.send({ type: "goal.stop", goalId: decoded.value.goalId, reason: decoded.value.reason });
    }),
  ];
  supervisor.start();

  return {
    role: "supervisor",
    async stop() {
      await Promise.all(subs.map((s) => s.unsubscribe()));
      supervisor.send({ type: "drain" });
      await Promise.race([
        new Promise<void>((resolve) => supervisor.subscribe({ complete: resolve, error: () => resolve() })),
        new Promise<void>((resolve) => setTimeout(resolve, 10_000).unref()),
      ]);
      supervisor.stop();
    },
  };
}

function summaryOf(goal: Goal): GoalSummary {
  return {
    id: goal.id,
    description: goal.description,
    status: goal.status,
    priority: goal.priority,
    replanCount: goal.replanCount,
    ...(goal.pauseReason ? { pauseReason: goal.pauseReason } : {}),
    updatedAt: goal.updatedAt,
    counts: statusCounts(goal),
  };
}
