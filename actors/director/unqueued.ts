/**
 * No accepted task is stranded by the intake's store-first path. A queued record too large for one intake message is
 * stored in the tasks bucket first and then queued by reference (actors/director/intake.ts); between the two writes, a
 * failed queue publish or the submitter's death would leave a `queued` record that nothing runs. So the task is listed
 * in `intake.unqueued` ({@link UnqueuedTasks}) before it is stored, and taken off the list once queued; every Director
 * looks at the list every ack wait ({@link requeueUnqueued}) and queues what was left on it.
 */
import { decode, encode, encodeJson, UnqueuedTasks, type TaskId } from "../../protocol/index.js";
import type { TaskStore, WorkQueue } from "../bus.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { readTaskRecord } from "./records.js";

/** The key of the list in the tasks bucket (task ids hold no dot: it is no task's key). */
export const UNQUEUED_KEY = "intake.unqueued";

/** Compare-and-set attempts of one change of the list (large submissions at once write it in turn). */
const CAS_ATTEMPTS = 32;

/**
 * A listed task whose record is still missing after this many graces is dropped: its store write failed (its
 * submitter was told so), since a write lands within seconds or not at all.
 */
const MISSING_GRACES = 10;

type Listed = UnqueuedTasks["tasks"][number];

/** Changes the list by compare-and-set; `edit` returns the new list, or `undefined` to leave it as it is. */
async function changeList(store: TaskStore, edit: (tasks: readonly Listed[]) => Listed[] | undefined): Promise<void> {
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const current = await store.getWithRevision(UNQUEUED_KEY);
    const decoded = current === undefined ? undefined : decode(UnqueuedTasks, current.value);
    const next = edit(decoded?.ok ? decoded.value.tasks : []);
    if (next === undefined) return;
    const value = encode(UnqueuedTasks, { v: 1, tasks: next });
    const written =
      current === undefined
        ? await store.createWithRevision(UNQUEUED_KEY, value)
        : await store.update(UNQUEUED_KEY, value, current.revision);
    if (written !== undefined) return;
  }
  throw new Error(`'${UNQUEUED_KEY}' changed during each of ${CAS_ATTEMPTS} attempts to write it`);
}

/** Lists `taskId` as stored and not yet queued; before its record is stored. */
export function listUnqueued(store: TaskStore, taskId: TaskId, now: Date): Promise<void> {
  return changeList(store, (tasks) => [...tasks.filter((t) => t.taskId !== taskId), { taskId, since: now.toISOString() }]);
}

/** Takes `taskIds` off the list (they are queued, or need no queueing). */
export function unlist(store: TaskStore, taskIds: readonly string[]): Promise<void> {
  const gone = new Set(taskIds);
  return changeList(store, (tasks) => (tasks.some((t) => gone.has(t.taskId)) ? tasks.filter((t) => !gone.has(t.taskId)) : undefined));
}

/**
 * Queues the listed tasks whose submission left them unqueued: listed for longer than `graceMs` (a submission still
 * under way queues its task itself), record still `queued`, no intake item. Takes off the list what is queued now, or
 * needs no queueing (claimed, final, never stored). Several Directors doing it at once queue a task once: the queue
 * drops a second item of the same id.
 * @returns the tasks it queued.
 */
export async function requeueUnqueued(deps: ActorDeps, store: TaskStore, queue: WorkQueue, graceMs: number): Promise<string[]> {
  const stored = await store.get(UNQUEUED_KEY);
  if (stored === undefined) return [];
  const list = decode(UnqueuedTasks, stored);
  if (!list.ok) {
    deps.log.warn({ key: UNQUEUED_KEY, err: list.error.message }, "the list of unqueued tasks is unreadable; it is dropped");
    await unlistAll(store);
    return [];
  }
  const now = deps.now().getTime();
  const done: string[] = [];
  const queued: string[] = [];
  for (const { taskId, since } of list.value.tasks) {
    const age = now - Date.parse(since);
    if (!(age >= graceMs)) continue;
    try {
      const record = await readTaskRecord(store, taskId);
      if (record === undefined) {
        if (age >= graceMs * MISSING_GRACES) done.push(taskId);
        continue;
      }
      if (record.record.state === "queued" && (await queue.peek(taskId)) === undefined) {
        await queue.enqueue(taskId, encodeJson({ taskId }));
        deps.log.warn({ taskId }, "queued a stored task whose submission could not queue it");
        queued.push(taskId);
      }
      done.push(taskId);
    } catch (err) {
      // The store or the queue failing now: the task stays listed for the next look.
      deps.log.warn({ taskId, err: messageOf(err) }, "could not check an unqueued task; trying again later");
    }
  }
  if (done.length > 0) await unlist(store, done);
  return queued;
}

/** Empties an unreadable list (nothing on it can be acted on). */
function unlistAll(store: TaskStore): Promise<void> {
  return changeList(store, () => []);
}

/**
 * Looks at the list every ack wait and queues what was left on it, while `running()`; only a queue with an item size
 * limit has the store-first path. Returns a stop.
 */
export function requeueEveryAckWait(deps: ActorDeps, store: TaskStore, queue: WorkQueue, running: () => boolean): () => void {
  if (queue.maxItemBytes === undefined) return () => undefined;
  let requeueing = false;
  const requeue = async () => {
    if (requeueing || !running()) return;
    requeueing = true;
    try {
      await requeueUnqueued(deps, store, queue, queue.ackWaitMs);
    } catch (err) {
      deps.log.warn({ err: messageOf(err) }, "could not look at the unqueued tasks; trying again later");
    } finally {
      requeueing = false;
    }
  };
  const timer = setInterval(() => void requeue(), queue.ackWaitMs);
  timer.unref();
  return () => clearInterval(timer);
}
