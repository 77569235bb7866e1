/**
 * Spawned subtasks of a continuation (machines/evaluator/continuation.ts): a session's `spawn_subtask` starts a child
 * that runs while the session goes on, `await_subtasks` collects results, `cancel_subtask` stops one. Each spawned
 * child is a child actor of the continuation machine named after its handle (`spawned.s1`), so its
 * `xstate.done.actor.spawned.s1` event settles it whatever state the machine is in. Pure functions of the record
 * of spawned subtasks; the machine wires them into actions and guards.
 */
import type { AwaitRequest, SubtaskRequest, TaskResult } from "../../protocol/index.js";

/** What a spawned subtask is known to have come to. */
export type SpawnStatus = "running" | "complete" | "failed" | "cancelled";

/** One spawned subtask of a session. */
export interface SpawnedSubtask {
  /** `s1`, `s2`, … in the order the session spawned them: the same on a re-run of the session. */
  handle: string;
  request: SubtaskRequest;
  status: SpawnStatus;
  /** The child's content, once settled. */
  content?: string;
  /** Why it failed. */
  error?: string;
  /** Whether an `await_subtasks` or `cancel_subtask` answer gave the session its final status. */
  collected: boolean;
}

/** What one handle is reported as to the session. */
export interface SpawnReport {
  status: SpawnStatus | "unknown";
  content?: string;
  error?: string;
}

const ACTOR_PREFIX = "spawned.";
const DONE_PREFIX = `xstate.done.actor.${ACTOR_PREFIX}`;
const ERROR_PREFIX = `xstate.error.actor.${ACTOR_PREFIX}`;

/** The id of the child actor that runs the spawned subtask `handle`. */
export const spawnActorId = (handle: string): string => `${ACTOR_PREFIX}${handle}`;

/** The handle of the next spawned subtask. */
export const nextHandle = (spawned: readonly SpawnedSubtask[]): string => `s${spawned.length + 1}`;

/** The handle a done or error event of a spawned child is about; `undefined` for any other event. */
export function handleOfEvent(type: string): string | undefined {
  if (type.startsWith(DONE_PREFIX)) return type.slice(DONE_PREFIX.length);
  if (type.startsWith(ERROR_PREFIX)) return type.slice(ERROR_PREFIX.length);
  return undefined;
}

function update(spawned: readonly SpawnedSubtask[], handle: string, change: (s: SpawnedSubtask) => SpawnedSubtask): SpawnedSubtask[] {
  return spawned.map((s) => (s.handle === handle ? change(s) : s));
}

/** The record after the child of `handle` answered `result` (a subtask cancelled meanwhile stays cancelled). */
export function settled(spawned: readonly SpawnedSubtask[], handle: string, result: TaskResult): SpawnedSubtask[] {
  return update(spawned, handle, (s) =>
    s.status !== "running"
      ? s
      : result.status === "COMPLETE"
        ? { ...s, status: "complete", content: result.content }
        : { ...s, status: "failed", content: result.content, error: result.error?.message ?? `subtask ended ${result.status}` },
  );
}

/** The record after the child of `handle` threw. */
export function threw(spawned: readonly SpawnedSubtask[], handle: string, error: unknown): SpawnedSubtask[] {
  return update(spawned, handle, (s) => (s.status !== "running" ? s : { ...s, status: "failed", content: "", error: String(error) }));
}

/** The handles an await waits for: the ones it names, else every spawned subtask not collected yet. */
export function awaitedHandles(spawned: readonly SpawnedSubtask[], request: AwaitRequest): string[] {
  return request.handles ? [...new Set(request.handles)] : spawned.filter((s) => !s.collected).map((s) => s.handle);
}

/** Whether none of `handles` is still running (a handle never spawned counts as settled: it is reported unknown). */
export function allSettled(spawned: readonly SpawnedSubtask[], handles: readonly string[]): boolean {
  return handles.every((h) => spawned.find((s) => s.handle === h)?.status !== "running");
}

function reportOf(entry: SpawnedSubtask | undefined, handle: string): SpawnReport {
  if (!entry) return { status: "unknown", error: `no subtask was spawned with handle ${handle}` };
  if (entry.status === "running") return { status: "running" };
  return { status: entry.status, content: entry.content ?? "", ...(entry.error === undefined ? {} : { error: entry.error }) };
}

/** The answer to an await of `handles` (a JSON object keyed by handle), and the record with the settled ones collected. */
export function awaitAnswer(spawned: readonly SpawnedSubtask[], handles: readonly string[]): { answer: string; spawned: SpawnedSubtask[] } {
  const reports = Object.fromEntries(
    handles.map((h) => [
      h,
      reportOf(
        spawned.find((s) => s.handle === h),
        h,
      ),
    ]),
  );
  const done = new Set(handles.filter((h) => reports[h]?.status !== "running"));
  return { answer: JSON.stringify(reports), spawned: spawned.map((s) => (done.has(s.handle) ? { ...s, collected: true } : s)) };
}

/**
 * A cancel of `handle`: whether its child must be stopped (it is running), the answer (`{handle, status, …}`) and
 * the record after it.
 */
export function cancelOutcome(
  spawned: readonly SpawnedSubtask[],
  handle: string,
): { stop: boolean; answer: string; spawned: SpawnedSubtask[] } {
  const entry = spawned.find((s) => s.handle === handle);
  const stop = entry?.status === "running";
  const after = update(spawned, handle, (s) => ({ ...s, ...(stop ? { status: "cancelled" as const, content: "" } : {}), collected: true }));
  return {
    stop,
    answer: JSON.stringify({
      handle,
      ...reportOf(
        after.find((s) => s.handle === handle),
        handle,
      ),
    }),
    spawned: after,
  };
}

/** The handles still running: the session ended without awaiting them, so they are cancelled. */
export const orphansOf = (spawned: readonly SpawnedSubtask[]): string[] =>
  spawned.filter((s) => s.status === "running").map((s) => s.handle);

/** The record with `handles` cancelled. */
export function cancelled(spawned: readonly SpawnedSubtask[], handles: readonly string[]): SpawnedSubtask[] {
  const set = new Set(handles);
  return spawned.map((s) => (set.has(s.handle) ? { ...s, status: "cancelled", content: "" } : s));
}
