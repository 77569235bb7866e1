/**
 * The run machine of the Director (machines/director/run.ts) provided once per Director: each delivery's run actor
 * acts through that delivery's own effects ({@link RunEffects}, made in ./run.ts), found through the actor's system.
 */
import { createActor, fromPromise, type Actor } from "xstate";
import {
  runMachine,
  type ClaimOutput,
  type FinishInput,
  type FinishOutput,
  type RestoreOutput,
  type RunContext,
  type RunInput,
  type RunOutcome,
} from "../../machines/director/run.js";
import { actorScopes } from "../actor-scopes.js";

/** The run actor of one delivery. */
export type RunActor = Actor<typeof runMachine>;

/** The effects of one delivery's run (machines/director/run.ts), as its Director carries them out. */
export interface RunEffects {
  claim(): Promise<ClaimOutput>;
  restore(): Promise<RestoreOutput>;
  finish(input: FinishInput): Promise<FinishOutput>;
  flush(): Promise<void>;
  readOwner(): Promise<{ final: boolean }>;
  startTask(): void;
  stopTask(): void;
  beat(): void;
  checkpoint(): void;
  dueClaim(): void;
  ack(): void;
  nak(): void;
  nakLater(): void;
  cancelOthers(): void;
  report(context: RunContext, outcome: RunOutcome): void;
}

/** Creates run actors, each acting through the effects of its own delivery. */
export interface RunActors {
  create(effects: RunEffects, options: { input: RunInput }): RunActor;
}

/**
 * The run machine provided once per Director (building a machine per delivery cost as much heap as the task
 * itself): each action and actor finds its delivery's {@link RunEffects} through the run actor's system.
 */
export function runActors(): RunActors {
  const scopes = actorScopes<RunEffects>("a run actor created without its delivery's effects");
  const of = (system: unknown) => scopes.of(system);
  const machine = runMachine.provide({
    actors: {
      claim: fromPromise<ClaimOutput>(({ system }) => of(system).claim()),
      restore: fromPromise<RestoreOutput>(({ system }) => of(system).restore()),
      finish: fromPromise<FinishOutput, FinishInput>(({ input, system }) => of(system).finish(input)),
      flush: fromPromise<void>(({ system }) => of(system).flush()),
      readOwner: fromPromise<{ final: boolean }>(({ system }) => of(system).readOwner()),
    },
    actions: {
      startTask: ({ system }) => of(system).startTask(),
      stopTask: ({ system }) => of(system).stopTask(),
      beat: ({ system }) => of(system).beat(),
      checkpoint: ({ system }) => of(system).checkpoint(),
      dueClaim: ({ system }) => of(system).dueClaim(),
      ack: ({ system }) => of(system).ack(),
      nak: ({ system }) => of(system).nak(),
      nakLater: ({ system }) => of(system).nakLater(),
      cancelOthers: ({ system }) => of(system).cancelOthers(),
      report: ({ context, system }, { outcome }: { outcome: RunOutcome }) => of(system).report(context, outcome),
    },
  });
  return { create: (effects, options) => scopes.create(effects, () => createActor(machine, options)) };
}
