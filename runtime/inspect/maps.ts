/**
 * A task's `map` nodes as the inspector draws them: each map with its branches side by side, in order of branch
 * number, each running or finished (`COMPLETE`, `FAILED`, `CANCELLED`). Derived from the task events `map.started`,
 * `branch.started` and `branch.finished` (their data checked against the protocol schemas: events are untrusted), live
 * or replayed, in any order: a report older than what a branch shows (a lower `seq`) leaves it as it is, so a replayed
 * duplicate never sets a finished branch running again, while a rerun (a task resumed elsewhere) does. A branch goes
 * to the map its node path names (`branchMapPath`).
 */
import {
  BranchFinishedEventData,
  BranchStartedEventData,
  branchMapPath,
  MapStartedEventData,
  type BranchStatus,
  type TaskEvent,
} from "../../protocol/index.js";

/** Most maps kept per task. */
export const MAX_MAPS = 50;
/** Most branches kept per map (the first by number); the page says how many more there are. */
export const MAX_BRANCHES = 256;
/** Most branches kept per task, all its maps together (as many as its timeline's entries). */
export const MAX_TASK_BRANCHES = 1000;

/** One branch of a map. */
export interface BranchView {
  /** Its number, from 1. */
  branch: number;
  /** Its node (`0.steps.2`, `0/map:2`). */
  nodePath: string;
  state: "running" | BranchStatus;
}

/** A map node with its branches. */
export interface MapView {
  nodePath: string;
  /** How many branches it runs. */
  total: number;
  /** How many run at once (known once `map.started` was seen). */
  maxParallel?: number;
  onFailure?: "fail_fast" | "collect";
  /** How many branches have finished (the latest `branch.finished` says). */
  finished: number;
  /** The branches seen, by number, at most {@link MAX_BRANCHES}. */
  branches: BranchView[];
  /** Some branch of the first {@link MAX_BRANCHES} was not kept (the task reached {@link MAX_TASK_BRANCHES}). */
  truncated?: true;
}

interface MapRecord {
  view: Omit<MapView, "branches">;
  finishedSeq: number;
  branches: Map<number, BranchView & { seq: number }>;
}

/** The maps of one task. */
export class TaskMaps {
  readonly #maps = new Map<string, MapRecord>();
  #branchCount = 0;

  /** Applies a task event; true when it changed a map. */
  apply(event: TaskEvent): boolean {
    if (event.type === "map.started") {
      const data = MapStartedEventData.safeParse(event.data);
      if (!data.success) return false;
      const map = this.#map(data.data.nodePath, data.data.total);
      if (!map) return false;
      Object.assign(map.view, { total: data.data.total, maxParallel: data.data.maxParallel, onFailure: data.data.onFailure });
      return true;
    }
    if (event.type !== "branch.started" && event.type !== "branch.finished") return false;
    const data = BranchStartedEventData.safeParse(event.data);
    const ended = event.type === "branch.finished" ? BranchFinishedEventData.safeParse(event.data) : undefined;
    if (!data.success || ended?.success === false) return false;
    const { nodePath, branch, total } = data.data;
    // The branch's map as its scoped node path names it: maps at one template node in two branches stay apart.
    const map = this.#map(branchMapPath(data.data), total);
    if (!map) return false;
    if (ended?.data && event.seq >= map.finishedSeq) {
      map.view.finished = ended.data.finished;
      map.finishedSeq = event.seq;
    }
    const known = map.branches.get(branch);
    if (branch > MAX_BRANCHES || (known && known.seq > event.seq)) return true;
    if (!known && this.#branchCount >= MAX_TASK_BRANCHES) {
      map.view.truncated = true;
      return true;
    }
    if (!known) this.#branchCount++;
    map.branches.set(branch, { branch, nodePath, state: ended?.data?.status ?? "running", seq: event.seq });
    return true;
  }

  /** The maps, by node path, each with its branches by number. */
  views(): MapView[] {
    return [...this.#maps.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, map]) => ({
        ...map.view,
        branches: [...map.branches.values()]
          .sort((a, b) => a.branch - b.branch)
          .map(({ branch, nodePath, state }) => ({ branch, nodePath, state })),
      }));
  }

  get size(): number {
    return this.#maps.size;
  }

  #map(nodePath: string, total: number): MapRecord | undefined {
    let map = this.#maps.get(nodePath);
    if (!map) {
      if (this.#maps.size >= MAX_MAPS) return undefined;
      map = { view: { nodePath, total, finished: 0 }, finishedSeq: 0, branches: new Map() };
      this.#maps.set(nodePath, map);
    }
    return map;
  }
}
