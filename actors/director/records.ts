/**
 * Task records as the Director changes them: every write is a compare-and-set on the record's revision, so two
 * processes never both advance one task. A Director *claims* a task by writing `running` with its owner id and a
 * claim time; afterwards it writes only while that claim is still the record's, and a final record is never
 * written again.
 *
 * A submission is stored in the intake queue, not here: a task's record is created by its claim. On a task's first
 * delivery the claim is *pending*: the Director runs the task at once and stores the claim with its first write (a
 * checkpoint, at the latest {@link PENDING_CLAIM_MS} after it started, or the final record of a task that ended
 * sooner). Creating the record is exclusive, so should another Director have claimed the task meanwhile (only after
 * this one stopped signalling progress for a whole ack wait), the write fails and this Director publishes nothing.
 */
import { decode, encode, FINAL_STATES, TaskRecord, type TaskOutcome, type TaskId } from "../../protocol/index.js";
import { MAX_STORED_VALUE_BYTES, type TaskStore } from "../bus.js";

/** How often a write is retried when another writer changed the record in between (cancel requests do). */
const CAS_ATTEMPTS = 8;

/** Longest a task runs under a pending claim before the claim is stored (its first checkpoint). */
export const PENDING_CLAIM_MS = 1000;

/** A claim this Director holds on one task. */
export interface Claim {
  /** The task. */
  readonly taskId: TaskId;
  /** This Director's owner id. */
  readonly owner: string;
  /** When the claim was made; with `owner` it identifies the claim. */
  readonly claimedAt: string;
  /** The record as claimed. */
  readonly record: TaskRecord;
  /** The owner the task had before, when this claim took it over (a resume). */
  readonly previousOwner?: string;
  /** The claim time of that owner's claim, which this claim replaced (it is told so: actors/director/takeover.ts). */
  readonly previousClaimedAt?: string;
  /**
   * The record as this claim last wrote it, with its revision: the next write compares against it at once instead
   * of reading the record first, and reads it only when someone else wrote in between.
   */
  written?: Known;
  /** Not stored yet: the first write creates the record ({@link pendingClaim}). */
  pending?: boolean;
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
  | { readonly kind: "contended" }
  /** The record belongs to another queued item of the same id (a submission repeated after the duplicate window). */
  | { readonly kind: "duplicate" };

/** Outcome of {@link writeClaimed}: `lost` when the claim is no longer the record's or the record is final. */
export type WriteOutcome = "written" | "lost";

/** Reads and decodes a record with its revision. */
export async function readTaskRecord(store: TaskStore, taskId: TaskId): Promise<{ record: TaskRecord; revision: number } | undefined> {
  const read = await readStoredRecord(store, taskId);
  return read && { record: read.record, revision: read.revision };
}

/** {@link readTaskRecord}, with the bytes as stored. */
async function readStoredRecord(
  store: TaskStore,
  taskId: TaskId,
): Promise<{ record: TaskRecord; revision: number; bytes: Uint8Array } | undefined> {
  const entry = await store.getWithRevision(taskId);
  if (!entry) return undefined;
  // A record holds its template and snapshot: larger than a message body may be (the store keeps it in chunks).
  const decoded = decode(TaskRecord, entry.value, MAX_STORED_VALUE_BYTES);
  if (!decoded.ok) throw new Error(`stored record of task '${taskId}' is unreadable: ${decoded.error.message}`);
  return { record: decoded.value, revision: entry.revision, bytes: entry.value };
}

/** The record of `queued` claimed by `owner` now, from the queue item at `intakeSeq`. */
function claimed(queued: TaskRecord, owner: string, claimedAt: string, intakeSeq: number | undefined): TaskRecord {
  // Object.assign, not a literal that starts with `...queued`: in this V8 (Node 20) such a literal gets a hidden class
  // of its own, about 0.3 KB more for each task held. The keys come out in the same order.
  return Object.assign({}, queued, {
    state: "running" as const,
    owner,
    claimedAt,
    seq: queued.seq ?? 1,
    updatedAt: claimedAt,
    ...(intakeSeq === undefined ? {} : { intakeSeq }),
  });
}

/**
 * A claim on a task's first delivery, not stored yet: its first write creates the record. Nothing of the task ran
 * before, so nothing is read.
 */
export function pendingClaim(queued: TaskRecord, owner: string, now: () => Date, intakeSeq: number): Claim {
  const claimedAt = now().toISOString();
  return { taskId: queued.taskId, owner, claimedAt, record: claimed(queued, owner, claimedAt, intakeSeq), pending: true };
}

/**
 * Claims a task for `owner`. The caller holds the task's intake message, so any earlier claim by that message is
 * stale: its Director stopped signalling progress (or handed the message back), and the claim is taken over. A record
 * made for another message of the same id (`intakeSeq` differs) is left alone: `duplicate`. Without a record, the
 * queued one (`queued`, from the message) is created; a message without one (queued by an older release) needs the
 * record stored at submission: `missing` otherwise.
 */
export async function claimTask(
  store: TaskStore,
  taskId: TaskId,
  owner: string,
  now: () => Date,
  from: { queued?: TaskRecord | undefined; intakeSeq?: number | undefined } = {},
): Promise<ClaimOutcome> {
  const { queued, intakeSeq } = from;
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const current = await readTaskRecord(store, taskId);
    const claimedAt = now().toISOString();
    if (!current) {
      if (!queued) return { kind: "missing" };
      const record = claimed(queued, owner, claimedAt, intakeSeq);
      const revision = await store.createWithRevision(taskId, encode(TaskRecord, record));
      if (revision !== undefined) return { kind: "claimed", claim: { taskId, owner, claimedAt, record, written: { record, revision } } };
      continue;
    }
    const { record, revision } = current;
    if (intakeSeq !== undefined && record.intakeSeq !== undefined && record.intakeSeq !== intakeSeq) return { kind: "duplicate" };
    if (FINAL_STATES.has(record.state)) return { kind: "final", record };
    const next = claimed(record, owner, claimedAt, intakeSeq ?? record.intakeSeq);
    const written = await store.update(taskId, encode(TaskRecord, next), revision);
    if (written !== undefined) {
      return {
        kind: "claimed",
        claim: {
          taskId,
          owner,
          claimedAt,
          record: next,
          written: { record: next, revision: written },
          ...(record.owner === undefined ? {} : { previousOwner: record.owner }),
          ...(record.claimedAt === undefined ? {} : { previousClaimedAt: record.claimedAt }),
        },
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
 * Whether a record read shows that `claim` is lost: someone else's record, or a final one, newer than what this claim
 * wrote. A read can be stale (a direct get answered by a replica still catching up after a leader election): no
 * record, or a revision older than this claim's last write, says nothing, and is not taken as a loss (the next write
 * or heartbeat finds out for sure).
 */
export function claimLostBy(read: Known | undefined, claim: Claim): boolean {
  if (read === undefined) return false;
  if (holds(read.record, claim)) return false;
  return claim.written === undefined || read.revision > claim.written.revision;
}

/**
 * Writes `change(current record)` while the claim is the record's. Concurrent changes by others (a cancel
 * request) are kept: the change is applied to the record as it is now. The record this claim wrote last is taken
 * as the current one without reading it; should the store hold a newer revision, it is read and the change applied again.
 * A pending claim's first write creates the record; finding one in its place, it is lost.
 */
export async function writeClaimed(store: TaskStore, claim: Claim, change: (record: TaskRecord) => TaskRecord): Promise<WriteOutcome> {
  /** The last write sent: should its answer be lost (a NATS outage), the record read next may be that write itself. */
  let sent: Uint8Array | undefined;
  const landed = (current: { bytes: Uint8Array }) => sent !== undefined && Buffer.compare(current.bytes, sent) === 0;
  if (claim.pending === true) {
    const next = change(claim.record);
    sent = encode(TaskRecord, next);
    const revision = await store.createWithRevision(claim.taskId, sent);
    if (revision !== undefined) {
      claim.pending = false;
      claim.written = { record: next, revision };
      return "written";
    }
    // The record exists. This claim's own earlier write, whose answer was lost with the connection, is taken as
    // written (a final one too: it is this very write); anything else means another Director claimed the task (this
    // one went silent for an ack wait), or a cancel request ended it while it was queued.
    const current = await readStoredRecord(store, claim.taskId);
    if (current && landed(current)) {
      claim.pending = false;
      claim.written = { record: current.record, revision: current.revision };
      return "written";
    }
    if (!current || !holds(current.record, claim)) return "lost";
    claim.pending = false;
    claim.written = { record: current.record, revision: current.revision };
  }
  const known = claim.written;
  // The record this claim wrote last is tried first, on top of the attempts that read it.
  for (let attempt = known !== undefined && holds(known.record, claim) ? -1 : 0; attempt < CAS_ATTEMPTS; attempt++) {
    const read = attempt < 0 ? undefined : await readStoredRecord(store, claim.taskId);
    // The write before landed though its answer was lost: done (a final record no longer holds the claim).
    if (read !== undefined && landed(read)) {
      claim.written = { record: read.record, revision: read.revision };
      return "written";
    }
    const current = attempt < 0 ? known : read && { record: read.record, revision: read.revision };
    if (!current || !holds(current.record, claim)) return "lost";
    const next = change(current.record);
    sent = encode(TaskRecord, next);
    const revision = await store.update(claim.taskId, sent, current.revision);
    if (revision !== undefined) {
      claim.written = { record: next, revision };
      return "written";
    }
  }
  throw new Error(`task '${claim.taskId}': record kept changing; gave up after ${CAS_ATTEMPTS} attempts`);
}

/** What {@link requestCancel} did. */
export type CancelOutcome =
  /** Nothing is queued or stored under the id. */
  | { readonly kind: "missing" }
  /** The task was final already. */
  | { readonly kind: "final"; readonly record: TaskRecord }
  /** The request is stored in the record; the Director running the task (told by the cancel broadcast) ends it. */
  | { readonly kind: "requested"; readonly record: TaskRecord }
  /**
   * The task was only queued (no record): its final `cancelled` record is stored now. Its queue item is to be
   * discarded; a Director that started it meanwhile finds the record final and publishes nothing.
   */
  | { readonly kind: "cancelled"; readonly record: TaskRecord; readonly seq: number };

/**
 * Requests the cancellation of a task unless it is final. A task still only in the intake queue (no record: not
 * claimed yet, or running under a pending claim) is cancelled at once: its final record is created from the queued
 * one (`queued` reads it).
 */
export async function requestCancel(
  store: TaskStore,
  taskId: TaskId,
  now: () => Date,
  queued: () => Promise<{ record: TaskRecord; seq: number } | undefined>,
): Promise<CancelOutcome> {
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const current = await readTaskRecord(store, taskId);
    if (!current) {
      const found = await queued();
      if (!found) return { kind: "missing" };
      const at = now().toISOString();
      const result: TaskOutcome = { taskId: found.record.taskId, status: "CANCELLED", content: "", notes: {} };
      const record: TaskRecord = {
        ...found.record,
        state: "cancelled",
        cancelRequested: true,
        result,
        seq: (found.record.seq ?? 1) + 1,
        updatedAt: at,
        intakeSeq: found.seq,
      };
      if ((await store.createWithRevision(taskId, encode(TaskRecord, record))) !== undefined)
        return { kind: "cancelled", record, seq: found.seq };
      continue;
    }
    if (FINAL_STATES.has(current.record.state)) return { kind: "final", record: current.record };
    if (current.record.cancelRequested) return { kind: "requested", record: current.record };
    const next: TaskRecord = { ...current.record, cancelRequested: true, updatedAt: now().toISOString() };
    if ((await store.update(taskId, encode(TaskRecord, next), current.revision)) !== undefined) return { kind: "requested", record: next };
  }
  throw new Error(`task '${taskId}': record kept changing; gave up after ${CAS_ATTEMPTS} attempts`);
}
