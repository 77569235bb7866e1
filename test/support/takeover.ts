/**
 * The setting of a takeover test: Director processes that share one task, the task's events and results recorded
 * from its subjects, and the Director that claimed it (to kill it).
 */
import { createSubjects, decode, TaskEvent, TaskOutcome } from "../../protocol/index.js";
import type { Stack } from "./stack.js";
import { startCli, type CliProcess } from "./processes.js";
import { Recorder } from "./recorder.js";

/** Starts `count` Director processes on `url` under `root` with `env`, ready to take work. */
export async function startDirectors(url: string, root: string, env: Record<string, string>, count = 2): Promise<CliProcess[]> {
  const directors = Array.from({ length: count }, () =>
    startCli(["worker", "--role", "director", "--nats", url, "--prefix", root, "--concurrency", "2"], env),
  );
  await Promise.all(directors.map((d) => d.waitFor(/ready/)));
  return directors;
}

/** Records the events and results of task `taskId` as a client sees them; `onEvent` hears each event too. */
export async function recordTask(
  stack: Stack,
  taskId: string,
  onEvent?: (event: TaskEvent) => void,
): Promise<{ events: Recorder<TaskEvent>; results: Recorder<TaskOutcome> }> {
  const subjects = createSubjects(stack.root);
  const events = new Recorder<TaskEvent>();
  const results = new Recorder<TaskOutcome>();
  stack.transport.bus.subscribe(subjects.taskEvents(taskId), (m) => {
    const d = decode(TaskEvent, m.data);
    if (!d.ok) return;
    events.push(d.value);
    onEvent?.(d.value);
  });
  stack.transport.bus.subscribe(subjects.taskResult(taskId), (m) => {
    const d = decode(TaskOutcome, m.data);
    if (d.ok) results.push(d.value);
  });
  await stack.transport.bus.flush();
  return { events, results };
}

/** The Director whose log says it claimed task `taskId`. */
export function claimant(directors: readonly CliProcess[], taskId: string): Promise<CliProcess> {
  const claimed = new RegExp(`"taskId":"${taskId}"[^\\n]*"task claimed"`);
  return Promise.race(directors.map((d) => d.waitFor(claimed).then(() => d)));
}
