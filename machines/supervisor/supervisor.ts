/**
 * The Supervisor: runs goal cycles with a concurrency cap, starting them a stagger apart,
 * and reconciles on a tick: it starts loops for active goals and stops those whose goal is no longer active.
 *
 * Two parallel regions:
 * - `reconciling`: `listing` (the shell lists the active goals this process may run: lease free, expired or its own)
 *   → `idle` → after `TICK` → `listing`.
 * - `launching`: `ready` → (a goal queued and room under the cap) `starting` → after `STAGGER` → `ready`.
 * A loop counts as stopped only once it has halted (`loop.halted`): until then it holds its place under the cap
 * and its goal is never started a second time, not even by a tick that comes while the loop is finishing its turn.
 * Effects: `listActive`; actions `startLoop` and `stopLoop` (the shell runs and stops the goal machine).
 */
import { assertEvent, assign, enqueueActions, fromPromise, setup } from "xstate";
import { notProvided } from "../not-provided.js";

/** Defaults of the Supervisor, as the README documents them (set by `DIRIGENT_SUPERVISOR_MAX_GOALS`, `_STAGGER_MS`, `_TICK_MS`). */
export const SUPERVISOR_DEFAULTS = { maxConcurrent: 5, staggerMs: 2_000, tickMs: 10_000 } as const;

export interface SupervisorInput {
  maxConcurrent?: number;
  staggerMs?: number;
  tickMs?: number;
}

/** A loop of this process: `running` until asked to stop, `stopping` until it has halted. */
export type LoopState = "running" | "stopping";

interface SupervisorContext {
  maxConcurrent: number;
  staggerMs: number;
  tickMs: number;
  loops: Record<string, LoopState>;
  /** Active goals waiting for a start, in the order listed (priority first). */
  queue: string[];
  draining: boolean;
}

export type SupervisorEvent =
  /** A loop has halted (completed, paused, stopped or failed); its place under the cap is free. */
  | { type: "loop.halted"; goalId: string }
  /** Stop one goal's loop (cancelled or paused from outside, lease lost). */
  | { type: "goal.stop"; goalId: string; reason: string }
  /** List the active goals now instead of at the next tick (a goal was added or resumed). */
  | { type: "reconcile" }
  /** Stop every loop and start nothing more; the machine ends once all have halted. */
  | { type: "drain" };

const busy = (c: SupervisorContext) => Object.keys(c.loops).length;

/** The Supervisor machine. */
export const supervisorMachine = setup({
  types: {
    input: {} as SupervisorInput,
    context: {} as SupervisorContext,
    events: {} as SupervisorEvent,
  },
  actions: {
    startLoop: (_, _params: { goalId: string }) => undefined,
    stopLoop: (_, _params: { goalId: string; reason: string }) => undefined,
    forgetHaltedLoop: assign({ loops: ({ context, event }) => (assertEvent(event, "loop.halted"), without(context.loops, event.goalId)) }),
    markQueuedRunning: assign(({ context }) => ({
      loops: { ...context.loops, [context.queue[0] ?? ""]: "running" as const },
      queue: context.queue.slice(1),
    })),
  },
  actors: {
    listActive: fromPromise<string[], Record<string, never>>(async () => notProvided("supervisor.listActive")),
  },
  delays: {
    TICK: ({ context }) => context.tickMs,
    STAGGER: ({ context }) => context.staggerMs,
  },
  guards: {
    notDraining: ({ context }) => !context.draining,
    canStart: ({ context }) => !context.draining && context.queue.length > 0 && busy(context) < context.maxConcurrent,
    allHalted: ({ context }) => context.draining && busy(context) === 0,
  },
}).createMachine({
  id: "supervisor",
  context: ({ input }) => ({
    maxConcurrent: input.maxConcurrent ?? SUPERVISOR_DEFAULTS.maxConcurrent,
    staggerMs: input.staggerMs ?? SUPERVISOR_DEFAULTS.staggerMs,
    tickMs: input.tickMs ?? SUPERVISOR_DEFAULTS.tickMs,
    loops: {},
    queue: [],
    draining: false,
  }),
  initial: "supervising",
  states: {
    supervising: {
      type: "parallel",
      always: { guard: "allHalted", target: "drained" },
      on: {
        "loop.halted": { actions: "forgetHaltedLoop" },
        "goal.stop": {
          actions: enqueueActions(({ context, event, enqueue }) => {
            if (context.loops[event.goalId] === "running") {
              enqueue({ type: "stopLoop", params: { goalId: event.goalId, reason: event.reason } });
              enqueue.assign({ loops: { ...context.loops, [event.goalId]: "stopping" } });
            }
            enqueue.assign({ queue: context.queue.filter((id) => id !== event.goalId) });
          }),
        },
        drain: {
          actions: enqueueActions(({ context, enqueue }) => {
            for (const [goalId, state] of Object.entries(context.loops))
              if (state === "running") enqueue({ type: "stopLoop", params: { goalId, reason: "the supervisor is draining" } });
            enqueue.assign({
              draining: true,
              queue: [],
              loops: Object.fromEntries(Object.keys(context.loops).map((id) => [id, "stopping" as const])),
            });
          }),
        },
      },
      states: {
        reconciling: {
          initial: "listing",
          on: { reconcile: { target: ".listing", guard: "notDraining" } },
          states: {
            listing: {
              description: "Lists the active goals this process may run.",
              invoke: {
                src: "listActive",
                input: () => ({}),
                onDone: {
                  target: "idle",
                  // Loops whose goal is no longer active stop, and stay counted until they have halted.
                  actions: enqueueActions(({ context, event, enqueue }) => {
                    const next = reconcile(context, event.output);
                    for (const [goalId, state] of Object.entries(next.loops ?? {})) {
                      if (state === "stopping" && context.loops[goalId] === "running")
                        enqueue({ type: "stopLoop", params: { goalId, reason: "the goal is no longer active" } });
                    }
                    enqueue.assign(next);
                  }),
                },
                onError: { target: "idle" },
              },
            },
            idle: {
              description: "Waits for the next reconciliation tick.",
              after: { TICK: { target: "listing" } },
            },
          },
        },
        launching: {
          initial: "ready",
          states: {
            ready: {
              description: "Starts the next queued goal when there is room under the cap.",
              always: {
                guard: "canStart",
                target: "starting",
                actions: [{ type: "startLoop", params: ({ context }) => ({ goalId: context.queue[0] ?? "" }) }, "markQueuedRunning"],
              },
            },
            starting: {
              description: "Starts are staggered: the next waits `STAGGER`.",
              after: { STAGGER: { target: "ready" } },
            },
          },
        },
      },
    },
    drained: { type: "final", description: "Every loop has halted after a drain." },
  },
});

function without(loops: Record<string, LoopState>, goalId: string): Record<string, LoopState> {
  const next = { ...loops };
  delete next[goalId];
  return next;
}

/** After a listing: the active goals not running nor queued join the queue; running loops of inactive goals stop. */
export function reconcile(context: SupervisorContext, active: readonly string[]): Partial<SupervisorContext> {
  if (context.draining) return {};
  const activeSet = new Set(active);
  const loops = { ...context.loops };
  for (const [id, state] of Object.entries(loops)) if (state === "running" && !activeSet.has(id)) loops[id] = "stopping";
  const queue = [...context.queue.filter((id) => activeSet.has(id)), ...active.filter((id) => !loops[id] && !context.queue.includes(id))];
  return { loops, queue };
}
