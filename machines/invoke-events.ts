/**
 * What an invoked actor's done and error events carry, for guards and actions named in `setup()`: XState types those
 * with the machine's own events only, so a named step reads the invoke's output or error through these.
 */

/** The output of an invoke's done event. */
export const outputOf = <T>(event: { type: string; output?: unknown }): T => event.output as T;

/** The thrown error of an invoke's error event. */
export const errorOf = (event: { type: string; error?: unknown }): unknown => event.error;

/**
 * The event an evaluation machine, and each composite machine it invokes, waits for in its `idle` state before it
 * acts. XState starts the children a machine invoked in its first macrostep before that step's own actions run, so a
 * machine that reported and invoked at once would let its children report first. Started, then sent `START`, a
 * machine runs each action as it takes the transition and starts its children after them: a node's `node.started`
 * (and a sequential's `step 1/3`) come before anything its children report. The shell sends it to an evaluation
 * actor after starting it; a machine sends it to the composite it invokes, in the entry of the invoking state.
 */
export const START = { type: "evaluation.start" } as const;

/** The {@link START} event. */
export type StartEvent = typeof START;

/** The `idle` state of a machine that waits for {@link START} before it goes to `target`. */
export const idleUntilStarted = <T extends string>(target: T) =>
  ({
    description: "Wait for START (machines/invoke-events.ts): the shell, or the parent machine, has made its own reports first.",
    on: { [START.type]: target } as Record<StartEvent["type"], T>,
  }) as const;
