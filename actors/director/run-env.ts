/**
 * What the runs of one Director share: its deps, stores and claim owner, the tasks it runs, and the run and task
 * machines it provides once. Built by actors/director/director.ts; each delivery's run (actors/director/run.ts) and its
 * finish (actors/director/results.ts) read it.
 */
import type { TaskId } from "../../protocol/index.js";
import type { LastPublished, PublishStored, TaskItem, TaskStore } from "../bus.js";
import type { ActorDeps } from "../deps.js";
import type { ClaimsDue } from "./claims-due.js";
import type { EventPublisher } from "./event-publisher.js";
import type { RunActor, RunActors } from "./run-actors.js";
import type { RunningTask, TaskActors } from "./task.js";

/** What the runs of one Director share. */
export interface RunEnv {
  deps: ActorDeps;
  store: TaskStore;
  /** This Director's claim owner. */
  owner: string;
  /** The queue's ack wait: the heartbeat beats three times in it. */
  ackWaitMs: number;
  /** Longest a task may run before it fails with a timeout. */
  taskTimeoutMs: number;
  /** The last message stored on a subject of the events stream (see DirectorConfig). */
  lastPublished?: LastPublished;
  /** Stores a result with an acknowledgement (see DirectorConfig). */
  publishStored?: PublishStored;
  /** Tasks this process runs, by id. */
  owned: Map<TaskId, RunningTask>;
  /** Tasks whose claim is being written, with their latest delivery. */
  pendingClaims: Map<TaskId, { item: TaskItem }>;
  /** The run actors under way (a drain and the heartbeat are sent to each), with their task's last event seq. */
  runs: Map<RunActor, () => number>;
  /** Tells each run when its pending claim is due (one clock per Director). */
  claimsDue: ClaimsDue;
  publishEvent: EventPublisher;
  /** The type of a template's entry task, for metrics (`prompt`: none yet, a task submitted in words). */
  taskType: (xml: string) => string;
  /** The run machine, provided once per Director (actors/director/run-actors.ts). */
  runActors: RunActors;
  /** The task machine, provided once per Director (actors/director/task.ts). */
  taskActors: TaskActors;
}
