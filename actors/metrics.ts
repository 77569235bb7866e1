/**
 * What the actors report for metrics: a few calls where work ends or is counted. The runtime implements them
 * (runtime/metrics/, Prometheus); without an implementation nothing is recorded and nothing is paid.
 */
import type { Progress, TaskState } from "../protocol/index.js";

/** A task that reached its final state in this process. */
export interface TaskEnded {
  /** Its final state (`completed`, `failed`, `cancelled`). */
  state: TaskState;
  /** The type of its entry task (`atomic`, `sequential`, …; `prompt` for a task submitted in words). */
  type: string;
  /** Seconds from its submission to its end. */
  seconds: number;
}

/** The metrics seam of the actor shells. */
export interface Metrics {
  /** A task ended (stored and announced by its Director). */
  taskEnded(task: TaskEnded): void;
  /** A progress report of a task left this process (tool calls, model turns, retries). */
  progress(progress: Progress): void;
  /** A request served by a role of this process ended after `seconds` (`step`: the request's name, `handler.execute`, …). */
  step(step: string, seconds: number): void;
  /** Work of `role` running now in this process: `count` is read whenever the metrics are collected. */
  inflight(role: string, count: () => number): void;
}

/** Records nothing. */
export const noMetrics: Metrics = {
  taskEnded: () => undefined,
  progress: () => undefined,
  step: () => undefined,
  inflight: () => undefined,
};
