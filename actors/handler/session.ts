/**
 * The Handler's session machine with its effects provided once per Handler (building a machine is costly): each
 * effect acts for the session whose actor system runs it, registered by {@link SessionActors.create} in a registry
 * that Handler alone owns.
 */
import { assign, createActor, fromPromise, type Actor, type InspectionEvent } from "xstate";
import {
  handlerSessionMachine,
  measured,
  type CallModelInput,
  type ContextMetrics,
  type HandlerSessionContext,
  type HandlerSessionInput,
  type ModelReply,
  type RunToolsInput,
  type TokenCount,
  type ToolResults,
} from "../../machines/handler/session.js";
import type { SessionCheckpoint, Usage } from "../../protocol/index.js";
import { actorScopes } from "../actor-scopes.js";

/** The effects of one session, as its Handler provides them. */
export interface SessionEffects {
  callModel(input: CallModelInput, signal: AbortSignal): Promise<ModelReply>;
  /** Counts the tokens of a request, synchronously (the `measure` action). */
  countTokens(input: CallModelInput): TokenCount;
  /** Records the session; absent: it is not recorded. */
  recordTurn?: ((checkpoint: SessionCheckpoint) => Promise<void>) | undefined;
  runTools(input: RunToolsInput, signal: AbortSignal): Promise<ToolResults>;
  turnCompleted(
    context: HandlerSessionContext,
    params: { turn: number; maxTurns: number; usage: Usage; callUsage: Usage; toolCalls: number; context: ContextMetrics },
  ): void;
  contextWarning(params: { used: number; limit: number; threshold: number }): void;
}

const provideSession = (effectsOf: (system: unknown) => SessionEffects) =>
  handlerSessionMachine.provide({
    actors: {
      callModel: fromPromise<ModelReply, CallModelInput>(({ input, signal, system }) => effectsOf(system).callModel(input, signal)),
      recordTurn: fromPromise<void, SessionCheckpoint>(async ({ input, system }) => effectsOf(system).recordTurn?.(input)),
      runTools: fromPromise<ToolResults, RunToolsInput>(({ input, signal, system }) => effectsOf(system).runTools(input, signal)),
    },
    actions: {
      turnCompleted: ({ context, system }, params) => effectsOf(system).turnCompleted(context, params),
      contextWarning: ({ system }, params) => effectsOf(system).contextWarning(params),
      measure: assign(({ context, system }) => measured(context, (input) => effectsOf(system).countTokens(input))),
    },
  });

/** Creates the session actors of one Handler. */
export interface SessionActors {
  /** Creates the actor of one session with `effects`. */
  create(
    effects: SessionEffects,
    options: { input: HandlerSessionInput; inspect?: (event: InspectionEvent) => void },
  ): Actor<ReturnType<typeof provideSession>>;
}

/** The session actors of one Handler: the machine provided once, its effects found by the session's actor system. */
export function sessionActors(): SessionActors {
  const sessions = actorScopes<SessionEffects>("a Handler session runs without its effects");
  const machine = provideSession((system) => sessions.of(system));
  return { create: (effects, options) => sessions.create(effects, () => createActor(machine, options)) };
}
