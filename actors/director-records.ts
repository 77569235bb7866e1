/**
 * Task records as the Director changes them: every write is a compare-and-set on the record's revision, so two
 * processes never both advance one task. A Director *claims* a task by writing `running` with its owner id and a
 * claim time; afterwards it writes only while that claim is still the record's, and a final record is never
 * written again.
 */
import { decode, encode, FINAL_STATES, TaskRecord } from "../protocol/index.js";
import type { TaskStore } from "./bus.js";

/** How often a write is retried when another writer changed the record in between (cancel requests do). */
const CAS_ATTEMPTS = 8;

/** A claim this Director holds on one task. */
export interface Claim {
  /** The task. */
  readonly taskId: string;
  /** This Director's owner id. */
  readonly owner: string;
  /** When the claim was made; with `owner` it identifies the claim. */
  readonly claimedAt: string;
  /** The record as claimed. */
  readonly record: TaskRecord;
  /** The owner the task had before, when this claim took it over (a resume). */
  readonly previousOwner?: string;
  /**
   * The record as this claim last wrote it, with its revision: the next write compares against it at once instead
   * of reading the record first, and reads it only when someone else wrote in between.
   */
  written?: Known;
}

/** A record and the revision it was stored at. */
export interface Known {
  readonly record: TaskRecord;
  readonly revision: number;
}

/** Outcome of {@link claimTask}. */
export type ClaimOutcome =
  | { readonly kind: "claimed"; readonly claim: Claim }
  | { readonly kind: "final"; readonly record: TaskRecord }
  | { readonly kind: "missing" }
  | { readonly kind: "contended" };

/** Outcome of {@link writeClaimed}: `lost` when the claim is no longer the record's or the record is final. */
export type WriteOutcome = "written" | "lost";

/** Reads and decodes a record with its revision. */
export async function readRecord(store: TaskStore, taskId: string): Promise<{ record: TaskRecord; revision: number } | undefined> {
  const entry = await store.getWithRevision(taskId);
  if (!entry) return undefined;
  const decoded = decode(TaskRecord, entry.value);
  if (!decoded.ok) throw new Error(`stored record of task '${taskId}' is unreadable: ${decoded.error.message}`);
  return { record: decoded.value, revision: entry.revision };
}

/**
 * Claims a task for `owner`. The caller holds the task's intake message, so any earlier claim is stale: its
 * Director stopped signalling progress (or handed the message back), and the claim is taken over. `created`, the
 * record as this process stored it at submission, saves reading it: the claim compares against its revision, and
 * reads the record only when it changed since.
 */
export async function claimTask(store: TaskStore, taskId: string, owner: string, now: () => Date, created?: Known): Promise<ClaimOutcome> {
  // The record stored at submission is tried first, on top of the attempts that read it.
  for (let attempt = created === undefined ? 0 : -1; attempt < CAS_ATTEMPTS; attempt++) {
    const current = attempt < 0 ? created : await readRecord(store, taskId);
    if (!current) return { kind: "missing" };
    const { record, revision } = current;
    if (FINAL_STATES.has(record.state)) return { kind: "final", record };
    const claimedAt = now().toISOString();
    const claimed: TaskRecord = { ...record, state: "running", owner, claimedAt, seq: record.seq ?? 1, updatedAt: claimedAt };
    const written = await store.update(taskId, encode(TaskRecord, claimed), revision);
    if (written !== undefined) {
      return {
        kind: "claimed",
        claim: { taskId, owner, claimedAt, record: claimed, written: { record: claimed, revision: written }, ...(record.owner === undefined ? {} : { previousOwner: record.owner }) },
      };
    }
  }
  return { kind: "contended" };
}

/** Whether `record` still carries `claim`. */
export function holds(record: TaskRecord, claim: Claim): boolean {
  return record.owner === claim.owner && record.claimedAt === claim.claimedAt && !FINAL_STATES.has(record.state);
}

/**
 * Writes `change(current record)` while the claim is the record's. Concurrent changes by others (a cancel
 * request) are kept: the change is applied to the record as it is now. The record this claim wrote last is taken
 * as the current one without reading it; should the store hold a newer revision, it is read and the change applied again.
 */
export async function writeClaimed(store: TaskStore, claim: Claim, change: (record: TaskRecord) => TaskRecord): Promise<WriteOutcome> {
  const known = claim.written;
  // The record this claim wrote last is tried first, on top of the attempts that read it.
  for (let attempt = known !== undefined && holds(known.record, claim) ? -1 : 0; attempt < CAS_ATTEMPTS; attempt++) {
    const current = attempt < 0 ? known : await readRecord(store, claim.taskId);
    if (!current || !holds(current.record, claim)) return "lost";
    const next = change(current.record);
    const revision = await store.update(claim.taskId, encode(TaskRecord, next), current.revision);
    if (revision !== undefined) {
      claim.written = { record: next, revision };
      return "written";
    }
  }
  throw new Error(`task '${claim.taskId}': record kept changing; gave up after ${CAS_ATTEMPTS} attempts`);
}

/**
 * Marks a task's record as cancel-requested unless it is final.
 * @returns the record after the request, or `undefined` when there is none.
 */
export async function requestCancel(store: TaskStore, taskId: string, now: () => Date): Promise<TaskRecord | undefined> {
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const current = await readRecord(store, taskId);
    if (!current) return undefined;
    if (FINAL_STATES.has(current.record.state) || current.record.cancelRequested) return current.record;
    const next: TaskRecord = { ...current.record, cancelRequested: true, updatedAt: now().toISOString() };
    if ((await store.update(taskId, encode(TaskRecord, next), current.revision)) !== undefined) return next;
  }
  throw new Error(`task '${taskId}': record kept changing; gave up after ${CAS_ATTEMPTS} attempts`);
}
