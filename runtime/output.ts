/** How the CLI shows events and results to people. */
import type { TaskEvent, TaskOutcome } from "../protocol/index.js";

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
  if (outcome.content) lines.push("", outcome.content);
  return lines.join("\n");
}
