/**
 * What reaches the tasks a Director runs, wherever it was sent: the progress reports of their walks (over NATS, and as
 * calls from roles of the same process), cancel broadcasts, and takeover notices from the Director that took one over
 * (./takeover.ts). Each acts only on the tasks this Director owns.
 */
import { CancelBroadcast, decode, Progress, type TaskId } from "../../protocol/index.js";
import type { BusSubscription } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import { serveTakeovers } from "./takeover.js";
import type { RunningTask } from "./task.js";

/** Subscribes the Director `owner` to what reaches the tasks it owns (`owned`). */
export function serveOwnedTasks(deps: ActorDeps, owner: string, owned: ReadonlyMap<TaskId, RunningTask>): BusSubscription[] {
  const { bus, subjects } = deps;
  // A report that arrives once the task's machine has ended (a node finishing after a cancel) has nothing to change.
  const toTask = (progress: Progress): boolean => {
    const actor = owned.get(progress.taskId)?.actor;
    if (actor === undefined) return false;
    if (actor.getSnapshot().status === "active") actor.send(progress);
    return true;
  };
  const stopLocalProgress = deps.local?.onProgress(toTask);
  return [
    bus.subscribe(subjects.anyProgress, (msg) => {
      const decoded = decode(Progress, msg.data);
      if (decoded.ok) toTask(decoded.value);
    }),
    // Reports of roles in this process come as calls (actors/local.ts).
    { unsubscribe: async () => stopLocalProgress?.() },
    serveTakeovers(deps, owner, owned),
    bus.subscribe(subjects.cancelBroadcast, (msg) => {
      const decoded = decode(CancelBroadcast, msg.data);
      if (decoded.ok) owned.get(decoded.value.taskId)?.actor?.send({ type: "task.cancel" });
    }),
  ];
}
