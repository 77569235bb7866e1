/**
 * Persisted snapshots of the task machine: written with the task's record under the Director's claim, restored by
 * the Director that takes the task over. A snapshot of the current version is restored as it is (its invoked
 * evaluation starts again, and replays the Handler's records); one of an older version is migrated when a migration
 * exists; any other is refused with a clear error, which fails the task instead of crashing the process. A snapshot
 * whose active states invoke a child it does not hold is refused too: restored, it would wait forever.
 */
import type { Actor, AnyStateNode } from "xstate";
import { EVALUATE_ID, TASK_MACHINE_VERSION, taskMachine } from "../../machines/director/task.js";
import type { TaskRecord, TaskId } from "../../protocol/index.js";
import { messageOf } from "../../protocol/errors.js";

/** The machine id snapshots are stored under. */
export const TASK_MACHINE_ID = "task";

/** Migrations of older snapshots, by the version a migration starts from (each returns the next version's snapshot). */
export type Migrations = Readonly<Record<number, (snapshot: unknown) => unknown>>;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** v1 → v2: the evaluation, invoked without an id in v1, is the child `evaluate`. */
function nameEvaluateChild(snapshot: unknown): unknown {
  if (!isObject(snapshot) || !isObject(snapshot.children)) return snapshot;
  const children = Object.fromEntries(
    Object.entries(snapshot.children).map(([key, child]) => [key === "0.task.running" ? EVALUATE_ID : key, child]),
  );
  return { ...snapshot, children };
}

/** The migrations of this release. */
export const MIGRATIONS: Migrations = { 1: nameEvaluateChild };

/** What to restore a task from: a snapshot of the current version, or why the stored one cannot be used. */
export type Restorable =
  | { kind: "none" }
  | { kind: "snapshot"; snapshot: unknown; migratedFrom?: number }
  | { kind: "refused"; message: string };

/**
 * Decides what a record's stored snapshot restores to.
 * @param migrations the migrations to apply to an older snapshot; tests pass their own.
 */
export function restorable(record: TaskRecord, migrations: Migrations = MIGRATIONS): Restorable {
  const stored = record.machine;
  if (!stored) return { kind: "none" };
  if (stored.id !== TASK_MACHINE_ID)
    return { kind: "refused", message: `stored snapshot is of machine '${stored.id}', not '${TASK_MACHINE_ID}'` };
  if (stored.version > TASK_MACHINE_VERSION) {
    return {
      kind: "refused",
      message: `stored snapshot is of task machine v${stored.version}, newer than this release's v${TASK_MACHINE_VERSION}: resume it with a newer dirigent`,
    };
  }
  let snapshot = stored.snapshot;
  for (let version = stored.version; version < TASK_MACHINE_VERSION; version++) {
    const migrate = migrations[version];
    if (!migrate)
      return {
        kind: "refused",
        message: `stored snapshot is of task machine v${stored.version}; this release (v${TASK_MACHINE_VERSION}) has no migration from v${version}`,
      };
    try {
      snapshot = migrate(snapshot);
    } catch (err) {
      return {
        kind: "refused",
        message: `stored snapshot of task machine v${stored.version} could not be migrated from v${version}: ${messageOf(err)}`,
      };
    }
  }
  const problem = otherTask(snapshot, record.taskId) ?? missingChild(snapshot);
  if (problem !== undefined) return { kind: "refused", message: problem };
  return { kind: "snapshot", snapshot, ...(stored.version === TASK_MACHINE_VERSION ? {} : { migratedFrom: stored.version }) };
}

/**
 * Why a snapshot is not of the task `taskId`: its context, or the input of its invoked evaluation, names another task.
 * The restored machine's effects are found by that id (./task.ts: `taskActors`).
 */
function otherTask(snapshot: unknown, taskId: TaskId): string | undefined {
  if (!isObject(snapshot)) return undefined;
  const evaluation = isObject(snapshot.children) ? snapshot.children[EVALUATE_ID] : undefined;
  const evaluated = isObject(evaluation) && isObject(evaluation.snapshot) ? evaluation.snapshot.input : undefined;
  const named = [isObject(snapshot.context) ? snapshot.context.taskId : undefined, isObject(evaluated) ? evaluated.taskId : undefined];
  const other = named.find((id) => id !== undefined && id !== taskId);
  return other === undefined ? undefined : `stored snapshot is of task '${String(other)}', not of '${taskId}'`;
}

/**
 * Why an active snapshot cannot run on: a state it is in is not the machine's, or an invoke of a state it is in has
 * no child in `children`. Snapshots that are not even shaped like one are left to xstate, whose restore reports them.
 */
function missingChild(snapshot: unknown): string | undefined {
  if (!isObject(snapshot) || snapshot.status !== "active") return undefined;
  const invoked: string[] = [];
  const visit = (node: AnyStateNode, value: unknown): string | undefined => {
    invoked.push(...node.invoke.map((i) => i.id));
    if (value === undefined) return undefined;
    const entries = typeof value === "string" ? [[value, undefined] as const] : isObject(value) ? Object.entries(value) : [];
    if (entries.length === 0) return `stored snapshot has an unreadable state value '${JSON.stringify(value)}'`;
    for (const [key, below] of entries) {
      const child = node.states[key];
      if (!child) return `stored snapshot is in state '${key}', which the task machine v${TASK_MACHINE_VERSION} does not have`;
      const problem = visit(child, below);
      if (problem !== undefined) return problem;
    }
    return undefined;
  };
  const problem = visit(taskMachine.root, snapshot.value);
  if (problem !== undefined) return problem;
  const children = isObject(snapshot.children) ? snapshot.children : {};
  const absent = invoked.find((id) => !(id in children));
  return absent === undefined
    ? undefined
    : `stored snapshot has no child '${absent}' for the work its state invokes; restored, it would wait forever`;
}

/** The record field holding `actor`'s persisted snapshot. */
export function persisted(actor: Actor<typeof taskMachine>): NonNullable<TaskRecord["machine"]> {
  return { id: TASK_MACHINE_ID, version: TASK_MACHINE_VERSION, snapshot: actor.getPersistedSnapshot() };
}
