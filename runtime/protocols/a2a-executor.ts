/**
 * The A2A agent's work (`dirigent a2a`): a message starts a dirigent task that keeps the A2A task's id, its events
 * become `working` status updates, a question of the task (`request_user_input`) becomes `input-required`, answered
 * by the next message to the same task, and its result becomes an artifact and the final status.
 *
 * A message names a library template in `metadata.skill` (or a data part's `skill`), with the inputs in a data part
 * (`{ "inputs": {…} }` or the object itself); a template with one input takes the message's text. A message that
 * names no skill runs its text as one atomic task.
 */
import { randomUUID } from "node:crypto";
import { Role, TaskState, type Message, type Part, type Task } from "@a2a-js/sdk";
import { AgentEvent, type AgentExecutor, type ExecutionEventBus, type RequestContext } from "@a2a-js/sdk/server";
import { parseTaskId, type TaskBudget, type TaskEvent, type TaskId, type TaskOutcome } from "../../protocol/index.js";
import { messageOf } from "../../protocol/errors.js";
import { RemoteError, type DirigentClient } from "../client.js";
import type { LibraryTool } from "./library-tools.js";
import { checkArguments, taskSummary, type TaskList } from "./task-calls.js";

/** The template a message without a skill runs: its text as the task. */
export const TEXT_TASK_XML = "<task><description>{{request}}</description></task>";

/** What the executor needs. */
export interface A2aExecutorDeps {
  client: DirigentClient;
  tools: readonly LibraryTool[];
  budget?: TaskBudget;
  tasks: TaskList;
}

/** A dirigent task being followed for its A2A task, across the turns of an `input-required` round trip. */
interface Run {
  contextId: string;
  /** The bus of the turn in progress; none while the task waits for input. */
  bus?: ExecutionEventBus | undefined;
  /** Ends the turn in progress (the task asked a question). */
  pause?: () => void;
  /** Settles when the task has ended and its final status was published. */
  done: Promise<void>;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

const now = () => new Date().toISOString();

/** A text part. */
export const textPart = (text: string): Part => ({
  content: { $case: "text", value: text },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

/** A JSON data part. */
export const dataPart = (value: unknown): Part => ({
  content: { $case: "data", value },
  metadata: undefined,
  filename: "",
  mediaType: "application/json",
});

/** A message of the agent in A2A task `taskId` (the A2A task's id: a rejected one may be no dirigent task id). */
function agentMessage(taskId: string, contextId: string, parts: Part[]): Message {
  return { messageId: randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts, metadata: {}, extensions: [], referenceTaskIds: [] };
}

/** A status update of A2A task `taskId` (the A2A task's id: a rejected one may be no dirigent task id). */
function status(bus: ExecutionEventBus, taskId: string, contextId: string, state: TaskState, text?: string): void {
  bus.publish(
    AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: { state, timestamp: now(), message: text === undefined ? undefined : agentMessage(taskId, contextId, [textPart(text)]) },
      metadata: {},
    }),
  );
}

/** The text of a message's text parts, and its first data part. */
function readMessage(message: Message): { text: string; data?: Record<string, unknown> } {
  const text = message.parts
    .flatMap((p) => (p.content?.$case === "text" ? [p.content.value] : []))
    .join("\n")
    .trim();
  const data = message.parts.flatMap((p) => (p.content?.$case === "data" && isRecord(p.content.value) ? [p.content.value] : []))[0];
  return { text, ...(data ? { data } : {}) };
}

/** The template and inputs a message asks for, or why it cannot run. */
export function taskOfMessage(
  message: Message,
  tools: ReadonlyMap<string, LibraryTool>,
): { xml: string; inputs: Record<string, unknown> } | { problem: string } {
  const { text, data } = readMessage(message);
  const skill = message.metadata?.skill ?? data?.skill;
  if (skill === undefined) {
    if (text === "") return { problem: "the message has no text and names no skill (metadata.skill)" };
    return { xml: TEXT_TASK_XML, inputs: { request: text } };
  }
  const tool = typeof skill === "string" ? tools.get(skill) : undefined;
  if (!tool) return { problem: `no skill '${String(skill).slice(0, 64)}' (skills: ${[...tools.keys()].join(", ") || "none"})` };
  let inputs: Record<string, unknown> = {};
  if (data) {
    const given = isRecord(data.inputs) ? data.inputs : Object.fromEntries(Object.entries(data).filter(([k]) => k !== "skill"));
    inputs = given;
  } else if (tool.params.length === 1 && tool.params[0] && text !== "") {
    inputs = { [tool.params[0].name]: text };
  }
  const problem = checkArguments(tool, inputs);
  return problem ? { problem } : { xml: tool.xml, inputs };
}

/** The executor of `dirigent a2a`: one per server, holding the tasks it follows. */
export class DirigentExecutor implements AgentExecutor {
  private readonly runs = new Map<TaskId, Run>();
  private readonly tools: ReadonlyMap<string, LibraryTool>;

  constructor(private readonly deps: A2aExecutorDeps) {
    this.tools = new Map(deps.tools.map((t) => [t.name, t]));
  }

  execute = async (context: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const { taskId, contextId } = context;
    const message = context.userMessage;
    const existing = context.task;
    const task: Task = existing ?? {
      id: taskId,
      contextId,
      status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined },
      artifacts: [],
      history: [message],
      metadata: message.metadata,
    };
    bus.publish(AgentEvent.task(task));
    const id = parseTaskId(taskId);
    const run = id === undefined ? undefined : this.runs.get(id);
    if (existing && run && id !== undefined) return this.answer(run, id, message, bus);
    if (existing) {
      status(bus, taskId, contextId, TaskState.TASK_STATE_FAILED, "this server no longer follows the task (it was restarted)");
      return;
    }
    const asked = taskOfMessage(message, this.tools);
    if ("problem" in asked) {
      status(bus, taskId, contextId, TaskState.TASK_STATE_REJECTED, asked.problem);
      return;
    }
    // The dirigent task keeps the A2A task's id, which a client may choose: one that is no task id fails the task, as
    // the dirigent client refuses it.
    if (id === undefined) {
      status(bus, taskId, contextId, TaskState.TASK_STATE_FAILED, `illegal task id token '${taskId}'`);
      return;
    }
    return this.start(id, contextId, asked, bus);
  };

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    // An A2A task whose id is no task id runs no dirigent task: there is nothing to cancel.
    const id = parseTaskId(taskId);
    const run = id === undefined ? undefined : this.runs.get(id);
    // A task waiting for input has no turn in progress: its final status goes to the bus of the cancellation.
    if (run && run.bus === undefined) run.bus = bus;
    if (id !== undefined) await this.deps.client.cancel(id).catch(() => undefined);
    // A task that ended as the cancellation came gets its final status here, or the cancellation would wait for one.
    if (!run) status(bus, taskId, "", TaskState.TASK_STATE_CANCELED);
  };

  private start(taskId: TaskId, contextId: string, asked: { xml: string; inputs: Record<string, unknown> }, bus: ExecutionEventBus) {
    const { client, budget } = this.deps;
    const run: Run = { contextId, bus, done: Promise.resolve() };
    const turn = this.turn(run);
    this.runs.set(taskId, run);
    const onEvent = (e: TaskEvent) => this.onEvent(run, taskId, e);
    run.done = client
      .run({ xml: asked.xml, inputs: asked.inputs, taskId, ...(budget ? { budget } : {}) }, onEvent, {
        onSubmitted: () => {
          this.deps.tasks.add(taskId);
          if (run.bus) status(run.bus, taskId, contextId, TaskState.TASK_STATE_WORKING, `task ${taskId} submitted`);
        },
      })
      .then(
        (outcome) => this.finish(run, taskId, outcome),
        (err: unknown) => {
          const text = err instanceof RemoteError ? `${err.code}: ${err.message}` : messageOf(err);
          if (run.bus) status(run.bus, taskId, contextId, TaskState.TASK_STATE_FAILED, text);
        },
      )
      .finally(() => this.runs.delete(taskId));
    return Promise.race([turn, run.done]);
  }

  /** Answers the task's question with the message's text, then follows it to its end or its next question. */
  private async answer(run: Run, taskId: TaskId, message: Message, bus: ExecutionEventBus): Promise<void> {
    run.bus = bus;
    const turn = this.turn(run);
    const { text } = readMessage(message);
    status(bus, taskId, run.contextId, TaskState.TASK_STATE_WORKING);
    try {
      await this.deps.client.input(taskId, text);
    } catch (err) {
      run.bus = undefined;
      status(bus, taskId, run.contextId, TaskState.TASK_STATE_INPUT_REQUIRED, `the answer was not taken (${messageOf(err)}); answer again`);
      return;
    }
    await Promise.race([turn, run.done]);
  }

  /** A promise that settles when the task asks its next question. */
  private turn(run: Run): Promise<void> {
    return new Promise((resolve) => (run.pause = resolve));
  }

  private onEvent(run: Run, taskId: TaskId, e: TaskEvent): void {
    const bus = run.bus;
    if (!bus) return;
    if (e.type === "continuation.input") {
      run.bus = undefined;
      status(bus, taskId, run.contextId, TaskState.TASK_STATE_INPUT_REQUIRED, e.message ?? "the task asks for input");
      run.pause?.();
      return;
    }
    status(bus, taskId, run.contextId, TaskState.TASK_STATE_WORKING, `${e.type} (${e.state})${e.message ? `: ${e.message}` : ""}`);
  }

  private finish(run: Run, taskId: TaskId, outcome: TaskOutcome): void {
    const bus = run.bus;
    if (!bus) return;
    const summary = taskSummary(outcome);
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId: run.contextId,
        artifact: {
          artifactId: `${taskId}-result`,
          name: "result",
          description: `the result of dirigent task ${taskId}`,
          parts: [textPart(outcome.content), dataPart(summary)],
          metadata: {},
          extensions: [],
        },
        append: false,
        lastChunk: true,
        metadata: {},
      }),
    );
    const state =
      outcome.status === "COMPLETE"
        ? TaskState.TASK_STATE_COMPLETED
        : outcome.status === "CANCELLED"
          ? TaskState.TASK_STATE_CANCELED
          : TaskState.TASK_STATE_FAILED;
    status(bus, taskId, run.contextId, state, outcome.status === "COMPLETE" ? outcome.content : (summary.error ?? outcome.status));
  }
}
