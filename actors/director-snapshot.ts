/**
 * Persisted snapshots of the task machine: written with the task's record under the Director's claim, restored by
 * the Director that takes the task over. A snapshot of the current version is restored as it is (its invoked
 * evaluation starts again, and replays the Handler's records); one of an older version is migrated when a migration
 * exists; any other is refused with a clear error, which fails the task instead of crashing the process.
 */
import type { Actor } from "xstate";
import { TASK_MACHINE_VERSION, type taskMachine } from "../machines/task.js";
import type { TaskRecord } from "../protocol/index.js";

/** The machine id snapshots are stored under. */
export const TASK_MACHINE_ID = "task";

/** Migrations of older snapshots, by the version they migrate from (each returns the next version's snapshot). */
const MIGRATIONS: Readonly<Record<number, (snapshot: unknown) => unknown>> = {};

/** What to restore a task from: a snapshot of the current version, or why the stored one cannot be used. */
export type Restorable = { kind: "none" } | { kind: "snapshot"; snapshot: unknown; migratedFrom?: number } | { kind: "refused"; message: string };

/** Decides what a record's stored snapshot restores to. */
export function restorable(record: TaskRecord): Restorable {
  const stored = record.machine;
  if (!stored) return { kind: "none" };
  if (stored.id !== TASK_MACHINE_ID) return { kind: "refused", message: `stored snapshot is of machine '${stored.id}', not '${TASK_MACHINE_ID}'` };
  if (stored.version === TASK_MACHINE_VERSION) return { kind: "snapshot", snapshot: stored.snapshot };
  if (stored.version > TASK_MACHINE_VERSION) {
    return { kind: "refused", message: `stored snapshot is of task machine v${stored.version}, newer than this release's v${TASK_MACHINE_VERSION}: resume it with a newer dirigent` };
  }
  let snapshot = stored.snapshot;
  for (let version = stored.version; version < TASK_MACHINE_VERSION; version++) {
    const migrate = MIGRATIONS[version];
    if (!migrate) return { kind: "refused", message: `stored snapshot is of task machine v${stored.version}; this release (v${TASK_MACHINE_VERSION}) has no migration from v${version}` };
    snapshot = migrate(snapshot);
  }
  return { kind: "snapshot", snapshot, migratedFrom: stored.version };
}

/** The record field holding `actor`'s persisted snapshot. */
export function persisted(actor: Actor<typeof taskMachine>): NonNullable<TaskRecord["machine"]> {
  return { id: TASK_MACHINE_ID, version: TASK_MACHINE_VERSION, snapshot: actor.getPersistedSnapshot() };
}
