/**
 * What an invoked actor's done and error events carry, for guards and actions named in `setup()`: XState types those
 * with the machine's own events only, so a named step reads the invoke's output or error through these.
 */

/** The output of an invoke's done event. */
export const outputOf = <T>(event: { type: string; output?: unknown }): T => event.output as T;

/** The thrown error of an invoke's error event. */
export const errorOf = (event: { type: string; error?: unknown }): unknown => event.error;
