/**
 * How a {@link Bus} runs the handlers of its subscriptions and work queue, and closes: a handler's throw or rejection
 * goes to an error handler with its subject, never lost, and a closed bus waits for the handlers in progress. Both
 * buses, NATS and in-process, share it (no NATS imports here, so the embedded mode does not load the NATS client).
 */
import type { Bus } from "../actors/bus.js";

/** Receives errors thrown by subscription or work-queue handlers, with the subject involved. */
export type BusErrorHandler = (err: unknown, subject: string) => void;

/**
 * Runs a handler, routing a throw or a rejection to `onError`.
 * @returns the settled-never-rejecting promise of an async handler, `undefined` for a sync one.
 */
export function runHandler<T>(
  handler: (value: T) => void | Promise<void>,
  value: T,
  onError: (err: unknown) => void,
): Promise<void> | undefined {
  try {
    const result = handler(value);
    if (result instanceof Promise) return result.catch(onError);
  } catch (err) {
    onError(err);
  }
  return undefined;
}

/** A {@link Bus} that can be shut down: subscriptions stop, handlers in progress finish. */
export interface ClosableBus extends Bus {
  /** Stops all subscriptions and waits for their handlers; the bus is unusable afterwards. */
  close(): Promise<void>;
}

/** The default error handler: a process warning naming the subject, so failures are never silent. */
export const warnOnError: BusErrorHandler = (err, subject) => {
  const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
  process.emitWarning(`handler failed on '${subject}': ${detail}`, { code: "DIRIGENT_HANDLER_ERROR" });
};
