/**
 * The runs (sessions and script commands) a Handler has in flight, by task and node path: a task's cancel stops
 * all of its runs, a `node.abort` only those of its node, and the Handler's stop every one.
 */
import type { TaskId } from "../../protocol/index.js";

/** A Handler's runs in flight. */
export interface LiveRuns {
  /** Registers a run of `taskId`'s node `nodePath`, ended by `stop`; returns its removal, for when it ends. */
  add(taskId: TaskId, nodePath: string, stop: () => void): () => void;
  /** Stops every run of `taskId`. */
  cancelTask(taskId: TaskId): void;
  /** Stops the runs of `taskId`'s node `nodePath`. */
  abortNode(taskId: TaskId, nodePath: string): void;
  /** Stops every run. */
  stopAll(): void;
}

interface Run {
  nodePath: string;
  stop: () => void;
}

/** An empty {@link LiveRuns}. */
export function liveRuns(): LiveRuns {
  const byTask = new Map<TaskId, Set<Run>>();
  return {
    add(taskId, nodePath, stop) {
      const run: Run = { nodePath, stop };
      const live = byTask.get(taskId) ?? new Set();
      byTask.set(taskId, live.add(run));
      return () => {
        live.delete(run);
        if (live.size === 0 && byTask.get(taskId) === live) byTask.delete(taskId);
      };
    },
    cancelTask(taskId) {
      for (const run of byTask.get(taskId) ?? []) run.stop();
    },
    abortNode(taskId, nodePath) {
      for (const run of byTask.get(taskId) ?? []) if (run.nodePath === nodePath) run.stop();
    },
    stopAll() {
      for (const live of byTask.values()) for (const run of live) run.stop();
    },
  };
}
