/** What the protocol servers share about the tasks they run: argument checks, a task's summary, the tasks started. */
import type { TaskError, TaskId, TaskOutcome, Usage } from "../../protocol/index.js";
import type { LibraryTool } from "./library-tools.js";

/** How many started tasks a server remembers for listing (the oldest are forgotten first). */
export const MAX_LISTED_TASKS = 1000;

/** The ids of the tasks a server started, oldest first, at most {@link MAX_LISTED_TASKS}. */
export class TaskList {
  private readonly started: TaskId[] = [];

  add(taskId: TaskId): void {
    if (this.started.includes(taskId)) return;
    this.started.push(taskId);
    if (this.started.length > MAX_LISTED_TASKS) this.started.shift();
  }

  ids(): readonly TaskId[] {
    return [...this.started];
  }
}

/** A task's outcome as the protocol servers answer it. */
export interface TaskSummary {
  [key: string]: unknown;
  taskId: TaskId;
  status: TaskOutcome["status"];
  content: string;
  notes: Record<string, unknown>;
  usage?: Usage;
  parsedContent?: unknown;
  error?: string;
}

/** The outcome's fields a client reads: status, content, notes and usage, the error in one line. */
export function taskSummary(outcome: TaskOutcome): TaskSummary {
  const usage = usageOf(outcome.notes.usage);
  return {
    taskId: outcome.taskId,
    status: outcome.status,
    content: outcome.content,
    notes: outcome.notes,
    ...(usage ? { usage } : {}),
    ...(outcome.parsedContent === undefined ? {} : { parsedContent: outcome.parsedContent }),
    ...(outcome.error ? { error: errorLine(outcome.error) } : {}),
  };
}

/** `TYPE (reason): message`, as `dirigent run` prints it. */
export function errorLine(error: TaskError): string {
  const why = error.type === "TASK_FAILURE" ? error.reason : error.type === "RESOURCE_EXHAUSTION" ? error.resource : undefined;
  return `${error.type}${why ? ` (${why})` : ""}: ${error.message}`;
}

function usageOf(value: unknown): Usage | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const prompt = Reflect.get(value, "promptTokens");
  const completion = Reflect.get(value, "completionTokens");
  return typeof prompt === "number" && typeof completion === "number" ? { promptTokens: prompt, completionTokens: completion } : undefined;
}

/** Why `args` do not fit a template's inputs (an unknown name, a missing one), or undefined when they do. */
export function checkArguments(tool: LibraryTool, args: Record<string, unknown>): string | undefined {
  const known = new Set(tool.params.map((p) => p.name));
  const unknown = Object.keys(args).filter((k) => !known.has(k));
  if (unknown.length > 0)
    return `${tool.name}: unknown input${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => `'${k.slice(0, 64)}'`).join(", ")} (inputs: ${[...known].join(", ") || "none"})`;
  const missing = tool.params.filter((p) => p.required && args[p.name] === undefined).map((p) => `'${p.name}'`);
  if (missing.length > 0) return `${tool.name}: missing input${missing.length > 1 ? "s" : ""} ${missing.join(", ")}`;
  return undefined;
}
