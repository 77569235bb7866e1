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
 * Director stopped signalling progress (or handed the message back), and the claim is taken over.
 */
export async function claimTask(store: TaskStore, taskId: string, owner: string, now: () => Date): Promise<ClaimOutcome> {
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const current = await readRecord(store, taskId);
    if (!current) return { kind: "missing" };
    const { record, revision } = current;
    if (FINAL_STATES.has(record.state)) return { kind: "final", record };
    const claimedAt = now().toISOString();
    const claimed: TaskRecord = { ...record, state: "running", owner, claimedAt, seq: record.seq ?? 1, updatedAt: claimedAt };
    if ((await store.update(taskId, encode(TaskRecord, claimed), revision)) !== undefined) {
      return {
        kind: "claimed",
        claim: { taskId, owner, claimedAt, record: claimed, ...(record.owner === undefined ? {} : { previousOwner: record.owner }) },
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
 * request) are kept: the change is applied to the record as it is now.
 */
export async function writeClaimed(store: TaskStore, claim: Claim, change: (record: TaskRecord) => TaskRecord): Promise<WriteOutcome> {
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const current = await readRecord(store, claim.taskId);
    if (!current || !holds(current.record, claim)) return "lost";
    if ((await store.update(claim.taskId, encode(TaskRecord, change(current.record)), current.revision)) !== undefined) return "written";
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
