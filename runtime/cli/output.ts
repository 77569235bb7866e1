/** How the CLI shows events and results to people. */
import type { TaskEvent, TaskOutcome } from "../../protocol/index.js";

/** One line per event: `[seq] state  type  message`. */
export function formatEvent(event: TaskEvent): string {
  const message = event.message ? `  ${event.message}` : "";
  // A prompt's compiled template is shown once, so the user sees what runs.
  const xml = event.type === "task.compiled" && typeof event.data?.["xml"] === "string" ? `\n${event.data["xml"]}` : "";
  return `[${String(event.seq).padStart(3)}] ${event.state.padEnd(19)} ${event.type}${message}${xml}`;
}

/** The result block printed after the events. */
export function formatOutcome(outcome: TaskOutcome): string {
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
  if (outcome.content) lines.push("", outcome.content);
  return lines.join("\n");
}

/**
 * Prints events as they arrive: `model.delta` text inline, as the answer streams in, and a newline before the
 * next other event. `end()` closes an open line of deltas.
 */
export function createEventPrinter(write: (text: string) => void): { event(event: TaskEvent): void; end(): void } {
  let inline = false;
  const end = () => {
    if (inline) write("\n");
    inline = false;
  };
  return {
    event(event) {
      const text = event.data?.["text"];
      if (event.type === "model.delta" && typeof text === "string") {
        write(text);
        inline = true;
        return;
      }
      end();
      write(formatEvent(event) + "\n");
    },
    end,
  };
}
