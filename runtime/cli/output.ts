/** How the CLI shows events and results to people. */
import {
  BranchFinishedEventData,
  BranchStartedEventData,
  branchMapPath,
  MapStartedEventData,
  type TaskEvent,
  type TaskOutcome,
} from "../../protocol/index.js";

/** One line per event: `[seq] state  type  message`; a map's progress as {@link mapProgressText} words it. */
export function formatEvent(event: TaskEvent): string {
  const text = mapProgressText(event) ?? event.message;
  const message = text ? `  ${text}` : "";
  // A prompt's compiled template is shown once, so the user sees what runs.
  const xml = event.type === "task.compiled" && typeof event.data?.["xml"] === "string" ? `\n${event.data["xml"]}` : "";
  return `[${String(event.seq).padStart(3)}] ${event.state.padEnd(19)} ${event.type}${message}${xml}`;
}

/**
 * The result block printed after the events. An answer already printed as it streamed (`streamed`, the text of the
 * last run of `model.delta` events) is not printed again.
 */
export function formatOutcome(outcome: TaskOutcome, options: { streamed?: string | undefined } = {}): string {
  const lines = [`result: ${outcome.status}`];
  if (outcome.error) {
    const e = outcome.error;
    const reason = e.type === "TASK_FAILURE" ? ` (${e.reason})` : e.type === "RESOURCE_EXHAUSTION" ? ` (${e.resource})` : "";
    lines.push(`error: ${e.type}${reason}: ${e.message}`);
  }
  const usage = outcome.notes["usage"];
  if (usage && typeof usage === "object") lines.push(`usage: ${JSON.stringify(usage)}`);
  const task = outcome.notes["task_usage"];
  const cost = outcome.notes["task_cost"];
  if (task && typeof task === "object")
    lines.push(`task usage: ${JSON.stringify(task)}${typeof cost === "number" ? `, cost ${cost}` : ""}`);
  const streamed = options.streamed !== undefined && options.streamed.trim() === outcome.content.trim();
  if (outcome.content && streamed) lines.push("(the answer is the one streamed above)");
  else if (outcome.content) lines.push("", outcome.content);
  return lines.join("\n");
}

/** What {@link createEventPrinter} returns. */
export interface EventPrinter {
  /** Prints one event. */
  event(event: TaskEvent): void;
  /** Closes an open line of streamed text. */
  end(): void;
  /** The text of the last run of `model.delta` events (the streamed answer), if any. */
  streamed(): string | undefined;
}

/**
 * Prints events as they arrive. A run of `model.delta` events is shown as one: a line for its first event
 * (`[  4] running  model.delta  streaming the answer:`), then their text as it arrives, so the numbers of the events
 * that follow (`[ 15]`) skip the pieces; a newline closes it before the next other event.
 */
export function createEventPrinter(write: (text: string) => void): EventPrinter {
  let inline = false;
  let last: string | undefined;
  const end = () => {
    if (inline) write("\n");
    inline = false;
  };
  return {
    event(event) {
      const text = event.data?.["text"];
      if (event.type === "model.delta" && typeof text === "string") {
        if (!inline) {
          write(formatEvent({ ...event, message: "streaming the answer:" }) + "\n");
          last = "";
        }
        write(text);
        last += text;
        inline = true;
        return;
      }
      end();
      write(formatEvent(event) + "\n");
    },
    end,
    streamed: () => last,
  };
}

/** The task's root node: a map there is named `map`, any other `map <path>:`. */
const ROOT_PATH = "0";

/** A node path as printed: without control characters (it comes from an event). */
const printable = (path: string) => path.replace(/[\u0000-\u001f\u007f-\u009f]/g, "?");

/**
 * How the progress of a `map` node reads, or undefined for another event (or one whose data is malformed: it is then
 * printed as sent). `branch.finished` says how far the map is, `map 5/8 done`, and names a branch that did not
 * complete, `map 5/8 done (branch 3 FAILED)`. A map that is not the task's root node is named by its path, so
 * nested maps whose branches interleave stay apart: `map 0.steps.1: 5/8 done`; a branch's map is the one its
 * (scoped) node path names, so the maps at the step of a map over a list read `map 0/map:1:0.steps.0: 1/2 done`.
 */
export function mapProgressText(event: TaskEvent): string | undefined {
  const named = (path: string) => (path === ROOT_PATH ? "map" : `map ${printable(path)}`);
  if (event.type === "map.started") {
    const data = MapStartedEventData.safeParse(event.data);
    if (!data.success) return undefined;
    const { nodePath, total, maxParallel, onFailure } = data.data;
    const failures = onFailure === "collect" ? ", failures collected" : "";
    return `${named(nodePath)} started: ${total} branch${total === 1 ? "" : "es"}, ${Math.min(maxParallel, total)} at once${failures}`;
  }
  if (event.type === "branch.started") {
    const data = BranchStartedEventData.safeParse(event.data);
    if (!data.success) return undefined;
    const { branch, total } = data.data;
    const mapPath = branchMapPath(data.data);
    return mapPath === ROOT_PATH ? `branch ${branch}/${total}` : `${named(mapPath)}: branch ${branch}/${total}`;
  }
  if (event.type === "branch.finished") {
    const data = BranchFinishedEventData.safeParse(event.data);
    if (!data.success) return undefined;
    const { branch, total, status, finished } = data.data;
    const mapPath = branchMapPath(data.data);
    const failed = status === "COMPLETE" ? "" : ` (branch ${branch} ${status})`;
    return `${named(mapPath)}${mapPath === ROOT_PATH ? "" : ":"} ${finished}/${total} done${failed}`;
  }
  return undefined;
}
