/** Arithmetic of the user-level bench (pure; tested in stats.test.ts). */

/**
 * What the runtime adds per step of a sequential task of `steps` steps, over the model's time: the task's wall time
 * less `steps` model round trips, shared by the steps. The task's own start and end are in it.
 */
export function stepOverheadMs(sequentialMs: number, steps: number, modelMs: number): number {
  return (sequentialMs - steps * modelMs) / steps;
}

/**
 * The same without the task's start and end: what one step more costs (the difference to a one-step task, per
 * added step), less one model round trip.
 */
export function marginalStepMs(sequentialMs: number, singleMs: number, steps: number, modelMs: number): number {
  if (steps < 2) throw new Error(`a marginal step needs two steps or more, not ${steps}`);
  return (sequentialMs - singleMs) / (steps - 1) - modelMs;
}

/** CPU per task, µs, from two readings of a process's CPU (µs) around `tasks` tasks; undefined when one is missing. */
export function cpuPerTask(before: number | undefined, after: number | undefined, tasks: number): number | undefined {
  return before === undefined || after === undefined || tasks <= 0 ? undefined : (after - before) / tasks;
}

/** `a / b` when both are finite and `b` is not 0. */
export function ratio(a: number, b: number | undefined): number | undefined {
  return b === undefined || b === 0 || !Number.isFinite(a) || !Number.isFinite(b) ? undefined : a / b;
}
