/**
 * The run machine of the Director (machines/director/run.ts) provided once per Director: each delivery's run actor
 * acts through that delivery's own effects ({@link RunEffects}, made in ./run.ts), kept in a map the Director owns by
 * the `scopeKey` the run's machine carries. The run actor is the root of its delivery's actor system: the task's
 * machine is its invoked child ({@link launchedTask}).
 */
import { createActor, fromPromise, type Actor, type InspectionEvent } from "xstate";
import {
  runMachine,
  type CheckpointOutput,
  type ClaimOutput,
  type FinishInput,
  type FinishOutput,
  type LaunchedTask,
  type RestoreOutput,
  type RunContext,
  type RunEvent,
  type RunInput,
  type RunOutcome,
} from "../../machines/director/run.js";
import type { Scoped } from "../../machines/scoped.js";
import type { taskMachine } from "../../machines/director/task.js";
import type { TaskActor, TaskActors, TaskLaunch } from "./task.js";

/** The run actor of one delivery. */
export type RunActor = Actor<typeof runMachine>;

/** The effects of one delivery's run (machines/director/run.ts), as its Director carries them out. */
export interface RunEffects {
  claim(): Promise<ClaimOutput>;
  tellPreviousOwner(): Promise<void>;
  startFresh(): void;
  restore(): Promise<RestoreOutput>;
  /** The task's actor is being created (the run invoked it): where it starts, as the claim or the restore left it. */
  launch(actor: TaskActor): TaskLaunch;
  /** The task's actor (the one `launch` was given) started: it is told to run (or to cancel), and its changes reach the run. */
  launched(actor: TaskActor): void;
  checkpoint(): Promise<CheckpointOutput>;
  finish(input: FinishInput): Promise<FinishOutput>;
  flush(): Promise<void>;
  readOwner(): Promise<{ final: boolean }>;
  closeEvents(): void;
  beat(): void;
  ack(): void;
  nak(): void;
  nakLater(): void;
  cancelOthers(): void;
  report(context: RunContext, outcome: RunOutcome): void;
}

/** Creates run actors, each acting through the effects of its own delivery. */
export interface RunActors {
  /** The run actor of one delivery, and the release of its effects once it has ended. */
  create(
    effects: RunEffects,
    options: { input: RunInput; inspect?: (event: InspectionEvent) => void },
  ): { actor: RunActor; release(): void };
}

/** What a run's invoked task tells its delivery (by its key): see {@link launchedTask}. */
export interface LaunchHooks {
  /** The task's actor is being created: where it starts. */
  launch(scopeKey: string | undefined, actor: TaskActor): TaskLaunch;
  /** The task's actor started. */
  launched(scopeKey: string | undefined, actor: TaskActor): void;
}

/**
 * The task machine as a run invokes it (machines/director/run.ts: {@link LaunchedTask}): `machine`, its input the
 * delivery's key, starting from where that delivery's claim or restore left it (`hooks.launch`), and telling the
 * delivery once it has started (`hooks.launched`). Everything else is `machine`'s own.
 */
export function launchedTask(machine: typeof taskMachine, hooks: LaunchHooks): LaunchedTask {
  type Scope = Parameters<typeof machine.getInitialSnapshot>[0];
  const keys = new WeakMap<object, string | undefined>();
  const launched: Partial<LaunchedTask> = Object.create(machine);
  launched.getInitialSnapshot = (scope, input) => {
    keys.set(scope.self, input.scopeKey);
    const { input: taskInput, snapshot } = hooks.launch(input.scopeKey, scope.self as unknown as TaskActor);
    return snapshot === undefined
      ? machine.getInitialSnapshot(scope as Scope, taskInput)
      : machine.restoreSnapshot(snapshot, scope as Scope);
  };
  launched.start = (snapshot, scope) => {
    machine.start(snapshot);
    hooks.launched(keys.get(scope.self), scope.self as unknown as TaskActor);
  };
  return launched as LaunchedTask;
}

/**
 * The run machine provided once per Director (building a machine per delivery cost as much heap as the task
 * itself): each action and actor finds its delivery's {@link RunEffects} in a map this Director owns, by the key its
 * run actor carries (`scopeKey`, made here: a task can have two deliveries in flight at once). An action that throws
 * is reported to the run as `effect.failed`: a run actor in error would leave its task running.
 */
export function runActors(tasks: TaskActors): RunActors {
  const deliveries = new Map<string, RunEffects>();
  let made = 0;
  const of = (scopeKey: string | undefined): RunEffects => {
    const effects = scopeKey === undefined ? undefined : deliveries.get(scopeKey);
    if (effects === undefined) throw new Error("a run actor runs without its delivery's effects");
    return effects;
  };
  type Act = (effects: RunEffects) => void;
  const acting =
    (act: Act) =>
    ({ context, self }: { context: RunContext; self: { send(event: RunEvent): void } }): void => {
      try {
        act(of(context.scopeKey));
      } catch (error) {
        self.send({ type: "effect.failed", error });
      }
    };
  const machine = runMachine.provide({
    actors: {
      claim: fromPromise<ClaimOutput, Scoped>(({ input }) => of(input.scopeKey).claim()),
      tellPreviousOwner: fromPromise<void, Scoped>(({ input }) => of(input.scopeKey).tellPreviousOwner()),
      restore: fromPromise<RestoreOutput, Scoped>(({ input }) => of(input.scopeKey).restore()),
      task: launchedTask(tasks.machine, {
        launch: (key, actor) => of(key).launch(actor),
        launched: (key, actor) => of(key).launched(actor),
      }),
      checkpoint: fromPromise<CheckpointOutput, Scoped>(({ input }) => of(input.scopeKey).checkpoint()),
      finish: fromPromise<FinishOutput, FinishInput>(({ input: { scopeKey, ...input } }) => of(scopeKey).finish(input)),
      flush: fromPromise<void, Scoped>(({ input }) => of(input.scopeKey).flush()),
      readOwner: fromPromise<{ final: boolean }, Scoped>(({ input }) => of(input.scopeKey).readOwner()),
    },
    actions: {
      startFresh: acting((effects) => effects.startFresh()),
      closeEvents: acting((effects) => effects.closeEvents()),
      beat: acting((effects) => effects.beat()),
      ack: acting((effects) => effects.ack()),
      nak: acting((effects) => effects.nak()),
      nakLater: acting((effects) => effects.nakLater()),
      cancelOthers: acting((effects) => effects.cancelOthers()),
      report: ({ context }, { outcome }: { outcome: RunOutcome }) => of(context.scopeKey).report(context, outcome),
    },
  });
  return {
    create: (effects, options) => {
      const scopeKey = `r${++made}`;
      deliveries.set(scopeKey, effects);
      // `scopeKey` first: a literal that starts with a spread and adds to it gets a hidden class of its own in this
      // V8 (Node 20), about 0.3 KB more per object, held for the whole run.
      const actor = createActor(machine, { ...options, input: { scopeKey, ...options.input } });
      return { actor, release: () => deliveries.delete(scopeKey) };
    },
  };
}
