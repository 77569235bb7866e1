/**
 * What `dirigent inspect` knows about the cluster: the live actors (from inspection messages), the tasks with their
 * timelines and node paths (from task events and results, live or replayed). Bounded in memory; every change is
 * also recorded as a delta that the server pushes to the page.
 */
import type { InspectedSnapshot, InspectMessage } from "../../protocol/inspect.js";
import { parseTaskId, type TaskEvent, type TaskId, type TaskOutcome, type TaskState } from "../../protocol/index.js";
import { TaskMaps, type MapView } from "./maps.js";

/** An actor as the page shows it. */
export interface ActorView {
  actorId: string;
  process: string;
  role: string;
  taskId?: TaskId;
  parentId?: string;
  rootId: string;
  /** Machine id (its chart) or invoked source name. */
  machine: string;
  isMachine: boolean;
  snapshot: InspectedSnapshot;
  /** Type of the last event that changed it. */
  lastEvent?: string;
  /** Time of its last change (publisher clock, ms). */
  updatedAt: number;
  /** Time the inspector received that change (ms), for lag measurement. */
  receivedAt: number;
}

/** One entry of a task's timeline. */
export interface TimelineEntry {
  at: number;
  /**
   * `task`: a lifecycle event; `xstate`: an event delivered to one of the task's actors; `result`: the outcome;
   * `state`: one of the task's machine actors entered the state `value` (the page's scrubber redraws every chart from
   * these; the timeline list does not show them).
   */
  kind: "task" | "xstate" | "result" | "state";
  type: string;
  message?: string;
  state?: string;
  actorId?: string;
  sourceId?: string;
  nodePath?: string;
  /** For `state`: the actor's machine and its state value. */
  machine?: string;
  value?: unknown;
}

/** A task as the page shows it. */
export interface TaskView {
  taskId: TaskId;
  state?: TaskState;
  status?: string;
  /** Node paths seen in its events and evaluation actors (`0`, `0/subtask1:0`, …). */
  nodes: string[];
  processes: string[];
  roles: string[];
  updatedAt: number;
  /** Its `map` nodes with their branches (runtime/inspect/maps.ts), when it has any. */
  maps?: MapView[];
  /** Built from the events stream rather than watched live. */
  replayed?: boolean;
}

/** Changes since the last {@link InspectState.takeDelta}. */
export interface InspectDelta {
  actors: ActorView[];
  removed: string[];
  tasks: TaskView[];
  timeline: Array<{ taskId: TaskId; entry: TimelineEntry }>;
}

/** Limits of {@link InspectState}. */
export interface InspectStateLimits {
  /** Most actors kept; the oldest finished ones go first. Default 20000. */
  maxActors: number;
  /** Most tasks kept; the oldest finished ones go first. Default 2000. */
  maxTasks: number;
  /** Most timeline entries kept per task (lifecycle, machine events and states). Default 4000. */
  maxTimeline: number;
}

interface TaskRecord extends TaskView {
  timeline: TimelineEntry[];
  nodeSet: Set<string>;
  processSet: Set<string>;
  roleSet: Set<string>;
  mapSet: TaskMaps;
}

function nodePathOf(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const path = Reflect.get(value, "nodePath") ?? Reflect.get(value, "path");
  return typeof path === "string" ? path : undefined;
}

/** The inspector's model of the cluster. */
export class InspectState {
  readonly #actors = new Map<string, ActorView>();
  readonly #tasks = new Map<TaskId, TaskRecord>();
  readonly #limits: InspectStateLimits;
  #delta: InspectDelta = { actors: [], removed: [], tasks: [], timeline: [] };
  readonly #changedActors = new Set<string>();
  readonly #changedTasks = new Set<TaskId>();

  constructor(
    limits: Partial<InspectStateLimits> = {},
    private readonly now: () => number = Date.now,
  ) {
    this.#limits = { maxActors: 20_000, maxTasks: 2000, maxTimeline: 4000, ...limits };
  }

  /** Applies one inspection message. */
  apply(m: InspectMessage): void {
    const receivedAt = this.now();
    // An inspection message's task id is not checked on the wire: an actor under an illegal one belongs to no task.
    const taskId = parseTaskId(m.taskId);
    if (m.type === "inspect.actor" || (m.type === "inspect.snapshot" && !this.#actors.has(m.actorId))) {
      const view: ActorView = {
        actorId: m.actorId,
        process: m.process,
        role: m.role,
        rootId: m.rootId,
        machine: m.machine,
        isMachine: m.isMachine,
        snapshot: m.snapshot,
        updatedAt: m.at,
        receivedAt,
        ...(taskId !== undefined ? { taskId } : {}),
        ...(m.parentId !== undefined ? { parentId: m.parentId } : {}),
        ...(m.type === "inspect.snapshot" ? { lastEvent: m.eventType } : {}),
      };
      this.#actors.set(m.actorId, view);
      this.#touchActor(view);
      this.#recordState(view);
      this.#evictActors();
      return;
    }
    const actor = this.#actors.get(m.actorId);
    if (m.type === "inspect.snapshot") {
      if (!actor) return;
      const moved = JSON.stringify(actor.snapshot.value) !== JSON.stringify(m.snapshot.value);
      actor.snapshot = m.snapshot;
      actor.lastEvent = m.eventType;
      actor.updatedAt = m.at;
      actor.receivedAt = receivedAt;
      this.#touchActor(actor);
      if (moved) this.#recordState(actor);
      return;
    }
    if (m.type === "inspect.event" && taskId !== undefined && actor?.isMachine) {
      // Events a machine receives go on its task's timeline; promise actors' internals would only add noise.
      if (m.event.type.startsWith("xstate.") && m.event.type !== "xstate.init" && !m.event.type.startsWith("xstate.done")) return;
      const task = this.#task(taskId, m.at);
      const path = nodePathOf(actor.snapshot.context);
      this.#addTimeline(task, {
        at: m.at,
        kind: "xstate",
        type: m.event.type,
        actorId: m.actorId,
        ...(m.sourceId ? { sourceId: m.sourceId } : {}),
        ...(path ? { nodePath: path } : {}),
      });
    }
  }

  /** Applies a task lifecycle event (live or replayed). */
  applyTaskEvent(event: TaskEvent, replayed = false): void {
    const at = Date.parse(event.at) || this.now();
    const task = this.#task(event.taskId, at, replayed);
    task.state = event.state;
    const nodePath = nodePathOf(event.data);
    if (nodePath !== undefined) task.nodeSet.add(nodePath);
    task.mapSet.apply(event);
    this.#addTimeline(task, {
      at,
      kind: "task",
      type: event.type,
      state: event.state,
      ...(event.message ? { message: event.message } : {}),
      ...(nodePath ? { nodePath } : {}),
    });
  }

  /** Applies a task's final result (live or replayed). */
  applyOutcome(outcome: TaskOutcome, replayed = false): void {
    const task = this.#task(outcome.taskId, this.now(), replayed);
    task.status = outcome.status;
    this.#addTimeline(task, {
      at: this.now(),
      kind: "result",
      type: `result.${outcome.status.toLowerCase()}`,
      message: outcome.error?.message ?? outcome.content.slice(0, 120),
    });
  }

  /** Every actor and task (the page's first load). */
  view(): { actors: ActorView[]; tasks: TaskView[] } {
    return { actors: [...this.#actors.values()], tasks: [...this.#tasks.values()].map((t) => this.#summary(t)) };
  }

  /** One task with its timeline, or undefined when unknown. */
  task(taskId: TaskId): (TaskView & { timeline: TimelineEntry[]; actors: ActorView[] }) | undefined {
    const task = this.#tasks.get(taskId);
    if (!task) return undefined;
    return { ...this.#summary(task), timeline: task.timeline, actors: [...this.#actors.values()].filter((a) => a.taskId === taskId) };
  }

  /** Whether a task is known. */
  hasTask(taskId: TaskId): boolean {
    return this.#tasks.has(taskId);
  }

  /** The changes since the previous call, or undefined when nothing changed. */
  takeDelta(): InspectDelta | undefined {
    const delta = this.#delta;
    delta.actors = [...this.#changedActors].flatMap((id) => this.#actors.get(id) ?? []);
    delta.tasks = [...this.#changedTasks].flatMap((id) => {
      const t = this.#tasks.get(id);
      return t ? [this.#summary(t)] : [];
    });
    this.#changedActors.clear();
    this.#changedTasks.clear();
    this.#delta = { actors: [], removed: [], tasks: [], timeline: [] };
    const empty = delta.actors.length + delta.removed.length + delta.tasks.length + delta.timeline.length === 0;
    return empty ? undefined : delta;
  }

  /** Number of actors kept. */
  get actorCount(): number {
    return this.#actors.size;
  }

  /** A task's machine actor in a new state goes on the task's timeline, for the scrubber. */
  #recordState(actor: ActorView): void {
    if (actor.taskId === undefined || !actor.isMachine || actor.snapshot.value === undefined) return;
    const task = this.#task(actor.taskId, actor.updatedAt);
    this.#addTimeline(task, {
      at: actor.updatedAt,
      kind: "state",
      type: "state",
      actorId: actor.actorId,
      machine: actor.machine,
      value: actor.snapshot.value,
    });
  }

  #touchActor(actor: ActorView): void {
    this.#changedActors.add(actor.actorId);
    if (actor.taskId === undefined) return;
    const task = this.#task(actor.taskId, actor.updatedAt);
    const path = nodePathOf(actor.snapshot.context);
    const before = task.nodeSet.size + task.processSet.size + task.roleSet.size;
    if (path !== undefined && actor.machine !== "task") task.nodeSet.add(path);
    task.processSet.add(actor.process);
    task.roleSet.add(actor.role);
    if (task.nodeSet.size + task.processSet.size + task.roleSet.size !== before) this.#changedTasks.add(task.taskId);
  }

  #task(taskId: TaskId, at: number, replayed = false): TaskRecord {
    let task = this.#tasks.get(taskId);
    if (!task) {
      task = {
        taskId,
        nodes: [],
        processes: [],
        roles: [],
        updatedAt: at,
        timeline: [],
        nodeSet: new Set(),
        processSet: new Set(),
        roleSet: new Set(),
        mapSet: new TaskMaps(),
        ...(replayed ? { replayed } : {}),
      };
      this.#tasks.set(taskId, task);
      this.#evictTasks();
    }
    task.updatedAt = Math.max(task.updatedAt, at);
    this.#changedTasks.add(taskId);
    return task;
  }

  #addTimeline(task: TaskRecord, entry: TimelineEntry): void {
    task.timeline.push(entry);
    if (task.timeline.length > this.#limits.maxTimeline) task.timeline.splice(0, task.timeline.length - this.#limits.maxTimeline);
    this.#delta.timeline.push({ taskId: task.taskId, entry });
    this.#changedTasks.add(task.taskId);
  }

  #summary(t: TaskRecord): TaskView {
    return {
      taskId: t.taskId,
      nodes: [...t.nodeSet].sort(),
      processes: [...t.processSet],
      roles: [...t.roleSet],
      updatedAt: t.updatedAt,
      ...(t.state !== undefined ? { state: t.state } : {}),
      ...(t.status !== undefined ? { status: t.status } : {}),
      ...(t.replayed ? { replayed: true } : {}),
      ...(t.mapSet.size > 0 ? { maps: t.mapSet.views() } : {}),
    };
  }

  #evictActors(): void {
    if (this.#actors.size <= this.#limits.maxActors) return;
    for (const [id, actor] of this.#actors) {
      if (this.#actors.size <= this.#limits.maxActors) break;
      if (actor.snapshot.status === "active") continue;
      this.#actors.delete(id);
      this.#changedActors.delete(id);
      this.#delta.removed.push(id);
    }
  }

  #evictTasks(): void {
    if (this.#tasks.size <= this.#limits.maxTasks) return;
    for (const [id, task] of this.#tasks) {
      if (this.#tasks.size <= this.#limits.maxTasks) break;
      if (task.status === undefined && task.state !== undefined && !["completed", "failed", "cancelled"].includes(task.state)) continue;
      this.#tasks.delete(id);
    }
  }
}
