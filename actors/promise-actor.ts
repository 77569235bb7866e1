/**
 * XState's `fromPromise`, with the abort signal made when the effect first reads it. XState's own makes an
 * `AbortController` for every promise actor it starts, used or not: 5–10 µs each on Node 20 (an `EventTarget` and
 * its bookkeeping), and seven a trivial task, while most effects (a claim, a final record) never read it. Same
 * logic otherwise: the same snapshots, events (`xstate.promise.resolve` / `reject`), persistence and inspection;
 * a stopped actor's signal is aborted, whenever it was read (before the stop, or after: then it is aborted at once).
 */
import type { ActorSystem, AnyActorRef, EventObject, NonReducibleUnknown, PromiseActorLogic, PromiseSnapshot } from "xstate";

const RESOLVE = "xstate.promise.resolve";
const REJECT = "xstate.promise.reject";
const STOP = "xstate.stop";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- XState's own type of an effect's system
type AnyActorSystem = ActorSystem<any>;

/** The signal of one started actor: made on first read. */
interface LazySignal {
  controller?: AbortController;
  stopped: boolean;
}

function signalOf(lazy: LazySignal): AbortSignal {
  if (lazy.controller === undefined) {
    lazy.controller = new AbortController();
    if (lazy.stopped) lazy.controller.abort();
  }
  return lazy.controller.signal;
}

/** What the effect of a promise actor is given: XState's own arguments. */
export interface PromiseArgs<TInput, TOutput, TEmitted extends EventObject> {
  input: TInput;
  system: AnyActorSystem;
  self: AnyActorRef & { getSnapshot(): PromiseSnapshot<TOutput, TInput> };
  /** Aborted when the actor is stopped (its state left, its parent stopped). */
  readonly signal: AbortSignal;
  emit: (emitted: TEmitted) => void;
}

/** A promise actor as XState's `fromPromise` makes it, its abort signal made on first use. */
export function fromPromise<TOutput, TInput = NonReducibleUnknown, TEmitted extends EventObject = EventObject>(
  promiseCreator: (args: PromiseArgs<TInput, TOutput, TEmitted>) => PromiseLike<TOutput>,
): PromiseActorLogic<TOutput, TInput, TEmitted> {
  // The signals of this logic's started actors (weak: a finished actor's goes with it).
  const signals = new WeakMap<AnyActorRef, LazySignal>();
  const logic = {
    config: promiseCreator,
    transition: (state: PromiseSnapshot<TOutput, TInput>, event: { type: string; data?: unknown }, scope: { self: AnyActorRef }) => {
      if (state.status !== "active") return state;
      switch (event.type) {
        case RESOLVE:
          return { ...state, status: "done", output: event.data as TOutput, input: undefined };
        case REJECT:
          return { ...state, status: "error", error: event.data, input: undefined };
        case STOP: {
          const lazy = signals.get(scope.self);
          if (lazy !== undefined) {
            lazy.stopped = true;
            lazy.controller?.abort();
            signals.delete(scope.self);
          }
          return { ...state, status: "stopped", input: undefined };
        }
        default:
          return state;
      }
    },
    start: (
      state: PromiseSnapshot<TOutput, TInput>,
      { self, system, emit }: { self: AnyActorRef; system: AnyActorSystem; emit: (emitted: TEmitted) => void },
    ) => {
      if (state.status !== "active") return;
      const lazy: LazySignal = { stopped: false };
      signals.set(self, lazy);
      const args: PromiseArgs<TInput, TOutput, TEmitted> = {
        input: state.input as TInput,
        system,
        self,
        get signal() {
          return signalOf(lazy);
        },
        emit,
      };
      const settle = (type: string, data: unknown) => {
        if (self.getSnapshot().status !== "active") return;
        signals.delete(self);
        (system as unknown as { _relay(source: AnyActorRef, target: AnyActorRef, event: EventObject): void })._relay(self, self, {
          type,
          data,
        } as EventObject);
      };
      Promise.resolve(promiseCreator(args)).then(
        (response) => settle(RESOLVE, response),
        (err: unknown) => settle(REJECT, err),
      );
    },
    getInitialSnapshot: (_: unknown, input: TInput): PromiseSnapshot<TOutput, TInput> =>
      ({ status: "active", output: undefined, error: undefined, input }) as PromiseSnapshot<TOutput, TInput>,
    getPersistedSnapshot: (snapshot: PromiseSnapshot<TOutput, TInput>) => snapshot,
    restoreSnapshot: (snapshot: PromiseSnapshot<TOutput, TInput>) => snapshot,
  };
  return logic as unknown as PromiseActorLogic<TOutput, TInput, TEmitted>;
}
