/**
 * The progress reports of a `map` node as the Evaluator publishes them (`map.started`, `branch.started`,
 * `branch.finished`, the messages and data of issue 19), and the task events a Director makes of them, encoded and
 * decoded through the protocol schemas as they travel. Unit tests of the CLI's and the inspector's map views feed
 * these, with node paths as the Evaluator reports them (branch 3 of a map over a list at `0/map:2`, a map of steps'
 * at `0.steps.2`); the e2e tests run real maps.
 */
import { decode, encode, Progress, TaskEvent, type BranchStatus, type TaskId } from "../../protocol/index.js";

/** One report: its event type, message and data. */
export type MapReport = Pick<Progress, "event" | "message" | "data">;

export const mapStarted = (
  nodePath: string,
  total: number,
  maxParallel: number,
  onFailure: "fail_fast" | "collect" = "fail_fast",
): MapReport => ({
  event: "map.started",
  message: `map started: ${total} branches, ${maxParallel} at once`,
  data: { nodePath, kind: "map", total, maxParallel, onFailure },
});

export const branchStarted = (mapPath: string, nodePath: string, branch: number, total: number): MapReport => ({
  event: "branch.started",
  message: `branch ${branch}/${total}`,
  data: { nodePath, mapPath, branch, total },
});

export const branchFinished = (
  mapPath: string,
  nodePath: string,
  branch: number,
  total: number,
  status: BranchStatus,
  finished: number,
): MapReport => ({
  event: "branch.finished",
  message: `branch ${branch}/${total} ${status}`,
  data: { nodePath, mapPath, branch, total, status, finished },
});

/** The report as it goes on `<root>.progress.<taskId>` (what `publishProgress` sends). */
export const progressBytes = (taskId: string, report: MapReport): Uint8Array =>
  encode(Progress, { type: "task.progress", taskId: taskId as TaskId, ...report });

/**
 * The task events a Director publishes for these reports (it relays a report's event, message and data in the
 * task's state), as a client decodes them from `<root>.tasks.<id>.events`.
 */
export function relayed(taskId: string, reports: MapReport[], firstSeq = 3): TaskEvent[] {
  return reports.map((report, i) => {
    const progress = decode(Progress, progressBytes(taskId, report));
    if (!progress.ok) throw new Error(progress.error.message);
    const { event, message, data } = progress.value;
    const sent = {
      taskId,
      seq: firstSeq + i,
      type: event,
      state: "running",
      at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
      message,
      data,
    };
    const decoded = decode(TaskEvent, encode(TaskEvent, sent as TaskEvent));
    if (!decoded.ok) throw new Error(decoded.error.message);
    return decoded.value;
  });
}
