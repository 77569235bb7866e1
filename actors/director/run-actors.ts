/**
 * The run machine of the Director (machines/director/run.ts) provided once per Director: each delivery's run actor
 * acts through that delivery's own effects ({@link RunEffects}, made in ./run.ts), kept in a map the Director owns by
 * the `scopeKey` the run's machine carries.
 */
import { createActor, fromPromise, type Actor } from "xstate";
import {
  runMachine,
  type CheckpointOutput,
  type ClaimOutput,
  type FinishInput,
  type FinishOutput,
  type RestoreOutput,
  type RunContext,
  type RunInput,
  type RunOutcome,
} from "../../machines/director/run.js";
import type { Scoped } from "../../machines/scoped.js";

/** The run actor of one delivery. */
export type RunActor = Actor<typeof runMachine>;

/** The effects of one delivery's run (machines/director/run.ts), as its Director carries them out. */
export interface RunEffects {
  claim(): Promise<ClaimOutput>;
  tellPreviousOwner(): Promise<void>;
  startFresh(): void;
  restore(): Promise<RestoreOutput>;
  checkpoint(): Promise<CheckpointOutput>;
  finish(input: FinishInput): Promise<FinishOutput>;
  flush(): Promise<void>;
  readOwner(): Promise<{ final: boolean }>;
  startTask(): void;
  stopTask(): void;
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
  create(effects: RunEffects, options: { input: RunInput }): { actor: RunActor; release(): void };
}

/**
 * The run machine provided once per Director (building a machine per delivery cost as much heap as the task
 * itself): each action and actor finds its delivery's {@link RunEffects} in a map this Director owns, by the key its
 * run actor carries (`scopeKey`, made here: a task can have two deliveries in flight at once).
 */
export function runActors(): RunActors {
  const deliveries = new Map<string, RunEffects>();
  let made = 0;
  const of = (scopeKey: string | undefined): RunEffects => {
    const effects = scopeKey === undefined ? undefined : deliveries.get(scopeKey);
    if (effects === undefined) throw new Error("a run actor runs without its delivery's effects");
    return effects;
  };
  const machine = runMachine.provide({
    actors: {
      claim: fromPromise<ClaimOutput, Scoped>(({ input }) => of(input.scopeKey).claim()),
      tellPreviousOwner: fromPromise<void, Scoped>(({ input }) => of(input.scopeKey).tellPreviousOwner()),
      restore: fromPromise<RestoreOutput, Scoped>(({ input }) => of(input.scopeKey).restore()),
      checkpoint: fromPromise<CheckpointOutput, Scoped>(({ input }) => of(input.scopeKey).checkpoint()),
      finish: fromPromise<FinishOutput, FinishInput>(({ input: { scopeKey, ...input } }) => of(scopeKey).finish(input)),
      flush: fromPromise<void, Scoped>(({ input }) => of(input.scopeKey).flush()),
      readOwner: fromPromise<{ final: boolean }, Scoped>(({ input }) => of(input.scopeKey).readOwner()),
    },
    actions: {
      startFresh: ({ context }) => of(context.scopeKey).startFresh(),
      startTask: ({ context }) => of(context.scopeKey).startTask(),
      stopTask: ({ context }) => of(context.scopeKey).stopTask(),
      closeEvents: ({ context }) => of(context.scopeKey).closeEvents(),
      beat: ({ context }) => of(context.scopeKey).beat(),
      ack: ({ context }) => of(context.scopeKey).ack(),
      nak: ({ context }) => of(context.scopeKey).nak(),
      nakLater: ({ context }) => of(context.scopeKey).nakLater(),
      cancelOthers: ({ context }) => of(context.scopeKey).cancelOthers(),
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
