/**
 * Result collection: await the results of N tasks at once, driven by their result messages rather than polling, so a
 * result is seen as soon as it is published. An unknown task id fails at once instead of holding the caller for the
 * whole timeout; results come back in input order; a task not finished by the deadline is reported as a timeout, on its
 * own, while the others keep their results.
 */
import { decode, FINAL_STATES, Requests, TaskOutcome, type TaskId } from "../../protocol/index.js";
import type { BusSubscription } from "../bus.js";
import { messageOf, type ActorDeps } from "../deps.js";
import { ask, RemoteError } from "../ask.js";

/** What became of one task. */
export type CollectedResult =
  | { taskId: TaskId; status: "completed" | "failed" | "cancelled"; outcome: TaskOutcome }
  | { taskId: TaskId; status: "unknown" | "timeout" | "error"; error: string };

/** Options of {@link collectResults}. */
export interface CollectOptions {
  /** How long to wait for all of them; default 300,000 ms (5 minutes). */
  timeoutMs?: number;
  /** Called as each task settles, in the order they settle. */
  onSettled?: (result: CollectedResult, index: number) => void;
  /** Stops waiting: the unsettled ones resolve as `error` ("aborted"). */
  signal?: AbortSignal;
  /** Timeout of each `get` request. */
  requestTimeoutMs?: number;
}

const STATUS = { COMPLETE: "completed", FAILED: "failed", CANCELLED: "cancelled" } as const;

/** The collected form of a final outcome. */
export function settledOf(outcome: TaskOutcome): CollectedResult {
  return { taskId: outcome.taskId, status: STATUS[outcome.status], outcome };
}

/**
 * Awaits the results of `taskIds`. It subscribes to each task's result subject first, then asks each task's state
 * once (a result published before the subscription is found there; an unknown id answers NOT_FOUND at once), then
 * waits for result messages until the deadline, when it asks the unsettled ones once more (a result published while
 * this process was disconnected is found that way) before reporting them as timeouts.
 * @returns one entry per id, in the order of `taskIds`.
 */
export async function collectResults(
  deps: ActorDeps,
  taskIds: readonly TaskId[],
  options: CollectOptions = {},
): Promise<CollectedResult[]> {
  const timeoutMs = options.timeoutMs ?? 300_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
  const results: (CollectedResult | undefined)[] = taskIds.map(() => undefined);
  const indexes = new Map<TaskId, number[]>();
  taskIds.forEach((id, i) => indexes.set(id, [...(indexes.get(id) ?? []), i]));
  let left = taskIds.length;
  let finish!: () => void;
  const allSettled = new Promise<void>((resolve) => (finish = resolve));
  if (left === 0) finish();

  const settle = (result: CollectedResult) => {
    for (const i of indexes.get(result.taskId) ?? []) {
      if (results[i] !== undefined) continue;
      results[i] = result;
      left -= 1;
      options.onSettled?.(result, i);
    }
    if (left === 0) finish();
  };

  const subs: BusSubscription[] = [];
  for (const id of indexes.keys()) {
    subs.push(
      deps.bus.subscribe(deps.subjects.taskResult(id), (msg) => {
        const decoded = decode(TaskOutcome, msg.data);
        if (decoded.ok && decoded.value.taskId === id) settle(settledOf(decoded.value));
      }),
    );
  }
  const lookUp = async (id: TaskId, final: boolean): Promise<void> => {
    try {
      const status = await ask(deps, Requests.taskGet.at(id), {}, { timeoutMs: requestTimeoutMs });
      if (status.result && FINAL_STATES.has(status.state)) settle(settledOf(status.result));
      else if (final) settle({ taskId: id, status: "timeout", error: `timeout after ${timeoutMs} ms (the task is ${status.state})` });
    } catch (err) {
      if (err instanceof RemoteError && err.code === "NOT_FOUND") settle({ taskId: id, status: "unknown", error: `no task '${id}'` });
      else if (final) settle({ taskId: id, status: "timeout", error: `timeout after ${timeoutMs} ms (${messageOf(err)})` });
      else
        deps.log.warn({ taskId: id, err: messageOf(err) }, "result collection: the task's state could not be read; waiting for its result");
    }
  };

  let timer: ReturnType<typeof setTimeout> | undefined;
  const onAbort = () => {
    for (const id of indexes.keys()) settle({ taskId: id, status: "error", error: "aborted" });
  };
  try {
    await deps.bus.flush();
    await Promise.all([...indexes.keys()].map((id) => lookUp(id, false)));
    options.signal?.addEventListener("abort", onAbort, { once: true });
    if (options.signal?.aborted) onAbort();
    await Promise.race([
      allSettled,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    if (left > 0) {
      const unsettled = [...indexes.keys()].filter((id) => (indexes.get(id) ?? []).some((i) => results[i] === undefined));
      await Promise.all(unsettled.map((id) => lookUp(id, true)));
    }
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
    await Promise.all(subs.map((s) => s.unsubscribe()));
  }
  return taskIds.map((taskId, i) => results[i] ?? { taskId, status: "timeout", error: `timeout after ${timeoutMs} ms` });
}
