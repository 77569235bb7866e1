/**
 * The Handler's session machine with its effects provided once per Handler (building a machine is costly): each
 * effect acts for the session whose key its machine carries, kept by {@link SessionActors.create} in a map that
 * Handler alone owns.
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
import type { Scoped } from "../../machines/scoped.js";

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

const provideSession = (effectsOf: (scopeKey: string | undefined) => SessionEffects) =>
  handlerSessionMachine.provide({
    actors: {
      callModel: fromPromise<ModelReply, CallModelInput>(({ input, signal }) => effectsOf(input.scopeKey).callModel(input, signal)),
      recordTurn: fromPromise<void, SessionCheckpoint & Scoped>(async ({ input: { scopeKey, ...checkpoint } }) =>
        effectsOf(scopeKey).recordTurn?.(checkpoint),
      ),
      runTools: fromPromise<ToolResults, RunToolsInput>(({ input, signal }) => effectsOf(input.scopeKey).runTools(input, signal)),
    },
    actions: {
      turnCompleted: ({ context }, params) => effectsOf(context.scopeKey).turnCompleted(context, params),
      contextWarning: ({ context }, params) => effectsOf(context.scopeKey).contextWarning(params),
      measure: assign(({ context }) => measured(context, (input) => effectsOf(context.scopeKey).countTokens(input))),
    },
  });

/** Creates the session actors of one Handler. */
export interface SessionActors {
  /** Creates the actor of one session with `effects`; they are kept until `release` (call it when the session has ended). */
  create(
    effects: SessionEffects,
    options: { input: HandlerSessionInput; inspect?: (event: InspectionEvent) => void },
  ): { actor: Actor<ReturnType<typeof provideSession>>; release(): void };
}

/**
 * The session actors of one Handler: the machine provided once, its effects kept in a map this Handler alone owns, by
 * the key each session's machine carries (`scopeKey`).
 */
export function sessionActors(): SessionActors {
  const sessions = new Map<string, SessionEffects>();
  let made = 0;
  const machine = provideSession((scopeKey) => {
    const effects = scopeKey === undefined ? undefined : sessions.get(scopeKey);
    if (effects === undefined) throw new Error("a Handler session runs without its effects");
    return effects;
  });
  return {
    create(effects, options) {
      const scopeKey = `s${++made}`;
      sessions.set(scopeKey, effects);
      // `scopeKey` first: a literal that starts with a spread and adds to it gets a hidden class of its own in this
      // V8 (Node 20), about 0.3 KB more per object, held for the whole session.
      const actor = createActor(machine, { ...options, input: { scopeKey, ...options.input } });
      return { actor, release: () => sessions.delete(scopeKey) };
    },
  };
}
