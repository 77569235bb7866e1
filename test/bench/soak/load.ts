/**
 * The load of `npm run soak`: a steady stream of tasks (atomic, sequential, map) submitted as any NATS client
 * would, on `<root>.tasks.submit`, and their results read back from the events stream, where the Directors store
 * them. Each step's description carries a marker (`soak-17-s2`), so the model calls of a step can be counted.
 */
import { jetstream, type ConsumerMessages } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { setTimeout as delay } from "node:timers/promises";
import type { Subjects } from "../../../protocol/index.js";

/** The three kinds of task, in the order they take turns: two atomic tasks to each sequential and map task. */
const KINDS = ["atomic", "sequential", "atomic", "map"] as const;
export type Kind = (typeof KINDS)[number];
/** Steps of a sequential task and branches of a map task. */
export const STEPS = 3;

/** A task to submit. */
export interface SoakTask {
  taskId: string;
  kind: Kind;
  xml: string;
  inputs: Record<string, unknown>;
  /** The markers of its steps, one model call each. */
  steps: string[];
}

/** The `n`th task of the run (`run` keeps task ids apart between runs on one server). */
export function taskOf(run: string, n: number): SoakTask {
  const kind = KINDS[n % KINDS.length] ?? "atomic";
  const taskId = `soak-${run}-${n}`;
  const steps = Array.from({ length: kind === "atomic" ? 1 : STEPS }, (_, i) => `soak-${n}-s${i + 1}`);
  const step = (marker: string) => `<task><description>Do ${marker} now.</description></task>`;
  if (kind === "atomic") return { taskId, kind, xml: step(steps[0] ?? ""), inputs: {}, steps };
  if (kind === "sequential")
    return { taskId, kind, xml: `<task type="sequential"><steps>${steps.map(step).join("")}</steps></task>`, inputs: {}, steps };
  return {
    taskId,
    kind,
    xml: `<task type="map" over="items" max_parallel="${STEPS}"><steps>${step("{{item}}")}</steps></task>`,
    inputs: { items: steps },
    steps,
  };
}

/** The step marker a model request is for, from its last user message. */
export function stepOf(body: unknown): string | undefined {
  const messages = (body as { messages?: { role: string; content: unknown }[] }).messages ?? [];
  const user = messages.filter((m) => m.role === "user").at(-1);
  return JSON.stringify(user?.content ?? "")
    .match(/soak-\d+-s\d+/g)
    ?.at(-1);
}

const SUBMIT_TIMEOUT_MS = 10_000;
const SUBMIT_ATTEMPTS = 5;

/**
 * Submits task after task at `perSecond` (task `n` is due `n / perSecond` s after the start, so a slow answer does
 * not slow the stream) until `signal` aborts; resolves once every submission is answered.
 */
export async function submitSteadily(
  nc: NatsConnection,
  subjects: Subjects,
  run: string,
  perSecond: number,
  signal: AbortSignal,
  /** Called with each task's submission once answered: `undefined` when accepted, else why not. */
  onAnswer: (task: SoakTask, refusal: string | undefined) => void,
): Promise<number> {
  const pending = new Set<Promise<void>>();
  const started = performance.now();
  let n = 0;
  while (!signal.aborted) {
    const due = started + (n * 1000) / perSecond - performance.now();
    if (due > 0) await delay(due, undefined, { signal }).catch(() => undefined);
    if (signal.aborted) break;
    const task = taskOf(run, n++);
    const p = submitOne(nc, subjects, task).then(
      () => onAnswer(task, undefined),
      (err: unknown) => onAnswer(task, String(err)),
    );
    pending.add(p);
    void p.finally(() => pending.delete(p));
  }
  await Promise.all([...pending]);
  return n;
}

/** Submits one task, retrying a submission that timed out (the same task id: a stored one answers `duplicate`). */
async function submitOne(nc: NatsConnection, subjects: Subjects, task: SoakTask): Promise<void> {
  const body = JSON.stringify({ taskId: task.taskId, xml: task.xml, inputs: task.inputs });
  for (let attempt = 1; ; attempt++) {
    try {
      const reply = (await nc.request(subjects.submit, body, { timeout: SUBMIT_TIMEOUT_MS })).json<{ status?: string }>();
      if (reply.status === "accepted" || reply.status === "duplicate") return;
      throw new Error(`submission answered ${JSON.stringify(reply).slice(0, 300)}`);
    } catch (err) {
      if (attempt >= SUBMIT_ATTEMPTS) throw err;
      await delay(500);
    }
  }
}

/** The stored results, read from the events stream: statuses (with the error, if any) by task id, in the order stored. */
export interface Results {
  readonly byTask: Map<string, string[]>;
  /** Wakes `until` waiters. */
  until(condition: () => boolean, timeoutMs: number): Promise<boolean>;
  stop(): Promise<void>;
}

/** Follows every result stored under `subjects` with an ordered consumer of the events stream. */
export async function followResults(nc: NatsConnection, subjects: Subjects): Promise<Results> {
  const byTask = new Map<string, string[]>();
  const waiters = new Set<() => void>();
  const js = jetstream(nc);
  const messages: ConsumerMessages = await (
    await js.consumers.get(subjects.eventsStream, { filter_subjects: subjects.anyTaskResult })
  ).consume({ expires: 2000 });
  const reading = (async () => {
    for await (const m of messages) {
      const outcome = m.json<{ taskId: string; status: string; error?: { type?: string; message?: string } }>();
      const status = outcome.error ? `${outcome.status} ${outcome.error.type ?? ""}: ${outcome.error.message ?? ""}` : outcome.status;
      byTask.set(outcome.taskId, [...(byTask.get(outcome.taskId) ?? []), status]);
      for (const wake of waiters) wake();
    }
  })();
  return {
    byTask,
    async until(condition, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (!condition()) {
        const left = deadline - Date.now();
        if (left <= 0) return false;
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            waiters.delete(done);
            resolve();
          };
          const timer = setTimeout(done, Math.min(left, 1000));
          waiters.add(done);
        });
      }
      return true;
    },
    async stop() {
      messages.stop();
      await reading.catch(() => undefined);
    },
  };
}
